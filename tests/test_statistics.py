"""The Statistics group and Data Availability: shapes and arithmetic on hand-made data."""

import pytest

from catalogue import READ_FIELDS
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import AUTH, COUNTING, assert_error, count_as, ingest, record


@pytest.fixture(params=COUNTING)
def app(request, app):
    """Each test with the records counted as they are stored, and with all of them waiting."""
    return count_as(app, request.param)


DAY = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-01T23:59:59.999Z"


def get(client, path, expect=200):
    response = client.get(f"/v2/statistic/{path}", headers=AUTH)
    assert response.status_code == expect, response.json
    return response.json


@pytest.fixture
def day(client):
    """12 records on 2024-05-01: clients a (6), b (4), c (2); actions and times vary."""
    ingest(
        client,
        *[record(client_id="a", timestamp=f"2024-05-01T0{i}:30:00Z", action=0, question="ads.com") for i in range(6)],
        *[record(client_id="b", timestamp=f"2024-05-01T1{i}:00:00Z", action=1, question="b.com") for i in range(4)],
        record(client_id="c", timestamp="2024-05-01T23:59:59.999Z", action=1, question="c.com"),
        record(client_id="c", timestamp="2024-05-01T00:00:00Z", question="c.com", rrType="A"),
        record(client_id="out", timestamp="2024-05-02T00:00:00Z"),  # outside the window
    )
    return client


def test_count(day):
    assert get(day, f"count?{DAY}") == {
        "startTime": "2024-05-01T00:00:00.000Z",
        "endTime": "2024-05-01T23:59:59.999Z",
        "count": 12,
    }
    assert get(day, f"count?{DAY}&clientId[]=a&clientId[]=c")["count"] == 8


def test_count_group_order_limit_and_missing_values(day):
    body = get(day, f"count/clientId?{DAY}")
    assert body["counts"] == [{"value": "a", "count": 6}, {"value": "b", "count": 4}, {"value": "c", "count": 2}]
    assert body["startTime"] == "2024-05-01T00:00:00.000Z"
    assert get(day, f"count/clientId?{DAY}&sortOrder=asc&limit=2")["counts"] == [
        {"value": "c", "count": 2},
        {"value": "b", "count": 4},
    ]
    # action: 0 x6, 1 x5, unknown x1 -> "" ; values are strings
    assert get(day, f"count/action?{DAY}")["counts"] == [
        {"value": "0", "count": 6},
        {"value": "1", "count": 5},
        {"value": "", "count": 1},
    ]
    assert get(day, f"count/rrType?{DAY}")["counts"] == [{"value": "", "count": 11}, {"value": "A", "count": 1}]


def test_count_group_ties_by_value_ascending(client):
    ingest(client, *[record(client_id=name, timestamp="2024-05-01T10:00:00Z") for name in ("zed", "amy", "kim")])
    counts = get(client, f"count/clientId?{DAY}")["counts"]
    assert [c["value"] for c in counts] == ["amy", "kim", "zed"]
    assert [c["value"] for c in get(client, f"count/clientId?{DAY}&sortOrder=asc")["counts"]] == ["amy", "kim", "zed"]


def test_a_client_id_under_two_endpoints_is_one_group(client):
    ingest(client, record("e1", "tv", "2024-05-01T10:00:00Z"), record("e2", "tv", "2024-05-01T11:00:00Z"))
    assert get(client, f"count/clientId?{DAY}")["counts"] == [{"value": "tv", "count": 2}]
    assert get(client, f"count/endpointId?{DAY}")["counts"] == [
        {"value": "e1", "count": 1},
        {"value": "e2", "count": 1},
    ]


def test_timeseries_buckets_are_aligned_and_gaps_filled(day):
    body = get(day, "timeseries?startTime=2024-05-01T04:10:00Z&endTime=2024-05-01T09:59:00Z&interval=3600")
    assert body["interval"] == 3600
    assert body["startTime"] == "2024-05-01T04:10:00.000Z"
    assert [q["time"] for q in body["queries"]] == [f"2024-05-01T0{h}:00:00.000Z" for h in range(4, 10)]
    assert [q["count"] for q in body["queries"]] == [1, 1, 0, 0, 0, 0]


