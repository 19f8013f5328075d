"""Privacy settings per endpoint (GET /v2/privacy, PUT /v2/privacy/{endpointId}, `flask
privacy`): what a setting removes is applied before anything is written, so it is found in no
answer, export, stream, client entry, or the database file and its write-ahead log."""

import glob
import json

import pytest

import models.engine.database
import models.stores.bound
from schemas.records import parse_records

from support import stores
from support.helpers import AUTH, assert_error, ingest, record
from support.stores import as_older_schema, is_postgres, run_sql, stored_rows
from support.streams import events

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
ADDRESS = "192.168.77.123"
NAME = "www.very-private-site.co.uk"
ANSWER = "203.0.113.99"
HOST = "alices-laptop"


def private_record(endpoint="home", timestamp="2024-05-01T10:00:00Z", question=NAME, client_id=ADDRESS, **extra):
    return record(
        endpoint,
        client_id,  # by default the client known by its address, as dnstap feeds name it
        timestamp,
        question,
        sourceIp=ADDRESS,
        triggerValue=f"||{NAME}^",
        answers=[{"ips": [ANSWER], "geoip": {"countryCode": "NL"}}],
        client={"ip": ADDRESS, "host": HOST, "mac": "aa:bb:cc:dd:ee:ff"},
        **extra,
    )


def put(client, endpoint, body, headers=AUTH, expect=200):
    response = client.put(f"/v2/privacy/{endpoint}", json=body, headers=headers)
    assert response.status_code == expect, response.json
    return response.json


def ingest_watched(client, *records) -> str:
    """Ingest `records` with a realtime stream open; the text the stream sent of them."""
    token = client.get("/v2/auth/token", headers=AUTH).json["token"]
    response = client.get(f"/v2/activity-log/realtime?authToken={token}", buffered=False)
    chunks = iter(response.response)
    assert next(chunks).decode().startswith(":"), "the stream is open"
    ingest(client, *records)
    text = next(chunks).decode()
    response.close()
    return text


def everything_sent(client, streamed="") -> str:
    """Every place the service gives the stored queries back, as one text (with what a
    realtime stream sent, `streamed`)."""
    reads = [
        f"/v2/activity-log?{WINDOW}",
        f"/v2/activity-log/csv?{WINDOW}",
        "/v2/client",
        f"/v2/statistic/count/question?{WINDOW}",
        f"/v2/statistic/count/registrableDomain?{WINDOW}",
        f"/v2/statistic/count/clientId?{WINDOW}",
        f"/v2/statistic/first-seen/question?{WINDOW}",
        "/metrics",
    ]
    parts = [streamed]
    for path in reads:
        response = client.get(path, headers=AUTH)
        assert response.status_code == 200, path
        parts.append(response.get_data(as_text=True))
    return "\n".join(parts)


