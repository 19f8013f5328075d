"""GET /v2/auth/token and GET /v2/activity-log/realtime (server-sent events)."""

import json
import sqlite3
import subprocess
import sys
import time

import pytest

import app.auth

from support.helpers import API_KEY, AUTH, assert_error, ingest, record
from support.servers import ROOT, Gunicorn
from support.streams import StreamReader, events


def token(client):
    response = client.get("/v2/auth/token", headers=AUTH)
    assert response.status_code == 200
    assert set(response.json) == {"token", "expiresAt"}
    return response.json["token"]


def open_stream(client, query="", headers=None):
    response = client.get(f"/v2/activity-log/realtime?{query}", headers=headers or {}, buffered=False)
    return response, iter(response.response)


def test_token_shape_and_expiry_time(client):
    response = client.get("/v2/auth/token", headers=AUTH)
    expires = response.json["expiresAt"]
    assert len(expires) == 24 and expires.endswith("Z")


def test_stream_sends_records_ingested_after_connect_matching_filters(client):
    ingest(client, record(client_id="wanted", question="before.com"))
    response, chunks = open_stream(client, f"authToken={token(client)}&clientId[]=wanted")
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    first = next(chunks).decode()
    assert first.startswith(":")
    ingest(client, record(client_id="other", question="no.com"), record(client_id="wanted", question="yes.com"))
    got = events([next(chunks).decode()])
    assert [e["data"]["question"] for e in got] == ["yes.com"]
    assert got[0]["data"]["clientId"] == "wanted" and got[0]["data"]["timestamp"].endswith("Z")
    response.close()


def test_token_is_single_use(client):
    secret = token(client)
    response, _ = open_stream(client, f"authToken={secret}")
    assert response.status_code == 200
    response.close()
    response, _ = open_stream(client, f"authToken={secret}")
    assert_error(response, 401, 40103)


