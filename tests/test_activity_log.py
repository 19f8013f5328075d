"""GET and DELETE /v2/activity-log: the shared filters, paging, and bad parameters."""

import time

import pytest

import models.clients.deletion
import models.engine.database
import models.records.blocks
from catalogue import READ_FIELDS
from schemas.fields import TRIGGERS

from support.helpers import AUTH, assert_error, clients, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
ACTIONS = (-1, 0, 1, 2, 3)


def varied(i: int) -> dict:
    """Record i of a set where every filterable column takes a few different values."""
    return record(
        f"e{i % 2}",
        f"c{i % 3}",
        f"2024-05-01T{i % 24:02d}:{i % 60:02d}:00Z",
        f"q{i % 7}." + ("example.com", "example.co.uk")[i % 2],
        profileId=f"p{i % 4}",
        action=ACTIONS[i % 5],
        trigger=TRIGGERS[i % 6],
        triggerValue=f"tv{i % 3}",
        spoofTarget=f"st{i % 2}",
        protocol=("legacy", "doh", "dot")[i % 3],
        statusCode=("NOERROR", "NXDOMAIN")[i % 2],
        rrType=("A", "AAAA", "HTTPS", "MX")[i % 4],
        upstream=("9.9.9.9", "1.1.1.1:853")[i % 2],
        responseTimeMs=i * 0.5,
        cached=i % 3 == 0,
        dnssec=("secure", "insecure", "bogus")[i % 3],
        sourceGeoip={"countryCode": ("DE", "US", "FR")[i % 3], "isp": f"isp{i % 2}", "asn": 100 + i % 4},
        answers=[
            {
                "ips": ["192.0.2.1"],
                "geoip": {"countryCode": ("JP", "NL")[i % 2], "isp": f"d{i % 3}", "asn": 200 + i % 3},
            }
        ],
    )


# How each filter's value is read from a wire record (the test's own model of the contract).
VALUE_OF = {
    "endpointId": lambda r: r["endpointId"],
    "clientId": lambda r: r["clientId"],
    "profileId": lambda r: r["profileId"],
    "action": lambda r: r["action"],
    "trigger": lambda r: r["trigger"],
    "triggerValue": lambda r: r["triggerValue"],
    "spoofTarget": lambda r: r["spoofTarget"],
    "question": lambda r: r["question"],
    # Under a public suffix of one label (com) or two (co.uk): the name less its first label.
    "registrableDomain": lambda r: r["question"].split(".", 1)[1],
    "protocol": lambda r: r["protocol"],
    "statusCode": lambda r: r["statusCode"],
    "rrType": lambda r: r["rrType"],
    "upstream": lambda r: r["upstream"],
    "cached": lambda r: r["cached"],
    "dnssec": lambda r: r["dnssec"],
    "srcCountry": lambda r: r["sourceGeoip"]["countryCode"],
    "dstCountry": lambda r: r["answers"][0]["geoip"]["countryCode"],
    "srcAsn": lambda r: r["sourceGeoip"]["asn"],
    "dstAsn": lambda r: r["answers"][0]["geoip"]["asn"],
    "srcIsp": lambda r: r["sourceGeoip"]["isp"],
    "dstIsp": lambda r: r["answers"][0]["geoip"]["isp"],
}
DATA = [varied(i) for i in range(60)]


@pytest.fixture
def loaded(client):
    ingest(client, *DATA)
    return client


def log(client, query, expect=200):
    response = client.get(f"/v2/activity-log?{WINDOW}&pageSize=500&{query}", headers=AUTH)
    assert response.status_code == expect, response.json
    return response.json


def signature(rec):
    return (rec["timestamp"][:19], rec["endpointId"], rec["clientId"], rec["question"])


def expected(predicate):
    return sorted(signature(r) for r in DATA if predicate(r))


def got(body):
    return sorted(signature(r) for r in body["queries"])


def test_the_filters_cover_every_filterable_column():
    assert set(VALUE_OF) == {f.name for f in READ_FIELDS if f.filterable}


@pytest.mark.parametrize("name", sorted(VALUE_OF))
def test_each_filter_alone_with_one_and_two_values(loaded, name):
    values = sorted({VALUE_OF[name](r) for r in DATA}, key=str)
    assert len(values) >= 2
    one = log(loaded, f"{name}[]={values[0]}")
    assert got(one) == expected(lambda r: VALUE_OF[name](r) == values[0])
    assert got(one), "the filter selects something"
    two = log(loaded, f"{name}[]={values[0]}&{name}={values[1]}")  # OR within; both spellings
    assert got(two) == expected(lambda r: VALUE_OF[name](r) in values[:2])
    assert len(two["queries"]) > len(one["queries"])