def stored_text(database) -> str:
    """What the store holds: the database file and its WAL (SQLite), or every row of every
    table as text (PostgreSQL, and ClickHouse's tables where it keeps the records: its parts on
    disk are compressed, read by no byte search)."""
    if is_postgres(database):
        tables = run_sql(
            database, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        assert len(tables) > 10
        return "\n".join(str(row) for (table,) in tables for row in run_sql(database, f'SELECT * FROM "{table}"'))
    paths = glob.glob(database + "*")
    assert database + "-wal" in paths, "the write-ahead log is read too"
    chunks = []
    for path in paths:
        with open(path, "rb") as handle:
            chunks.append(handle.read().decode("latin-1"))
    if database in stores.RECORD_STORES:
        chunks += stores.clickhouse_rows(stores.RECORD_STORES[database])
    return "\n".join(chunks)


def only_record(client) -> dict:
    (found,) = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
    return found


def test_built_in_settings_keep_everything(client, database):
    assert client.get("/v2/privacy", headers=AUTH).json == {
        "items": {
            "_default": {
                "clientIp": "keep",
                "ipv4Prefix": 24,
                "ipv6Prefix": 48,
                "clientMetadata": "keep",
                "question": "keep",
                "answers": "keep",
                "unloggedClients": "counted",
                "steps": [],
                "pendingRewrite": 0,
            }
        }
    }
    sent = everything_sent(client, ingest_watched(client, private_record()))
    assert ADDRESS in sent and NAME in sent and HOST in sent and ANSWER in sent
    stored = stored_text(database)
    for text in (ADDRESS, NAME, HOST, ANSWER):
        assert text in stored, "the checks below can see what is there"


@pytest.mark.parametrize(
    "setting, shown",
    [
        ({"clientIp": "truncate"}, "192.168.77.0"),
        ({"clientIp": "truncate", "ipv4Prefix": 16}, "192.168.0.0"),
        ({"clientIp": "drop"}, None),
        ({"clientIp": "hash"}, "hashed"),
    ],
)
def test_the_client_address_never_reaches_the_store(client, runner, database, tmp_path, setting, shown):
    put(client, "home", setting)
    streamed = ingest_watched(client, private_record())
    found = only_record(client)
    entry = client.get("/v2/client", headers=AUTH).json["items"]["home"]["clients"]
    if shown is None:
        assert found["sourceIp"] is None and found["clientId"] == "anonymous"
        assert entry["anonymous"]["ip"] == ""
    elif shown == "hashed":
        assert found["sourceIp"].startswith("100::") and found["clientId"] == found["sourceIp"]
        assert entry[found["clientId"]]["ip"] == found["sourceIp"]
        ingest(client, private_record(timestamp="2024-05-01T11:00:00Z"))
        assert client.get(f"/v2/statistic/count/clientId?{WINDOW}", headers=AUTH).json["counts"] == [
            {"value": found["sourceIp"], "count": 2}
        ], "stable: the same address hashes the same"
    else:
        assert (found["sourceIp"], found["clientId"]) == (shown, shown)
        assert entry[shown]["ip"] == shown
    assert found["question"] == NAME and HOST in json.dumps(entry), "the other settings are kept"
    assert ADDRESS not in everything_sent(client, streamed)
    assert ADDRESS not in stored_text(database)
    if not is_postgres(database):  # nor in a backup (PostgreSQL's are pg_dump's)
        result = runner.invoke(args=["backup", str(tmp_path / "copy.db")])
        assert result.exit_code == 0, result.output
        backup = (tmp_path / "copy.db").read_bytes()
        assert b"example" in backup or b"home" in backup, "a copy"
        assert ADDRESS.encode() not in backup


def test_a_hashed_address_differs_per_endpoint(client):
    put(client, "_default", {"clientIp": "hash"})
    ingest(client, private_record("home"), private_record("office"))
    addresses = {
        q["endpointId"]: q["sourceIp"] for q in client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
    }
    assert addresses["home"] != addresses["office"]
    assert all(a.startswith("100::") for a in addresses.values())


def test_metadata_question_and_answers(client, database):
    put(client, "home", {"clientMetadata": "drop", "question": "registrableDomain", "answers": "drop"})
    streamed = ingest_watched(client, private_record())
    found = only_record(client)
    assert found["question"] == "very-private-site.co.uk" and found["registrableDomain"] == "very-private-site.co.uk"
    assert found["triggerValue"] == "", "a rule names what it matched"
    assert found["answers"] == [] and found["spoofTarget"] == ""
    entry = client.get("/v2/client", headers=AUTH).json["items"]["home"]["clients"][ADDRESS]
    assert (entry["host"], entry["mac"], entry["ip"]) == ("", "", ADDRESS), "the address is clientIp's"
    stored = stored_text(database)
    assert NAME not in stored and HOST not in stored and ANSWER not in stored
    sent = everything_sent(client, streamed)
    assert NAME not in sent and HOST not in sent and ANSWER not in sent

    put(client, "home", {"question": "drop"})
    ingest(client, private_record(timestamp="2024-05-01T12:00:00Z", question="other.private.org"))
    counts = client.get(f"/v2/statistic/count/question?{WINDOW}", headers=AUTH).json["counts"]
    assert {c["value"]: c["count"] for c in counts} == {"very-private-site.co.uk": 1, "": 1}, "counted, not named"
    seen = client.get(f"/v2/statistic/first-seen/question?{WINDOW}", headers=AUTH).json["names"]
    assert [n["value"] for n in seen] == ["very-private-site.co.uk"], "a dropped question is no name"
    assert "private.org" not in stored_text(database)


def test_settings_apply_to_new_records_and_new_endpoints(client):
    ingest(client, private_record())
    put(client, "_default", {"clientIp": "drop"})
    ingest(client, private_record("new-endpoint"), private_record(timestamp="2024-05-01T11:00:00Z"))
    by_time = {
        (q["endpointId"], q["timestamp"]): q["sourceIp"]
        for q in client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
    }
    assert by_time[("home", "2024-05-01T10:00:00.000Z")] == ADDRESS, "stored before: as it was"
    assert by_time[("home", "2024-05-01T11:00:00.000Z")] is None
    assert by_time[("new-endpoint", "2024-05-01T10:00:00.000Z")] is None
    put(client, "home", {"clientIp": "keep"})
    ingest(client, private_record(timestamp="2024-05-01T12:00:00Z"))
    assert client.get("/v2/privacy", headers=AUTH).json["items"]["home"]["clientIp"] == "keep"
    assert by_time and only_at(client, "2024-05-01T12:00:00.000Z")["sourceIp"] == ADDRESS


def only_at(client, timestamp):
    return next(
        q for q in client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"] if q["timestamp"] == timestamp
    )


def test_changes_are_checked_limited_and_audited(client, runner):
    assert put(client, "home", {"ipv6Prefix": 56})["ipv6Prefix"] == 56
    assert put(client, "home", {"answers": "drop"})["ipv6Prefix"] == 56, "a missing field keeps its value"
    assert_error(client.put("/v2/privacy/home", json={"clientIp": "blur"}, headers=AUTH), 400, 40001)
    assert_error(client.put("/v2/privacy/home", json={"answers": {"a": 1}}, headers=AUTH), 400, 40001)
    assert_error(client.put("/v2/privacy/home", json=["answers"], headers=AUTH), 400)
    assert_error(client.put("/v2/privacy/home", json={"ipv4Prefix": 33}, headers=AUTH), 400, 40001)
    assert_error(client.put("/v2/privacy/home", json={"colour": "red"}, headers=AUTH), 400)
    assert_error(client.put("/v2/privacy/home", json={}, headers=AUTH), 400, 40001)
    result = runner.invoke(args=["keys", "create", "--name", "home-admin", "--scope", "admin", "--endpoint", "home"])
    limited = {"Authorization": result.output.strip().splitlines()[-1]}
    result = runner.invoke(args=["keys", "create", "--name", "reader", "--scope", "read"])
    reader = {"Authorization": result.output.strip().splitlines()[-1]}
    assert put(client, "home", {"question": "drop"}, headers=limited)["question"] == "drop"
    assert_error(client.put("/v2/privacy/office", json={"question": "drop"}, headers=limited), 403, 40302)
    assert_error(client.put("/v2/privacy/_default", json={"question": "drop"}, headers=limited), 403, 40302)
    assert_error(client.get("/v2/privacy", headers=reader), 403, 40301)
    assert set(client.get("/v2/privacy", headers=limited).json["items"]) == {"home"}
    actions = client.get("/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=privacy.set", headers=AUTH).json
    assert len(actions["actions"]) == 3
    assert actions["actions"][0]["keyName"] == "home-admin"
    assert actions["actions"][0]["metadata"]["body"] == {"question": "drop"}


def test_the_command_line_sets_and_shows(client, runner):
    result = runner.invoke(args=["privacy", "set", "home", "--client-ip", "truncate", "--ipv4-prefix", "8"])
    assert result.exit_code == 0, result.output
    assert client.get("/v2/privacy", headers=AUTH).json["items"]["home"]["ipv4Prefix"] == 8
    shown = runner.invoke(args=["privacy", "show"]).output.splitlines()
    assert shown[0].startswith("_default\t") and shown[1].startswith("home\t")
    assert json.loads(shown[1].split("\t", 1)[1])["clientIp"] == "truncate"
    assert runner.invoke(args=["privacy", "set", "home"]).exit_code != 0
    assert runner.invoke(args=["privacy", "set", "home", "--question", "blur"]).exit_code != 0
    ingest(client, private_record())
    assert only_record(client)["sourceIp"] == "192.0.0.0"
    entry = client.get("/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=privacy.set", headers=AUTH).json
    assert entry["actions"][0]["keyName"] == "cli"


def test_a_client_marked_not_logged_leaves_only_anonymous_counts(client, database):
    marked = client.put("/v2/client/logging/home/laptop", json={"logged": False}, headers=AUTH)
    assert marked.status_code == 200, marked.json
    assert marked.json["logged"] is False and marked.json["lastActivityTime"] is None, "before its first query"
    laptop = private_record(client_id="laptop", timestamp="2024-05-01T10:00:00Z")
    again = private_record(client_id="laptop", timestamp="2024-05-01T10:05:00Z")
    phone = record("home", "phone", "2024-05-01T11:00:00Z", "weather.example", sourceIp="192.0.2.1")
    streamed = ingest_watched(client, laptop, again, phone)
    assert [e["data"]["clientId"] for e in events([streamed])] == ["phone"], "the stream sends what is stored"

    queries = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
    assert [q["clientId"] for q in queries] == ["phone"]
    entry = client.get("/v2/client?endpointId=home", headers=AUTH).json["items"]["home"]["clients"]["laptop"]
    assert (entry["logged"], entry["host"], entry["ip"], entry["lastActivityTime"]) == (False, "", "", None)
    # Its share of the statistics, counted without it: in the day's totals and names, not by client.
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 3
    names = client.get(f"/v2/statistic/count/question?{WINDOW}", headers=AUTH).json["counts"]
    assert {c["value"]: c["count"] for c in names} == {NAME: 2, "weather.example": 1}
    by_client = client.get(f"/v2/statistic/count/clientId?{WINDOW}", headers=AUTH).json["counts"]
    assert by_client == [{"value": "phone", "count": 1}]
    sent = everything_sent(client, streamed)
    stored = stored_text(database)
    for text in (ADDRESS, HOST, ANSWER):
        assert text not in sent and text not in stored

    # Not counted at all, as the endpoint's setting says; logged again, stored again.
    put(client, "home", {"unloggedClients": "notCounted"})
    ingest(client, private_record(client_id="laptop", timestamp="2024-05-01T12:00:00Z", question="hidden.example"))
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 3
    assert "hidden.example" not in stored_text(database) + everything_sent(client)
    client.put("/v2/client/logging/home/laptop", json={"logged": True}, headers=AUTH)
    ingest(client, private_record(client_id="laptop", timestamp="2024-05-01T13:00:00Z"))
    assert [q["clientId"] for q in client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]] == [
        "laptop",
        "phone",
    ]
    actions = client.get("/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=client.logging.set", headers=AUTH)
    assert [a["metadata"]["body"] for a in actions.json["actions"]] == [{"logged": True}, {"logged": False}]


