"""Datetime in and out: any RFC 3339 offset or epoch ms in; YYYY-MM-DDTHH:MM:SS.mmmZ out."""

import pytest

from helpers import AUTH, assert_error, clients, ingest, record

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


def test_far_years_are_written_with_four_digits(client):
    ingest(
        client,
        record(timestamp="0001-01-01T00:00:00Z"),
        record(client_id="b", timestamp="9999-12-31T23:59:59.999Z"),
    )
    items = clients(client)["ep1"]["clients"]
    assert items["cl1"]["lastActivityTime"] == "0001-01-01T00:00:00.000Z"
    assert items["b"]["lastActivityTime"] == "9999-12-31T23:59:59.999Z"


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
