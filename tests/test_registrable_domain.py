"""registrableDomain: every record's eTLD+1 (public suffix list), filterable and groupable
like the question, counted from the question's rollups, also for a database made before it."""

import csv
import io

import pytest

from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import AUTH, ingest, record
from support.stores import as_older_schema

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-03T23:59:59.999Z"
# name -> its registrable domain, as the public suffix list has it
NAMES = {
    "www.example.com": "example.com",
    "example.com": "example.com",
    "a.b.example.co.uk": "example.co.uk",
    "shop.example.co.uk": "example.co.uk",
    "user.github.io": "user.github.io",  # a private-section suffix: each user's site is its own
    "co.uk": "co.uk",  # a public suffix is its own
    "printer.lan": "printer.lan",  # an unknown top-level label counts as a suffix
}


def day_records():
    """Three days; per day every name of NAMES once per hour of 0..3, actions varying."""
    found = []
    for day in range(1, 4):
        for hour in range(4):
            for i, name in enumerate(NAMES):
                found.append(
                    record(
                        client_id="ab"[i % 2],
                        timestamp=f"2024-05-0{day}T0{hour}:{i:02d}:00Z",
                        question=name,
                        action=[0, 1][(i + hour) % 2],
                    )
                )
    return found


def expected_counts(records, predicate=lambda r: True) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in records:
        if predicate(r):
            domain = NAMES[r["question"]]
            counts[domain] = counts.get(domain, 0) + 1
    return counts


