"""The resolver fields (upstream, responseTimeMs, cached, dnssec): each one catalogue entry plus
its parsing rule, and so in ingest, the log, CSV, filters, groups and old databases alike."""

import csv
import io
import sqlite3

import pytest

from support.helpers import AUTH, assert_error, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
RESOLVED = [
    record(client_id="a", upstream="9.9.9.9#53", responseTimeMs=12.5, cached=False, dnssec="secure"),
    record(client_id="a", question="b.example", upstream="9.9.9.9#53", responseTimeMs=3, cached=False),
    record(client_id="b", question="c.example", upstream="1.1.1.1#853", cached=True, dnssec="insecure"),
    record(client_id="b", question="d.example", cached=True),
    record(client_id="c", question="e.example"),
]


def log(client, query=""):
    response = client.get(f"/v2/activity-log?{WINDOW}&sortOrder=asc&pageSize=500&{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["queries"]


def test_the_fields_come_back_in_query_data(client):
    ingest(client, *RESOLVED)
    queries = log(client)
    assert [(q["upstream"], q["responseTimeMs"], q["cached"], q["dnssec"]) for q in queries] == [
        ("9.9.9.9#53", 12.5, False, "secure"),
        ("9.9.9.9#53", 3.0, False, ""),
        ("1.1.1.1#853", None, True, "insecure"),
        ("", None, True, ""),
        ("", None, None, ""),
    ]


def test_filters_on_the_new_fields(client):
    ingest(client, *RESOLVED)
    assert [q["clientId"] for q in log(client, "upstream[]=9.9.9.9%2353")] == ["a", "a"]
    assert [q["question"] for q in log(client, "cached[]=true")] == ["c.example", "d.example"]
    assert [q["question"] for q in log(client, "dnssec[]=secure&dnssec[]=insecure")] == ["example.com", "c.example"]
    count = client.get(f"/v2/statistic/count?{WINDOW}&cached[]=false", headers=AUTH).json["count"]
    assert count == 2


def test_groups_on_the_new_fields(client):
    ingest(client, *RESOLVED)
    by_upstream = client.get(f"/v2/statistic/count/upstream?{WINDOW}", headers=AUTH).json["counts"]
    assert by_upstream == [
        {"value": "", "count": 2},
        {"value": "9.9.9.9#53", "count": 2},
        {"value": "1.1.1.1#853", "count": 1},
    ]
    by_cache = client.get(f"/v2/statistic/count/cached?{WINDOW}", headers=AUTH).json["counts"]
    assert by_cache == [{"value": "false", "count": 2}, {"value": "true", "count": 2}, {"value": "", "count": 1}]
    series = client.get(f"/v2/statistic/timeseries/upstream?{WINDOW}&interval=86400", headers=AUTH).json
    assert series["queries"][0]["count"] == {"": 2, "9.9.9.9#53": 2, "1.1.1.1#853": 1}
    columns = client.get("/v2/data-availability", headers=AUTH).json["columns"]
    assert {"name": "upstream", "type": "string", "filterable": True, "groupable": True} in columns
    assert {"name": "cached", "type": "boolean", "filterable": True, "groupable": True} in columns


def test_csv_carries_them_and_reads_them_back(client, make_app, tmp_path):
    ingest(client, *RESOLVED)
    text = client.get(f"/v2/activity-log/csv?{WINDOW}&sortOrder=asc", headers=AUTH).get_data(as_text=True)
    table = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [(r["upstream"], r["responseTimeMs"], r["cached"], r["dnssec"]) for r in table] == [
        ("9.9.9.9#53", "12.5", "false", "secure"),
        ("9.9.9.9#53", "3.0", "false", ""),
        ("1.1.1.1#853", "", "true", "insecure"),
        ("", "", "true", ""),
        ("", "", "", ""),
    ]
    path = tmp_path / "export.csv"
    path.write_text(text)
    other = make_app(ANALYTICS_DATABASE=str(tmp_path / "other.db"))
    result = other.test_cli_runner().invoke(args=["ingest", str(path)])
    assert result.exit_code == 0, result.output
    again = other.test_client().get(f"/v2/activity-log?{WINDOW}&sortOrder=asc&pageSize=500", headers=AUTH)
    fields = ("question", "upstream", "responseTimeMs", "cached", "dnssec")
    assert [[q[f] for f in fields] for q in again.json["queries"]] == [[q[f] for f in fields] for q in log(client)]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("responseTimeMs", "12"),
        ("responseTimeMs", -1),
        ("responseTimeMs", True),
        ("cached", "yes"),
        ("cached", 1),
        ("upstream", 53),
        ("dnssec", "x" * 33),
    ],
)
def test_bad_values_are_refused_by_name(client, field, value):
    response = client.post("/v2/ingest", json=[record(**{field: value})], headers=AUTH)
    assert field in assert_error(response, 400)["message"]
    assert log(client) == []