def test_filters_combine_with_and(loaded):
    body = log(loaded, "endpointId[]=e0&action[]=0&action[]=1&rrType[]=A&rrType[]=HTTPS")
    assert got(body) == expected(
        lambda r: r["endpointId"] == "e0" and r["action"] in (0, 1) and r["rrType"] in ("A", "HTTPS")
    )
    assert body["queries"]


def test_unknown_filter_values_match_nothing(loaded):
    assert log(loaded, "question[]=nowhere.example")["queries"] == []
    assert log(loaded, "clientId[]=zz&clientId[]=c1")["queries"]


def test_query_data_shape(client):
    full = record(
        profileId="p",
        rrType="A",
        statusCode="NOERROR",
        protocol="doh",
        action=2,
        trigger="custom",
        triggerValue="rule",
        spoofTarget="10.0.0.1",
        upstream="9.9.9.9#53",
        responseTimeMs=21.25,
        cached=False,
        dnssec="secure",
        sourceIp="192.0.2.9",
        sourceGeoip={"countryCode": "DE", "city": "Berlin", "isp": "I", "asn": 1},
        answers=[
            {
                "ips": ["10.0.0.1", "2001:db8::1"],
                "geoip": {"countryCode": "US", "city": "", "isp": "", "asn": None},
            }
        ],
        client={"host": "h"},
    )
    bare = record(client_id="bare", timestamp="2024-05-01T11:00:00Z")
    ingest(client, full, bare)
    first, second = log(client, "")["queries"]
    assert first == {
        "timestamp": "2024-05-01T12:00:00.000Z",
        "endpointId": "ep1",
        "clientId": "cl1",
        "profileId": "p",
        "question": "example.com",
        "rrType": "A",
        "statusCode": "NOERROR",
        "protocol": "doh",
        "action": 2,
        "trigger": "custom",
        "triggerValue": "rule",
        "spoofTarget": "10.0.0.1",
        "upstream": "9.9.9.9#53",
        "responseTimeMs": 21.25,
        "cached": False,
        "dnssec": "secure",
        "sourceIp": "192.0.2.9",
        "sourceGeoip": {"countryCode": "DE", "city": "Berlin", "isp": "I", "asn": 1},
        "answers": [
            {
                "ips": ["10.0.0.1", "2001:db8::1"],
                "geoip": {"countryCode": "US", "city": "", "isp": "", "asn": None},
            }
        ],
        "registrableDomain": "example.com",
    }
    assert second == {
        "timestamp": "2024-05-01T11:00:00.000Z",
        "endpointId": "ep1",
        "clientId": "bare",
        "profileId": "",
        "question": "example.com",
        "rrType": "",
        "statusCode": "",
        "protocol": "",
        "action": None,
        "trigger": None,
        "triggerValue": "",
        "spoofTarget": "",
        "upstream": "",
        "responseTimeMs": None,
        "cached": None,
        "dnssec": "",
        "sourceIp": None,
        "sourceGeoip": {"countryCode": "", "city": "", "isp": "", "asn": None},
        "answers": [],
        "registrableDomain": "example.com",
    }


@pytest.mark.parametrize(
    "mode, term, matches",
    [
        ("includes", "ample", {"example.com", "a.example.com", "badexample.com", "ex_ample.org"}),
        ("startsWith", "a.", {"a.example.com"}),
        ("endsWith", ".org", {"ex_ample.org", "x%y.org"}),
        ("excludes", "example", {"ex_ample.org", "x%y.org"}),
        ("apex", "example.com", {"example.com", "a.example.com"}),
        ("includes", "_", {"ex_ample.org"}),  # LIKE wildcards are literal
        ("includes", "%", {"x%y.org"}),
        ("includes", "EXAMPLE.COM", {"example.com", "a.example.com", "badexample.com"}),
    ],
)
def test_search_question_modes(client, mode, term, matches):
    names = ["example.com", "a.example.com", "badexample.com", "ex_ample.org", "x%y.org"]
    ingest(client, *[record(question=name) for name in names])
    body = log(client, f"searchQuestion={term.replace('%', '%25')}&searchQuestionMode={mode}")
    assert {r["question"] for r in body["queries"]} == matches


def test_search_defaults_to_includes(client):
    ingest(client, record(question="abc.com"), record(question="xyz.com"))
    assert [r["question"] for r in log(client, "searchQuestion=bc")["queries"]] == ["abc.com"]


def test_window_is_inclusive_at_both_ends(client):
    ingest(client, *[record(timestamp=f"2024-05-01T12:00:0{i}Z", question=f"q{i}.com") for i in range(5)])
    body = client.get("/v2/activity-log?startTime=2024-05-01T12:00:01Z&endTime=2024-05-01T12:00:03Z", headers=AUTH).json
    assert [r["question"] for r in body["queries"]] == ["q3.com", "q2.com", "q1.com"]