def test_marking_a_client_checks_its_input(client):
    assert_error(client.put("/v2/client/logging/home/laptop", json={}, headers=AUTH), 400)
    assert_error(client.put("/v2/client/logging/home/laptop", json={"logged": "no"}, headers=AUTH), 400)
    assert_error(client.put(f"/v2/client/logging/home/{'x' * 257}", json={"logged": False}, headers=AUTH), 400)
    assert client.get("/v2/client", headers=AUTH).json["items"] == {}, "nothing made"


def test_a_database_made_before_the_marks_gets_them_at_start(app, make_app, client, database):
    ingest(client, private_record(client_id="laptop"))
    run_sql(database, "DROP INDEX client_unlogged")
    run_sql(database, "ALTER TABLE client DROP COLUMN unlogged")
    as_older_schema(database, 12, "privacy_setting")
    restarted = make_app(**app.config).test_client()
    assert restarted.get("/v2/client", headers=AUTH).json["items"]["home"]["clients"]["laptop"]["logged"] is True
    assert restarted.put("/v2/client/logging/home/laptop", json={"logged": False}, headers=AUTH).status_code == 200
    ingest(restarted, private_record(client_id="laptop", timestamp="2024-05-01T11:00:00Z"))
    assert restarted.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"] == []
    assert restarted.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 2
    assert put(restarted, "home", {"answers": "drop"})["answers"] == "drop"