def stat(client, path):
    response = client.get(f"/v2/statistic/{path}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json


def test_each_record_carries_its_registrable_domain(client):
    ingest(client, *[record(question=name, registrableDomain="ignored.example") for name in NAMES])
    rows = client.get(f"/v2/activity-log?{WINDOW}&pageSize=100", headers=AUTH).json["queries"]
    assert {row["question"]: row["registrableDomain"] for row in rows} == NAMES, "derived, whatever was sent"
    text = client.get(f"/v2/activity-log/csv?{WINDOW}", headers=AUTH).get_data(as_text=True)
    exported = list(csv.DictReader(io.StringIO(text, newline="")))
    assert {row["question"]: row["registrableDomain"] for row in exported} == NAMES


def test_filter_selects_every_name_under_a_domain(client):
    ingest(client, *day_records())
    rows = client.get(
        f"/v2/activity-log?{WINDOW}&pageSize=500&registrableDomain[]=example.co.uk&registrableDomain[]=co.uk",
        headers=AUTH,
    ).json["queries"]
    assert {row["question"] for row in rows} == {"a.b.example.co.uk", "shop.example.co.uk", "co.uk"}
    assert len(rows) == 3 * 4 * 3
    assert client.get(f"/v2/activity-log?{WINDOW}&registrableDomain[]=nowhere.org", headers=AUTH).json["queries"] == []


@pytest.mark.parametrize(
    "window",
    [
        WINDOW,  # whole days: the rollups
        "startTime=2024-05-01T02:30:00Z&endTime=2024-05-03T01:10:00Z",  # days, hours and records
    ],
)
def test_counts_by_domain_equal_the_records(client, window):
    data = day_records()
    ingest(client, *data)
    start, end = (part.split("=")[1] for part in window.split("&"))
    inside = [r for r in data if start <= r["timestamp"] <= end]
    want = expected_counts(inside)
    counts = stat(client, f"count/registrableDomain?{window}&limit=100")["counts"]
    assert {c["value"]: c["count"] for c in counts} == want
    assert counts[0]["value"] == "example.co.uk" and counts[0]["count"] == max(want.values())
    blocked = stat(client, f"count/registrableDomain?{window}&action[]=0&limit=100")["counts"]
    assert {c["value"]: c["count"] for c in blocked} == expected_counts(inside, lambda r: r["action"] == 0)
    assert stat(client, f"count?{window}&registrableDomain[]=example.com")["count"] == want["example.com"]
    per_name = stat(client, f"count/question?{window}&registrableDomain[]=example.co.uk")["counts"]
    assert {c["value"] for c in per_name} == {"a.b.example.co.uk", "shop.example.co.uk"}
    top = [d for d, _ in sorted(want.items(), key=lambda item: (-item[1], item[0]))[:3]]
    series = stat(client, f"timeseries/registrableDomain?{window}&interval=86400&groupLimit=3")["queries"]
    assert len(series) == 3
    for point in series:
        of_day = expected_counts([r for r in inside if r["timestamp"].startswith(point["time"][:10])])
        assert point["count"] == {d: of_day.get(d, 0) for d in top}


def test_trend_by_domain(client):
    ingest(client, *day_records()[: 4 * len(NAMES)], record(timestamp="2024-05-02T05:00:00Z", question="x.example.com"))
    body = stat(
        client,
        "trend/registrableDomain?startTime=2024-05-02T00:00:00Z&endTime=2024-05-02T23:59:59.999Z"
        "&baselineStartTime=2024-05-01T00:00:00Z&baselineEndTime=2024-05-01T23:59:59.999Z",
    )
    assert body["trends"] == [{"value": "example.com", "count": 1, "baselineCount": 8, "change": -0.875}]


def test_latency_by_domain(client):
    ingest(
        client,
        record(question="a.example.com", responseTimeMs=10),
        record(question="b.example.com", responseTimeMs=30),
        record(question="other.org", responseTimeMs=5),
    )
    body = stat(client, f"latency/registrableDomain?{WINDOW}")
    by_value = {row["value"]: row for row in body["latencies"]}
    assert by_value["example.com"]["count"] == 2 and by_value["example.com"]["maxMs"] == 30
    assert by_value["other.org"]["count"] == 1


def test_stream_filters_by_domain(client):
    token = client.get("/v2/auth/token", headers=AUTH).json["token"]
    response = client.get(
        f"/v2/activity-log/realtime?authToken={token}&registrableDomain[]=example.co.uk", buffered=False
    )
    chunks = iter(response.response)
    assert next(chunks).decode().startswith(":")
    ingest(client, record(question="www.example.com"), record(question="shop.example.co.uk"))
    text = next(chunks).decode()
    assert '"question":"shop.example.co.uk"' in text.replace(" ", "")
    assert "www.example.com" not in text
    response.close()


def test_a_database_made_before_the_field_is_mapped_at_start(app, make_app, client, database, runner):
    """Upgrading: the names already stored, records and statistics past the records' horizon
    alike, get their domain when the service starts on the old database."""
    app.config.update(ANALYTICS_RETENTION_DAYS=30, ANALYTICS_STATISTICS_RETENTION_DAYS=90)
    old_day = (now_ms() // 86_400_000 - 40) * 86_400_000
    ingest(
        client,
        record(timestamp=format_ms(old_day + 3_600_000), question="old.example.com"),
        record(timestamp=format_ms(old_day + 7_200_000), question="www.example.com"),
        record(timestamp=format_ms(now_ms() - 60_000), question="new.example.co.uk"),
    )
    assert "Deleted 2 records" in runner.invoke(args=["retention"]).output
    # The database as the previous schema left it: no map of names to domains.
    as_older_schema(database, 10, "term_domain")
    restarted = make_app(**app.config).test_client()
    old_window = f"startTime={format_ms(old_day)}&endTime={format_ms(old_day + 86_400_000 - 1)}"
    assert stat(restarted, f"count/registrableDomain?{old_window}")["counts"] == [{"value": "example.com", "count": 2}]
    recent = f"startTime={format_ms(now_ms() - 3_600_000)}&endTime=now"
    rows = restarted.get(f"/v2/activity-log?{recent}", headers=AUTH).json["queries"]
    assert [row["registrableDomain"] for row in rows] == ["example.co.uk"]
