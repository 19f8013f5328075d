"""POST /v2/ingest: the three body formats, all-or-nothing validation, limits."""

import json
import time

import pytest

from support import stores
from support.helpers import AUTH, assert_error, clients, ingest, record


def stored(database, sql="SELECT COUNT(*) FROM {records}"):
    return stores.records_scalar(database, sql)


def test_json_array(client, database):
    response = ingest(client, record(client_id="a"), record(client_id="b"))
    assert response.json == {"accepted": 2, "pastRetention": 2}
    assert set(clients(client)["ep1"]["clients"]) == {"a", "b"}
    assert stored(database) == 2


def test_records_object(client, database):
    response = client.post("/v2/ingest", json={"records": [record(), record()]}, headers=AUTH)
    assert response.json == {"accepted": 2, "pastRetention": 2}
    assert stored(database) == 2


def test_ndjson(client, database):
    body = "\n".join(json.dumps(record(client_id=f"c{i}")) for i in range(3)) + "\n\n"
    response = client.post("/v2/ingest", data=body, content_type="application/x-ndjson", headers=AUTH)
    assert response.json == {"accepted": 3, "pastRetention": 3}
    assert set(clients(client)["ep1"]["clients"]) == {"c0", "c1", "c2"}


def test_empty_batch_is_fine(client):
    assert ingest(client).json == {"accepted": 0, "pastRetention": 0}


def test_the_answer_counts_records_already_past_retention(client, app, database):
    now = time.time()
    recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 32 * 86400))
    expired = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 34 * 86400))
    no_timestamp = {key: value for key, value in record().items() if key != "timestamp"}
    batch = [record(timestamp=recent), record(timestamp=expired), no_timestamp, record(timestamp=expired)]
    assert ingest(client, *batch).json == {"accepted": 4, "pastRetention": 2}
    assert stored(database) == 4, "stored all the same, until the next retention run"
    app.config["ANALYTICS_RETENTION_DAYS"] = 0
    assert ingest(client, record(timestamp=expired)).json == {"accepted": 1, "pastRetention": 0}


def test_a_batch_spanning_months_is_stored_whole(client, database):
    # One record a day over 150 days, in one batch (an import of a resolver's history): a
    # store partitioned by day (ClickHouse) takes it too, every record counted once.
    day = 86_400_000
    start = 1714521600000  # 2024-05-01T00:00:00Z
    ingest(client, *(record(timestamp=start + i * day, question=f"n{i}.example") for i in range(150)))
    assert stored(database) == 150
    window = f"startTime={start}&endTime={start + 150 * day - 1}"
    assert client.get(f"/v2/statistic/count?{window}", headers=AUTH).json["count"] == 150
    series = client.get(f"/v2/statistic/timeseries?{window}&interval=86400&limit=1000", headers=AUTH).json
    assert [point["count"] for point in series["queries"]] == [1] * 150


def test_a_bad_record_in_the_middle_stores_nothing(client, database):
    batch = [record(client_id="a"), record(client_id="b"), record(client_id="c", question=""), record()]
    error = assert_error(client.post("/v2/ingest", json=batch, headers=AUTH), 400, 40005)
    assert "Record 2" in error["message"] and "'question'" in error["message"]
    assert clients(client) == {}
    assert stored(database) == 0