def test_a_database_without_the_columns_gains_them(make_app, tmp_path):
    path = tmp_path / "old.db"
    ingest(make_app(ANALYTICS_DATABASE=str(path)).test_client(), record(action=0), record(client_id="b"))
    with sqlite3.connect(path) as conn:  # as a database made before these fields were catalogued
        for column in ("upstream", "response_time_ms", "cached", "dnssec"):
            conn.execute(f"ALTER TABLE record DROP COLUMN {column}")
        conn.execute("DELETE FROM rollup")
        conn.execute("UPDATE store_setting SET value = 'older' WHERE name = 'rollup_layout'")
    client = make_app(ANALYTICS_DATABASE=str(path)).test_client()
    ingest(client, record(client_id="c", upstream="9.9.9.9"))
    assert [q["upstream"] for q in log(client)] == ["", "", "9.9.9.9"]
    # The rollups were counted anew for the new layout: whole days answer from them.
    counts = client.get(f"/v2/statistic/count/clientId?{WINDOW}", headers=AUTH).json["counts"]
    assert counts == [{"value": "b", "count": 1}, {"value": "c", "count": 1}, {"value": "cl1", "count": 1}]


def test_latency_summaries_overall_and_per_group(client):
    times = {"a": [1, 2, 3, 4, 100], "b": [10, 20], "c": []}
    records = [
        record(client_id=name, question=f"{name}{i}.example", upstream=f"up-{name}", responseTimeMs=ms)
        for name, values in times.items()
        for i, ms in enumerate(values)
    ]
    ingest(client, *records, record(client_id="c", question="none.example"))
    body = client.get(f"/v2/statistic/latency?{WINDOW}", headers=AUTH).json
    # Nearest rank over 1 2 3 4 10 20 100: the median is the 4th, the 95th percentile the 7th.
    assert {k: body[k] for k in ("count", "meanMs", "p50Ms", "p95Ms", "maxMs")} == {
        "count": 7,
        "meanMs": pytest.approx(140 / 7),
        "p50Ms": 4.0,
        "p95Ms": 100.0,
        "maxMs": 100.0,
    }
    groups = client.get(f"/v2/statistic/latency/clientId?{WINDOW}", headers=AUTH).json["latencies"]
    assert groups == [
        {"value": "a", "count": 5, "meanMs": 22.0, "p50Ms": 3.0, "p95Ms": 100.0, "maxMs": 100.0},
        {"value": "b", "count": 2, "meanMs": 15.0, "p50Ms": 10.0, "p95Ms": 20.0, "maxMs": 20.0},
    ]
    fewest = client.get(f"/v2/statistic/latency/upstream?{WINDOW}&sortOrder=asc&limit=1", headers=AUTH).json
    assert fewest["latencies"] == [{**groups[1], "value": "up-b"}]
    nothing = client.get(f"/v2/statistic/latency?{WINDOW}&clientId[]=c", headers=AUTH).json
    assert nothing["count"] == 0 and nothing["p95Ms"] is None