def test_end_time_defaults_to_now(client):
    # Two minutes ahead: past the request's now, inside the tolerance for hosts' clocks.
    ahead = int(time.time() * 1000) + 120_000
    ingest(client, record(timestamp="2024-05-01T00:00:00Z"), record(timestamp=ahead))
    body = client.get("/v2/activity-log?startTime=2020-01-01T00:00:00Z", headers=AUTH).json
    assert [r["timestamp"] for r in body["queries"]] == ["2024-05-01T00:00:00.000Z"]


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_paging_over_equal_timestamps_never_repeats_or_skips(client, order):
    ingest(client, *[record(client_id=f"c{i % 4}", question=f"q{i}.com") for i in range(301)])
    seen, page = [], 0
    while True:
        body = client.get(f"/v2/activity-log?{WINDOW}&pageSize=7&page={page}&sortOrder={order}", headers=AUTH).json
        assert body["meta"] == {"page": page, "pageSize": 7}
        seen += [r["question"] for r in body["queries"]]
        if len(body["queries"]) < 7:
            break
        page += 1
    assert len(seen) == 301 and set(seen) == {f"q{i}.com" for i in range(301)}
    # A jump straight to a deep page gives the same rows as walking there.
    body = client.get(f"/v2/activity-log?{WINDOW}&pageSize=7&page=30&sortOrder={order}", headers=AUTH).json
    assert [r["question"] for r in body["queries"]] == seen[210:217]


def test_pages_of_a_window_longer_than_a_day_cross_its_last_day_in_order(client):
    # The clickhouse store asks the window's last day alone first (models/clickhouse/activity.py):
    # pages inside that day, across its start and before it must be the window's own.
    times = [f"2024-05-0{day}T{hour:02d}:00:00Z" for day in (1, 2, 3) for hour in (1, 6, 11, 16, 21)]
    ingest(client, *[record(timestamp=at, question=f"q{i}.com") for i, at in enumerate(times)])
    window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-03T22:00:00Z"
    seen = []
    for page in range(5):
        body = client.get(f"/v2/activity-log?{window}&pageSize=4&page={page}", headers=AUTH).json
        seen += [r["question"] for r in body["queries"]]
    assert seen == [f"q{i}.com" for i in reversed(range(15))]


def test_sort_order(client):
    ingest(client, *[record(timestamp=f"2024-05-01T12:00:0{i}Z", question=f"q{i}.com") for i in (3, 1, 2)])
    desc = log(client, "")["queries"]
    asc = log(client, "sortOrder=asc")["queries"]
    assert [r["question"] for r in desc] == ["q3.com", "q2.com", "q1.com"]
    assert [r["question"] for r in asc] == ["q1.com", "q2.com", "q3.com"]


def test_default_page_size_is_100(client):
    ingest(client, *[record(question=f"q{i}.com") for i in range(120)])
    body = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json
    assert body["meta"] == {"page": 0, "pageSize": 100}
    assert len(body["queries"]) == 100