def test_timeseries_across_a_day_boundary(client):
    ingest(
        client,
        record(timestamp="2024-04-30T23:59:59.999Z"),
        record(timestamp="2024-05-01T00:00:00Z"),
        record(timestamp="2024-05-02T05:00:00Z"),
    )
    body = get(client, "timeseries?startTime=2024-04-30T12:00:00Z&endTime=2024-05-02T12:00:00Z&interval=86400")
    assert body["queries"] == [
        {"time": "2024-04-30T00:00:00.000Z", "count": 1},
        {"time": "2024-05-01T00:00:00.000Z", "count": 1},
        {"time": "2024-05-02T00:00:00.000Z", "count": 1},
    ]


def test_timeseries_picks_the_smallest_interval_within_limit(day):
    assert get(day, f"timeseries?{DAY}")["interval"] == 900  # 96 buckets <= 100
    assert len(get(day, f"timeseries?{DAY}")["queries"]) == 96
    assert get(day, f"timeseries?{DAY}&limit=24")["interval"] == 3600
    assert get(day, f"timeseries?{DAY}&limit=23")["interval"] == 10800
    body = get(day, "timeseries?startTime=2024-05-01T00:00:00Z&endTime=2024-05-01T00:59:59Z")
    assert body["interval"] == 60 and len(body["queries"]) == 60
    assert sum(q["count"] for q in get(day, f"timeseries?{DAY}")["queries"]) == 12


def test_timeseries_rejects_too_many_buckets_and_bad_intervals(day):
    error = assert_error(day.get(f"/v2/statistic/timeseries?{DAY}&interval=60", headers=AUTH), 400, 40001)
    assert "interval" in error["message"]
    assert_error(day.get(f"/v2/statistic/timeseries?{DAY}&interval=61", headers=AUTH), 400, 40001)
    assert_error(day.get(f"/v2/statistic/timeseries?{DAY}&limit=1001", headers=AUTH), 400, 40001)
    long = "startTime=2000-01-01T00:00:00Z&endTime=2024-01-01T00:00:00Z"
    error = assert_error(day.get(f"/v2/statistic/timeseries?{long}&limit=10", headers=AUTH), 400, 40001)
    assert "limit" in error["message"]


def test_timeseries_by_group(day):
    body = get(day, f"timeseries/clientId?{DAY}&interval=43200&groupLimit=2")
    assert body["interval"] == 43200
    assert body["queries"] == [
        {"time": "2024-05-01T00:00:00.000Z", "count": {"a": 6, "b": 2}},
        {"time": "2024-05-01T12:00:00.000Z", "count": {"a": 0, "b": 2}},
    ]
    unknown = get(day, f"timeseries/rrType?{DAY}&interval=86400")
    assert unknown["queries"] == [{"time": "2024-05-01T00:00:00.000Z", "count": {"": 11, "A": 1}}]


def test_trend_with_explicit_windows(client):
    ingest(
        client,
        *[record(question="up.com", timestamp="2024-05-02T10:00:00Z") for _ in range(3)],
        record(question="up.com", timestamp="2024-05-01T10:00:00Z"),
        *[record(question="down.com", timestamp="2024-05-01T10:00:00Z") for _ in range(4)],
        record(question="down.com", timestamp="2024-05-02T10:00:00Z"),
        *[record(question="new.com", timestamp="2024-05-02T11:00:00Z") for _ in range(2)],
    )
    body = get(client, "trend/question?startTime=2024-05-02T00:00:00Z&endTime=2024-05-02T23:59:59.999Z")
    assert body["baselineStartTime"] == "2024-05-01T00:00:00.000Z"
    assert body["baselineEndTime"] == "2024-05-01T23:59:59.999Z"
    assert body["trends"] == [
        {"value": "up.com", "count": 3, "baselineCount": 1, "change": 2.0},
        {"value": "new.com", "count": 2, "baselineCount": 0, "change": None},
        {"value": "down.com", "count": 1, "baselineCount": 4, "change": -0.75},
    ]
    limited = get(
        client,
        "trend/question?startTime=2024-05-02T00:00:00Z&endTime=2024-05-02T23:59:59.999Z&limit=1"
        "&baselineStartTime=2024-05-01T10:00:00Z&baselineEndTime=2024-05-01T10:00:00Z",
    )
    assert limited["trends"] == [{"value": "up.com", "count": 3, "baselineCount": 1, "change": 2.0}]


