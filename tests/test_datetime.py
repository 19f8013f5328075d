"""Datetime in and out: any RFC 3339 offset or epoch ms in; YYYY-MM-DDTHH:MM:SS.mmmZ out."""

import time

import pytest

from schemas.datetimes import parse_datetime

from support.helpers import AUTH, assert_error, clients, ingest, record

SAME_INSTANT = [
    "2024-05-01T12:00:00Z",
    "2024-05-01T12:00:00.000z",
    "2024-05-01t14:00:00+02:00",
    "2024-05-01T07:30:00.000000000-04:30",
    "2024-05-01T12:00:00.0004Z",
    1714564800000,
    "1714564800000",
]


@pytest.mark.parametrize("value", SAME_INSTANT)
def test_ingested_times_are_normalised(client, value):
    ingest(client, record(timestamp=value))
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] == "2024-05-01T12:00:00.000Z"


def test_milliseconds_are_kept_and_fractions_truncated(client):
    ingest(client, record(timestamp="2024-05-01T12:00:00.98765+00:00"))
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] == "2024-05-01T12:00:00.987Z"


def test_far_years_are_written_with_four_digits(app, client):
    if app.config.get("ANALYTICS_RECORD_STORE"):
        # ClickHouse keeps times from 1900 on (docs/clickhouse.md): an older record is refused, saying so.
        response = client.post("/v2/ingest", json=[record(timestamp="0001-01-01T00:00:00Z")], headers=AUTH)
        error = assert_error(response, 400, 40005)
        assert "is 0001-01-01T00:00:00.000Z, before 1900-01-01T00:00:00.000Z, the earliest time" in error["message"]
    else:
        ingest(client, record(timestamp="0001-01-01T00:00:00Z"))
        assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] == "0001-01-01T00:00:00.000Z"
    # A record cannot come from year 9999 (ANALYTICS_FUTURE_TOLERANCE_SECONDS); a window can end there.
    response = client.get("/v2/statistic/count?startTime=-1h&endTime=9999-12-31T23:59:59.999Z", headers=AUTH)
    assert response.json["endTime"] == "9999-12-31T23:59:59.999Z"


@pytest.mark.parametrize(
    "query, deleted",
    [
        ("endTime=2024-05-01T13:59:59%2B02:00", 0),  # 11:59:59Z, before the record
        ("endTime=2024-05-01T14:00:00%2B02:00", 1),  # 12:00:00Z, inclusive
        ("endTime=2024-05-01T14:00:00+02:00", 1),  # '+' not URL-encoded arrives as a space
        ("endTime=1714564800000", 1),
        ("endTime=1714564799999", 0),
    ],
)
def test_query_string_datetimes(client, query, deleted):
    ingest(client, record(timestamp="2024-05-01T12:00:00Z"))
    response = client.delete(f"/v2/activity-log?all=true&{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    assert response.json == {"deletedCount": deleted}


@pytest.mark.parametrize(
    "value",
    [
        "2024-13-01T00:00:00Z",
        "2024-02-30T00:00:00Z",
        "2024-05-01T24:00:00Z",
        "2024-05-01T12:00:00",  # no offset
        "2024-05-01",
        "2024-05-01T12:00:00+25:00",
        "0000-12-31T23:59:59Z",
        "10000-01-01T00:00:00Z",
        "253402300800000",  # epoch ms past 9999
        "1.5",
        "tomorrow",
        "",
    ],
)
def test_invalid_datetimes_are_400(client, value):
    ingest(client, record())
    response = client.delete("/v2/client", json={"endTime": value}, headers=AUTH)
    assert_error(response, 400, 40002)
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] is not None


def test_times_relative_to_the_request(client):
    """Where an operation takes a time: now, or a whole number of s, m, h, d or w before it;
    every relative time of one request counts from the same instant."""
    now = int(time.time() * 1000)
    ingest(
        client,
        record(client_id="recent", timestamp=now - 30 * 60_000),
        record(client_id="older", timestamp=now - 2 * 3_600_000),
        record(client_id="last-week", timestamp=now - 6 * 86_400_000),
    )

    def count(query):
        response = client.get(f"/v2/statistic/count?{query}", headers=AUTH)
        assert response.status_code == 200, response.json
        return response.json

    last_hour = count("startTime=-1h&endTime=now")
    start, end = (parse_datetime(last_hour[name]) for name in ("startTime", "endTime"))
    assert end - start == 3_600_000 and abs(end - int(time.time() * 1000)) < 5_000
    assert last_hour["count"] == 1
    assert count("startTime=now-3h")["count"] == 2  # Grafana's spelling; endTime defaults to the same now
    assert count("startTime=-7d")["count"] == count("startTime=-1w")["count"] == 3
    assert count("startTime=-5400s&endTime=-20m")["count"] == 1
    assert count("startTime=-180m&endTime=-1h")["count"] == 1
    log = client.get("/v2/activity-log?startTime=-1h", headers=AUTH).json["queries"]
    assert [row["clientId"] for row in log] == ["recent"]
    # A deletion's endTime too.
    response = client.delete("/v2/activity-log?all=true&endTime=-1d", headers=AUTH)
    assert response.json == {"deletedCount": 1}


@pytest.mark.parametrize("value", ["24h", "-24x", "now+1h", "now-", "-h", "-1.5h", "NOW", "- 1h", "-24H"])
def test_malformed_relative_times_are_400(client, value):
    assert_error(client.get(f"/v2/statistic/count?startTime={value}", headers=AUTH), 400, 40002)


def test_a_record_takes_no_relative_time(client):
    response = client.post("/v2/ingest", json=[record(timestamp="-1h")], headers=AUTH)
    assert_error(response, 400, 40005)
    response = client.post("/v2/ingest", json=[record(timestamp="now")], headers=AUTH)
    assert_error(response, 400, 40005)