@pytest.mark.parametrize(
    "query, parameter, code",
    [
        ("page=-1", "page", 40001),
        ("page=x", "page", 40001),
        ("pageSize=0", "pageSize", 40001),
        ("pageSize=501", "pageSize", 40001),
        ("sortOrder=up", "sortOrder", 40001),
        ("action[]=x", "action[]", 40001),
        ("action[]=9", "action[]", 40001),
        ("srcAsn[]=-1", "srcAsn[]", 40001),
        ("dstAsn=abc", "dstAsn[]", 40001),
        ("trigger[]=magic", "trigger[]", 40001),
        ("searchQuestionMode=fuzzy&searchQuestion=a", "searchQuestionMode", 40001),
        ("startTime=2024-05-03T00:00:00Z", "startTime", 40001),  # after endTime
        ("endTime=never", "endTime", 40002),
        ("startTime=2024-05-01T00:00:00", "startTime", 40002),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(loaded, query, parameter, code):
    args = {"startTime": "2024-05-01T00:00:00Z", "endTime": "2024-05-02T00:00:00Z"}
    name, value = query.split("&")[0].split("=")
    if name in args:
        args[name] = value
        query = "&".join(query.split("&")[1:])
    window = "&".join(f"{k}={v}" for k, v in args.items())
    error = assert_error(loaded.get(f"/v2/activity-log?{window}&{query}", headers=AUTH), 400, code)
    assert f"'{parameter}'" in error["message"], error["message"]


def test_start_time_is_required(client):
    error = assert_error(client.get("/v2/activity-log", headers=AUTH), 400, 40003)
    assert "startTime" in error["message"]


def test_delete_by_body_ids_and_end_time(loaded):
    before = len(log(loaded, "")["queries"])
    response = loaded.delete(
        "/v2/activity-log",
        json={"endpointIds": ["e0"], "clientIds": ["c1"], "endTime": "2024-05-01T11:59:59Z"},
        headers=AUTH,
    )
    gone = [r for r in DATA if r["endpointId"] == "e0" and r["clientId"] == "c1" and r["timestamp"] < "2024-05-01T12"]
    assert response.json == {"deletedCount": len(gone)} and gone
    assert len(log(loaded, "")["queries"]) == before - len(gone)
    assert "c1" in clients(loaded)["e0"]["clients"], "client entries are kept"


def test_delete_everything_needs_all_true(loaded):
    assert_error(loaded.delete("/v2/activity-log", headers=AUTH), 400, 40006)
    assert_error(loaded.delete("/v2/activity-log?all=false", headers=AUTH), 400, 40006)
    assert len(log(loaded, "")["queries"]) == len(DATA)
    assert loaded.delete("/v2/activity-log?all=true", headers=AUTH).json == {"deletedCount": len(DATA)}
    assert log(loaded, "")["queries"] == []


def test_large_deletions_run_in_batches_with_the_same_result(loaded):
    loaded.application.config["ANALYTICS_DELETE_BATCH"] = 7
    lasts = {e: v["lastActivityTime"] for e, v in clients(loaded).items()}
    response = loaded.delete("/v2/activity-log?endpointId=e1&all=true", headers=AUTH)
    assert response.json == {"deletedCount": sum(r["endpointId"] == "e1" for r in DATA)}
    items = clients(loaded)
    assert {e: v["lastActivityTime"] for e, v in items.items()} == lasts, "endpoints never move back"
    assert all(c["lastActivityTime"] is None for c in items["e1"]["clients"].values())
    assert all(c["lastActivityTime"] is not None for c in items["e0"]["clients"].values())


# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
@pytest.mark.sql_store
def test_a_deletion_ends_while_its_endpoint_keeps_receiving_records(client, monkeypatch):
    """Records of the endpoint stored during a batched deletion (here two after each batch, in
    the batch's own transaction, so that every batch finds more than it took) are not part of
    it: it ends, with the records it began with."""
    client.application.config["ANALYTICS_DELETE_BATCH"] = 2
    now = int(time.time() * 1000)
    ingest(client, *[record("busy", timestamp=now - i, question=f"q{i}.com") for i in range(9)])  # hot: rows
    columns = ", ".join(column for column in models.records.blocks.COLUMNS if column != "id")
    copy = (
        f"INSERT INTO record ({columns}) SELECT {columns} FROM record"
        " WHERE endpoint = (SELECT id FROM endpoint WHERE name = 'busy') ORDER BY id LIMIT 2"
    )
    delete, batches = models.clients.deletion._delete, []

    def arriving(*args):
        deleted = delete(*args)
        batches.append(deleted)
        assert len(batches) < 50, "the deletion goes on as long as records arrive"
        models.engine.database.query(copy)
        return deleted

    monkeypatch.setattr(models.clients.deletion, "_delete", arriving)
    response = client.delete("/v2/activity-log?endpointId=busy&all=true", headers=AUTH)
    assert response.json == {"deletedCount": 9}
    left = client.get("/v2/activity-log?startTime=-1h&endpointId=busy&pageSize=500", headers=AUTH).json["queries"]
    assert len(left) == 2 * len(batches) == 10


def test_paging_stays_right_after_deletions_and_late_records(client):
    """Walking pages, then changing the records inside the window, then walking again."""
    ingest(
        client,
        *[record(client_id=f"c{i}", timestamp=f"2024-05-01T10:00:0{i}Z", question=f"q{i}.com") for i in range(10)],
    )

    def walk():
        pages, page = [], 0
        while True:
            body = client.get(f"/v2/activity-log?{WINDOW}&pageSize=4&page={page}&sortOrder=asc", headers=AUTH).json
            pages.append([q["question"] for q in body["queries"]])
            if len(body["queries"]) < 4:
                return pages
            page += 1

    assert walk() == [
        ["q0.com", "q1.com", "q2.com", "q3.com"],
        ["q4.com", "q5.com", "q6.com", "q7.com"],
        ["q8.com", "q9.com"],
    ]
    client.delete("/v2/activity-log?clientId[]=c0&clientId[]=c1&clientId[]=c2", headers=AUTH)
    assert walk() == [["q3.com", "q4.com", "q5.com", "q6.com"], ["q7.com", "q8.com", "q9.com"]]
    ingest(client, record(client_id="late", timestamp="2024-05-01T09:00:00Z", question="late.com"))
    assert walk()[0][0] == "late.com"