def test_trend_defaults_to_the_last_24_hours(client):
    now = now_ms()
    ingest(
        client,
        record(question="x.com", timestamp=format_ms(now - 3_600_000)),
        record(question="x.com", timestamp=format_ms(now - 25 * 3_600_000)),
        record(question="x.com", timestamp=format_ms(now - 26 * 3_600_000)),
    )
    body = get(client, "trend/question")
    assert body["trends"] == [{"value": "x.com", "count": 1, "baselineCount": 2, "change": -0.5}]


@pytest.mark.parametrize("path", ["count/nope", "timeseries/nope", "trend/nope", "count/timestamp"])
def test_unknown_group_is_400(client, path):
    sep = "&" if "?" in path else "?"
    error = assert_error(client.get(f"/v2/statistic/{path}{sep}{DAY}", headers=AUTH), 400, 40001)
    assert "'group'" in error["message"]


@pytest.mark.parametrize(
    "path",
    [
        "count",  # no startTime
        "count?startTime=2024-05-02T00:00:00Z&endTime=2024-05-01T00:00:00Z",
        f"count/question?{DAY}&limit=0",
        f"count/question?{DAY}&sortOrder=random",
        f"timeseries/question?{DAY}&groupLimit=0",
        "trend/question?startTime=2024-05-02T00:00:00Z&endTime=2024-05-01T00:00:00Z",
        "trend/question?baselineStartTime=2024-05-02T00:00:00Z&baselineEndTime=2024-05-01T00:00:00Z",
        f"count?{DAY}&action[]=5",
        # Windows whose derived times would fall before the year 1 (found by the fuzzer).
        "trend/question?startTime=1013-01-01T00:00:00Z",
        "trend/question?startTime=0001-01-01T06:00:00Z&endTime=0001-01-01T12:00:00Z",
        "timeseries?startTime=0001-01-01T00:00:00Z&endTime=0001-01-02T00:00:00Z&interval=604800",
    ],
)
def test_bad_parameters_are_400(client, path):
    assert_error(client.get(f"/v2/statistic/{path}", headers=AUTH), 400)


def test_data_availability(client):
    empty = client.get("/v2/data-availability", headers=AUTH).json
    assert (empty["startTime"], empty["endTime"], empty["recordCount"]) == (None, None, 0)
    ingest(client, record(timestamp="2024-05-01T10:00:00Z"), record(timestamp="2024-05-03T10:00:00.5Z"))
    body = client.get("/v2/data-availability", headers=AUTH).json
    assert body["startTime"] == "2024-05-01T10:00:00.000Z"
    assert body["endTime"] == "2024-05-03T10:00:00.500Z"
    assert body["recordCount"] == 2
    assert body["retentionDays"] == 33
    assert {"name": "srcAsn", "type": "integer", "filterable": True, "groupable": True} in body["columns"]


def test_columns_are_the_filters_and_groups_the_api_accepts(client):
    columns = client.get("/v2/data-availability", headers=AUTH).json["columns"]
    spec = client.get("/v2/openapi.json").json
    params = {p["name"] for p in spec["paths"]["/v2/activity-log"]["get"]["parameters"]}
    group_enum = spec["paths"]["/v2/statistic/count/{group}"]["parameters"][0]["schema"]["enum"]
    assert {c["name"] + "[]" for c in columns if c["filterable"]} <= params
    assert {p for p in params if p.endswith("[]")} == {c["name"] + "[]" for c in columns if c["filterable"]}
    assert group_enum == [c["name"] for c in columns if c["groupable"]]
    assert [c["name"] for c in columns] == [f.name for f in READ_FIELDS if f.filterable or f.groupable]