@pytest.mark.parametrize(
    "change, field",
    [
        ({"endpointId": None}, "endpointId"),
        ({"clientId": ""}, "clientId"),
        ({"clientId": 5}, "clientId"),
        ({"question": None}, "question"),
        ({"question": "bad name.com"}, "question"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"timestamp": "0000-01-01T00:00:00Z"}, "timestamp"),
        ({"action": 7}, "action"),
        ({"action": "0"}, "action"),
        ({"action": True}, "action"),
        ({"trigger": "magic"}, "trigger"),
        ({"sourceIp": "300.1.1.1"}, "sourceIp"),
        ({"sourceGeoip": {"asn": "x"}}, "sourceGeoip.asn"),
        ({"sourceGeoip": []}, "sourceGeoip"),
        ({"answers": {"ips": []}}, "answers"),
        ({"answers": [{"ips": ["1.2.3.4", "nope"]}]}, "answers[0].ips[1]"),
        ({"client": {"ip": "x"}}, "client.ip"),
        ({"client": {"os": {"type": 1}}}, "client.os.type"),
        ({"profileId": "a\x00b"}, "profileId"),
        ({"endpointId": "e" * 257}, "endpointId"),
    ],
)
def test_invalid_field_is_named(client, database, change, field):
    batch = [record(), {**record(), **change}]
    error = assert_error(client.post("/v2/ingest", json=batch, headers=AUTH), 400, 40005)
    assert error["message"].startswith(f"Record 1: field '{field}'"), error["message"]
    assert stored(database) == 0


def test_a_record_that_is_not_an_object(client):
    error = assert_error(client.post("/v2/ingest", json=[record(), "x"], headers=AUTH), 400, 40005)
    assert "Record 1" in error["message"]


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"[{", "application/json"),
        (b'{"no": "records"}', "application/json"),
        (b'"text"', "application/json"),
        (b"\xff\xfe[]", "application/json"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
        (b'{"endpointId": "e"}\n{broken', "application/x-ndjson"),
    ],
)
def test_malformed_bodies(client, database, body, content_type):
    response = client.post("/v2/ingest", data=body, content_type=content_type, headers=AUTH)
    assert_error(response, 400, 40004)
    assert stored(database) == 0


def test_question_is_stored_lower_case_without_trailing_dot(client, database):
    ingest(client, record(question="WWW.Example.COM."))
    window = "startTime=2000-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z"
    logged = client.get(f"/v2/activity-log?{window}", headers=AUTH).json["queries"]
    assert [query["question"] for query in logged] == ["www.example.com"]


def test_timestamp_defaults_to_receipt(client):
    rec = record()
    del rec["timestamp"]
    ingest(client, rec)
    last = clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"]
    assert last.startswith("20") and last.endswith("Z") and len(last) == 24
    assert last > "2026-01-01"


def test_full_record_is_accepted(client, database):
    full = record(
        profileId="p1",
        rrType="AAAA",
        statusCode="NOERROR",
        protocol="doh",
        action=2,
        trigger="custom",
        triggerValue="my rule",
        spoofTarget="10.0.0.1",
        sourceIp="2001:DB8::1",
        sourceGeoip={"countryCode": "DE", "city": "Berlin", "isp": "ISP", "asn": 3320},
        answers=[{"ips": ["10.0.0.1"], "geoip": {"countryCode": "US", "isp": "X", "asn": 1}}],
        client={
            "host": "h",
            "mac": "m",
            "ip": "192.0.2.1",
            "vendor": "v",
            "os": {"type": "t", "arch": "a", "version": "1"},
        },
        unknownField="ignored",
    )
    ingest(client, full)
    (back,) = client.get("/v2/activity-log?startTime=2024-01-01T00:00:00Z", headers=AUTH).json["queries"]
    assert back["sourceIp"] == "2001:db8::1", "stored in canonical form"
    assert back["answers"] == [{"ips": ["10.0.0.1"], "geoip": {"countryCode": "US", "city": "", "isp": "X", "asn": 1}}]
    assert back["sourceGeoip"] == {"countryCode": "DE", "city": "Berlin", "isp": "ISP", "asn": 3320}


def test_batch_of_ten_thousand(client, database):
    batch = [record(client_id=f"c{i % 50}", question=f"d{i}.example") for i in range(10_000)]
    assert ingest(client, *batch).json["accepted"] == 10_000
    assert stored(database) == 10_000
    assert len(clients(client)["ep1"]["clients"]) == 50


# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
@pytest.mark.sql_store
def test_a_batch_of_several_statements_keeps_its_order(client, database):
    """The realtime stream and the outputs number records by id: a batch written in several
    statements (on SQLite 256 rows and then powers of two: 10 x 256 + 64 + 2 + 1) gets
    its ids in the order it was sent, each record its own values."""
    n = 2_627
    ingest(client, *[record(client_id=f"c{i % 7}", question=f"d{i}.example", responseTimeMs=i) for i in range(n)])
    rows = stores.on_records(
        database,
        "SELECT t.value, r.response_time_ms FROM {records} r JOIN term t ON t.id = r.question ORDER BY r.id",
    )
    assert rows == [(f"d{i}.example", i) for i in range(n)]


def test_batch_limit(app, client, database):
    app.config["ANALYTICS_MAX_BATCH"] = 3
    assert_error(client.post("/v2/ingest", json=[record()] * 4, headers=AUTH), 413, 41302)
    assert stored(database) == 0


def test_body_limit_is_413_without_reading_the_body(app, client, database):
    app.config["MAX_CONTENT_LENGTH"] = 1000
    body = json.dumps([record(question=f"d{i}.example") for i in range(100)])
    assert len(body) > 1000
    response = client.post("/v2/ingest", data=body, content_type="application/json", headers=AUTH)
    error = assert_error(response, 413, 41301)
    assert "ANALYTICS_MAX_BODY_MB" in error["message"]
    assert stored(database) == 0


def test_validation_does_not_depend_on_what_came_before(client, database):
    """true and 1.0 equal 1 in Python: a remembered valid {"asn": 1} must not let them in."""
    ingest(client, record(sourceGeoip={"asn": 1}), record(client={"host": "h", "os": {"type": "t"}}))
    for bad in (
        {"sourceGeoip": {"asn": True}},
        {"sourceGeoip": {"asn": 1.0}},
        {"client": {"host": "h", "os": {"type": 1}}},
    ):
        assert_error(client.post("/v2/ingest", json=[{**record(), **bad}], headers=AUTH), 400, 40005)
    assert stored(database) == 2


# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
@pytest.mark.sql_store
def test_a_new_database_gives_the_common_values_the_smallest_ids(make_app, new_database):
    """Record types, statuses, protocols and triggers take ids under 128 (one byte in a SQLite
    row) even when the first batch brings thousands of other strings first."""
    database = new_database()
    loader = make_app(ANALYTICS_DATABASE=database).test_client()
    names = [record(question=f"name-{i}.example", client_id=f"c{i}") for i in range(2_000)]
    common = record(question="last.example", rrType="HTTPS", statusCode="SERVFAIL", protocol="doq", trigger="rebind")
    ingest(loader, *names, common)
    ((rr_type, status, protocol, trigger),) = stores.on_records(
        database,
        "SELECT r.rr_type, r.status, r.protocol, r.trigger_type FROM {records} r JOIN term q ON q.id = r.question"
        " WHERE q.value = 'last.example'",
    )
    assert max(rr_type, status, protocol, trigger) < 128, (rr_type, status, protocol, trigger)


@pytest.mark.postgres_only
def test_stores_sharing_a_postgresql_database_write_apart(client, database, new_database):
    """Two stores in schemas of one database: a write of one does not wait for the other's."""
    import threading

    import psycopg

    from models.engine.postgres import Postgres

    other = new_database()
    stores.run_sql(other, "SELECT 1")
    done = threading.Event()
    with psycopg.connect(other) as conn:  # a transaction of the other store's writer, left open
        Postgres().lock_writes(lambda sql, params=(): conn.execute(Postgres().driver_sql(sql), params))
        writer = threading.Thread(target=lambda: (ingest(client, record()), done.set()), daemon=True)
        writer.start()
        stored_meanwhile = done.wait(20)
        conn.rollback()
    writer.join(20)
    assert stored_meanwhile, "the write waited for the other store's writer"
    assert client.get("/v2/statistic/count?startTime=2024-05-01T00:00:00Z", headers=AUTH).json["count"] == 1