def test_marking_a_client_not_logged_removes_its_records_but_not_its_anonymous_share(client, database):
    ingest(client, private_record(client_id="tablet"), record("home", "phone", "2024-05-01T11:00:00Z", "a.example"))
    ingest(client, record("office", "tablet", "2024-05-01T11:00:00Z", "b.example"))
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 3
    marked = client.put("/v2/client/logging/home/tablet", json={"logged": False}, headers=AUTH).json
    assert (marked["logged"], marked["host"], marked["ip"], marked["lastActivityTime"]) == (False, "", "", None)
    queries = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
    assert {(q["endpointId"], q["clientId"]) for q in queries} == {("home", "phone"), ("office", "tablet")}
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 3, "counted anonymously"
    by_client = client.get(f"/v2/statistic/count/clientId?{WINDOW}&endpointId=home", headers=AUTH).json["counts"]
    assert by_client == [{"value": "phone", "count": 1}]
    for text in (ADDRESS, HOST):
        assert text not in stored_rows(database), "nothing refers to them (the strings stay: see the docs)"
    entry = client.get("/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=client.logging.set", headers=AUTH)
    assert entry.json["actions"][0]["metadata"]["result"] == {"logged": False, "deletedCount": 1}

    put(client, "office", {"unloggedClients": "notCounted"})
    client.put("/v2/client/logging/office/tablet", json={"logged": False}, headers=AUTH)
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 2, "not even counted"