@pytest.mark.sqlite_only
def test_tokens_are_issued_without_a_write(client, database):
    """A token flood must not queue behind (or slow) ingest: issuing writes nothing, so it goes
    on while another connection holds the database's write lock."""
    locker = sqlite3.connect(database, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        issued = [token(client) for _ in range(20)]
        assert time.monotonic() - started < 5, "issuing waited for the write lock"
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert len(set(issued)) == 20
    response, _ = open_stream(client, f"authToken={issued[0]}")
    assert response.status_code == 200
    response.close()
    assert_error(open_stream(client, f"authToken={issued[0]}")[0], 401, 40103)
    response, _ = open_stream(client, f"authToken={issued[1]}")
    assert response.status_code == 200, "using one token leaves the others alone"
    response.close()


def test_expired_token_is_401(client, monkeypatch):
    secret = token(client)
    real_now = app.auth.now_ms
    monkeypatch.setattr(app.auth, "now_ms", lambda: real_now() + 61_000)
    response, _ = open_stream(client, f"authToken={secret}")
    assert_error(response, 401, 40103)


def test_unknown_token_and_no_credentials_are_401(client):
    assert_error(open_stream(client, "authToken=made-up")[0], 401, 40103)
    payload, signature = token(client).split(".")
    forged = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB")
    assert_error(open_stream(client, f"authToken={forged}.{signature}")[0], 401, 40103)
    assert_error(open_stream(client)[0], 401, 40101)


def test_authorization_header_works_too(client):
    response, _ = open_stream(client, headers=AUTH)
    assert response.status_code == 200
    response.close()


def test_resume_with_last_event_id(client):
    ingest(client, *[record(question=f"q{i}.com") for i in range(3)])
    response, chunks = open_stream(client, headers=AUTH)
    next(chunks)
    ingest(client, record(question="a.com"), record(question="b.com"))
    got = events([next(chunks).decode() for _ in range(2)])
    assert [e["data"]["question"] for e in got] == ["a.com", "b.com"]
    assert got[0]["id"] < got[1]["id"]
    response.close()

    ingest(client, record(question="c.com"), record(question="d.com"))  # while disconnected
    response, chunks = open_stream(client, headers={**AUTH, "Last-Event-ID": str(got[0]["id"])})
    next(chunks)
    resumed = events([next(chunks).decode() for _ in range(3)])
    assert [e["data"]["question"] for e in resumed] == ["b.com", "c.com", "d.com"]
    response.close()


def test_bad_last_event_id_is_400(client):
    assert_error(open_stream(client, headers={**AUTH, "Last-Event-ID": "x"})[0], 400, 40001)


def test_stream_limit_is_503_and_slots_come_back(app, client):
    app.config["ANALYTICS_MAX_STREAMS"] = 1
    first, _ = open_stream(client, headers=AUTH)
    assert first.status_code == 200
    assert_error(open_stream(client, headers=AUTH)[0], 503, 50301)
    first.close()
    again, _ = open_stream(client, headers=AUTH)
    assert again.status_code == 200
    again.close()


@pytest.fixture
def servers(tmp_path, database):
    env = {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}
    first = Gunicorn(tmp_path, env, workers=2)
    second = Gunicorn(tmp_path, env, workers=2)
    yield first, second
    first.stop()
    second.stop()


def test_realtime_across_gunicorn_workers(servers):
    """Streams on one gunicorn, ingestion through another process: events within a second,
    filtered, resumable, and the token single-use."""
    streaming, ingesting = servers
    status, body = streaming.call("GET", "/v2/auth/token", headers=AUTH)
    assert status == 200
    secret = body["token"]
    stream = StreamReader(streaming, f"/v2/activity-log/realtime?authToken={secret}&endpointId[]=home")
    assert stream.response.status == 200

    status, error = streaming.call("GET", f"/v2/activity-log/realtime?authToken={secret}")
    assert (status, error["error"]["code"]) == (401, 40103), "a token works once"
    status, error = ingesting.call("GET", f"/v2/activity-log/realtime?authToken={secret}")
    assert (status, error["error"]["code"]) == (401, 40103), "once, also in another gunicorn's workers"

    sent = time.monotonic()
    for i in range(3):
        batch = [record("home", "pc", question=f"home{i}.com"), record("away", "pc", question=f"away{i}.com")]
        assert ingesting.call("POST", "/v2/ingest", batch, AUTH)[0] == 200
    got = stream.take(3)
    assert time.monotonic() - sent < 3
    assert [e["data"]["question"] for e in got] == ["home0.com", "home1.com", "home2.com"]
    assert all(e["data"]["endpointId"] == "home" for e in got)
    stream.close()

    # Missed while disconnected, then resumed from the last id seen.
    assert ingesting.call("POST", "/v2/ingest", [record("home", "pc", question="missed.com")], AUTH)[0] == 200
    status, body = streaming.call("GET", "/v2/auth/token", headers=AUTH)
    resumed = StreamReader(
        streaming,
        f"/v2/activity-log/realtime?authToken={body['token']}&endpointId=home",
        {"Last-Event-ID": str(got[1]["id"])},
    )
    again = resumed.take(2)
    assert [e["data"]["question"] for e in again] == ["home2.com", "missed.com"]
    assert again[0]["id"] == got[2]["id"]
    resumed.close()

    # The API keeps answering while streams are open.
    status, _ = streaming.call("GET", "/v2/client", headers=AUTH)
    assert status == 200


def test_a_closed_stream_frees_its_slot_at_once(tmp_path):
    server = Gunicorn(
        tmp_path,
        {
            "ANALYTICS_DATABASE": str(tmp_path / "one.db"),
            "ANALYTICS_API_KEY": API_KEY,
            "ANALYTICS_MAX_STREAMS": "1",
        },
        workers=1,
    )
    try:
        stream = StreamReader(server, "/v2/activity-log/realtime", AUTH)
        assert stream.response.status == 200
        status, body = server.call("GET", "/v2/activity-log/realtime", headers=AUTH)
        assert (status, body["error"]["code"]) == (503, 50301)
        stream.close()
        deadline = time.monotonic() + 5
        while True:
            again = StreamReader(server, "/v2/activity-log/realtime", AUTH)
            if again.response.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert again.response.status == 200, "the slot came back well before a keep-alive"
        again.close()
    finally:
        server.stop()


def test_a_failed_start_gives_its_slot_back(app, client, monkeypatch):
    app.config["ANALYTICS_MAX_STREAMS"] = 1

    def broken():
        raise RuntimeError("injected")

    # The app reads the stream's start from its record store (models/stores/).
    monkeypatch.setattr(app.extensions["records"], "committed_top", broken)
    assert_error(open_stream(client, headers=AUTH)[0], 500)
    monkeypatch.undo()
    response, _ = open_stream(client, headers=AUTH)
    assert response.status_code == 200, "the slot of the failed start is free again"
    response.close()


def test_out_of_range_last_event_id_is_400(client):
    for value in ("99999999999999999999", "-1"):
        assert_error(open_stream(client, headers={**AUTH, "Last-Event-ID": value})[0], 400, 40001)


def test_a_client_first_seen_after_connecting_is_streamed(client):
    response, chunks = open_stream(client, "clientId[]=newcomer", headers=AUTH)
    next(chunks)
    ingest(client, record(client_id="newcomer", question="hello.com"))
    assert [e["data"]["question"] for e in events([next(chunks).decode()])] == ["hello.com"]
    response.close()


def test_revoking_a_key_ends_its_streams_and_voids_its_tokens(client, runner):
    created = runner.invoke(args=["keys", "create", "--name", "watcher", "--scope", "read"])
    secret = {"Authorization": created.output.strip().splitlines()[-1]}
    spare = client.get("/v2/auth/token", headers=secret).json["token"]
    live = client.get("/v2/auth/token", headers=secret).json["token"]
    response, chunks = open_stream(client, f"authToken={live}")
    assert next(chunks).decode().startswith(":")
    assert runner.invoke(args=["keys", "revoke", "watcher"]).exit_code == 0
    started, text = time.monotonic(), ""
    for chunk in chunks:  # the stream ends by itself (else a keep-alive comes within 15 s)
        text += chunk.decode()
        if time.monotonic() - started > 14:
            break
    assert time.monotonic() - started < 5
    assert "event: revoked" in text
    response.close()
    response, _ = open_stream(client, f"authToken={spare}")  # minted before the revocation
    assert_error(response, 401, 40103)


def blocks(chunks, until, timeout=5.0) -> list[dict]:
    """SSE blocks with an id as field dicts, read until `until(blocks)` holds."""
    found, text, deadline = [], "", time.monotonic() + timeout
    for chunk in chunks:
        text += chunk.decode()
        *done, text = text.split("\n\n")
        for block in done:
            fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
            if "id" in fields:
                found.append(fields)
        if until(found) or time.monotonic() > deadline:
            break
    return found


def test_a_stream_that_matches_nothing_moves_on_and_says_how_far(client):
    response, chunks = open_stream(client, "endpointId=nobody", headers=AUTH)
    next(chunks)
    ingest(client, *[record(question=f"q{i}.com") for i in range(30)])
    top = 30  # ids start at 1 on a fresh database
    got = blocks(chunks, lambda found: any(b.get("id") == str(top) for b in found))
    response.close()
    # A position without data: EventSource moves its Last-Event-ID and fires no event.
    assert {"id": str(top)} in got, got
    assert not any("data" in b for b in got)


def test_a_resume_from_an_old_id_replays_only_the_newest_records(app, client):
    app.config["ANALYTICS_STREAM_BACKLOG"] = 5
    ingest(client, *[record(question=f"q{i}.com") for i in range(12)])
    response, chunks = open_stream(client, headers={**AUTH, "Last-Event-ID": "0"})
    got = blocks(chunks, lambda found: len(found) >= 6)
    response.close()
    skipped, replayed = got[0], got[1:]
    assert skipped["event"] == "skipped" and skipped["id"] == "7"
    assert json.loads(skipped["data"])["afterId"] == 0
    assert json.loads(skipped["data"])["upToId"] == 7
    assert [json.loads(b["data"])["question"] for b in replayed] == [f"q{i}.com" for i in range(7, 12)]
    assert [int(b["id"]) for b in replayed] == list(range(8, 13))


def test_one_key_cannot_take_every_stream(tmp_path):
    database = str(tmp_path / "one.db")
    env = {
        "ANALYTICS_DATABASE": database,
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_MAX_STREAMS": "4",
        "ANALYTICS_MAX_STREAMS_PER_KEY": "2",
    }
    server = Gunicorn(tmp_path, env, workers=1)
    try:
        created = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "keys", "create", "--name", "r", "--scope", "read"],
            cwd=ROOT,
            env={**server.env},
            capture_output=True,
            text=True,
            check=True,
        )
        reader = {"Authorization": created.stdout.strip().splitlines()[-1]}
        held = [StreamReader(server, "/v2/activity-log/realtime", reader) for _ in range(2)]
        assert [s.response.status for s in held] == [200, 200]
        refused = StreamReader(server, "/v2/activity-log/realtime", reader)
        assert refused.response.status == 429
        assert int(refused.response.headers["Retry-After"]) > 0
        status, body = server.call("GET", "/v2/activity-log/realtime", headers=reader)  # (a 429: no stream to hang on)
        assert (status, body["error"]["code"]) == (429, 42902)
        operator = StreamReader(server, "/v2/activity-log/realtime", AUTH)
        assert operator.response.status == 200, "the operator still gets a stream"
        operator.close()
        held[0].close()
        deadline = time.monotonic() + 5
        while True:  # the closed stream gives its share back
            again = StreamReader(server, "/v2/activity-log/realtime", reader)
            if again.response.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert again.response.status == 200
        again.close()
        held[1].close()
    finally:
        server.stop()