class _Refused(Exception):
    pass


def _refuse():
    raise _Refused


def test_a_batch_whose_transaction_fails_counts_no_client_not_logged(app, client):
    """A batch whose transaction fails at its last step (a feed's import does, when another run
    of it moved its position) leaves the statistics as they were, its records of a client not
    logged included: ClickHouse counts those beside the records, and kept them."""
    ingest(client, record(client_id="quiet", timestamp="2024-05-01T10:00:00Z", question="first.example"))
    assert client.put("/v2/client/logging/ep1/quiet", json={"logged": False}, headers=AUTH).status_code == 200

    def seen():
        count = client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"]
        names = client.get(f"/v2/statistic/count/question?{WINDOW}", headers=AUTH).json["counts"]
        log = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).json["queries"]
        return count, names, [entry["question"] for entry in log]

    before = seen()
    batch = [
        record(client_id="quiet", timestamp="2024-05-01T11:00:00Z", question="hidden.example"),
        record(client_id="loud", timestamp="2024-05-01T11:00:01Z", question="shown.example"),
    ]
    for sent in (batch, batch[:1]):  # with a record kept, and with none
        with app.app_context(), models.engine.database.connection():
            with pytest.raises(_Refused), models.engine.database.storing():
                models.stores.bound.records().store_records(parse_records(sent, 1714600000000), _refuse)
        assert seen() == before, sent
    ingest(client, *batch)
    assert seen()[0] == before[0] + 2
