"""The access log (GET /v2/access-log): every read of the activity log, its CSV export and its
realtime stream, by key, source address, query, window, rows and bytes."""

import time

from support.helpers import API_KEY, AUTH, assert_error, ingest, record
from support.servers import Gunicorn
from support.stores import run_sql
from support.streams import StreamReader

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
SINCE = "startTime=2020-01-01T00:00:00Z"


def new_key(runner, name, *scopes, endpoints=()):
    args = ["keys", "create", "--name", name, *(a for s in scopes for a in ("--scope", s))]
    args += [a for e in endpoints for a in ("--endpoint", e)]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    return {"Authorization": result.output.strip().splitlines()[-1]}


def reads(client, query="", headers=AUTH):
    response = client.get(f"/v2/access-log?{SINCE}&{query}", headers=headers)
    assert response.status_code == 200, response.json
    return response.json["reads"]


def test_each_read_of_the_log_is_recorded_with_what_it_sent(client, runner):
    ingest(client, *[record(client_id=f"c{i % 2}", question=f"q{i}.com") for i in range(5)])
    reader = new_key(runner, "auditor-test", "read")
    with client.get(f"/v2/activity-log?{WINDOW}&clientId[]=c0&pageSize=2", headers=reader) as page:
        assert page.status_code == 200
        page_bytes = len(page.data)
    with client.get(f"/v2/activity-log/csv?{WINDOW}", headers=reader) as export:
        csv_bytes = len(export.data)
    assert client.get("/v2/activity-log?startTime=nonsense", headers=reader).status_code == 400
    found = reads(client)
    assert [r["kind"] for r in found] == ["activity-log/csv", "activity-log"], "newest first; a refused read is none"
    csv_read, page_read = found
    assert page_read["keyName"] == "auditor-test" and isinstance(page_read["keyId"], int)
    assert page_read["sourceIp"] == "127.0.0.1"
    assert page_read["query"] == {
        "startTime": "2024-05-01T00:00:00Z",
        "endTime": "2024-05-02T00:00:00Z",
        "clientId[]": "c0",
        "pageSize": "2",
    }
    assert (page_read["startTime"], page_read["endTime"]) == ("2024-05-01T00:00:00.000Z", "2024-05-02T00:00:00.000Z")
    assert (page_read["rows"], page_read["bytes"]) == (2, page_bytes)
    assert (csv_read["rows"], csv_read["bytes"]) == (5, csv_bytes)
    assert [r["kind"] for r in reads(client, "kind=activity-log")] == ["activity-log"]
    assert reads(client, "keyName=someone-else") == []
    assert_error(client.get(f"/v2/access-log?{SINCE}", headers=reader), 403)


def test_a_stream_is_recorded_when_it_opens_and_completed_when_it_ends(client):
    token = client.get("/v2/auth/token", headers=AUTH).json["token"]
    stream = client.get(f"/v2/activity-log/realtime?authToken={token}&clientId[]=c1", buffered=False)
    chunks = iter(stream.response)
    next(chunks)
    (opened,) = reads(client, "kind=activity-log/realtime")
    assert opened["rows"] is None and "authToken" not in opened["query"], "a credential is never kept"
    assert opened["query"] == {"clientId[]": "c1"} and opened["startTime"] is None
    ingest(client, record(client_id="c1"), record(client_id="c2"), record(client_id="c1", question="b.com"))
    got = next(chunks).decode()
    while got.count("\ndata: ") < 2:
        got += next(chunks).decode()
    stream.close()
    (closed,) = reads(client, "kind=activity-log/realtime")
    assert closed["rows"] == 2 and closed["bytes"] >= len(got.encode())


def test_an_endpoint_limited_admin_sees_the_reads_within_its_endpoints(client, runner):
    ingest(client, record("mine"), record("theirs"))
    mine = new_key(runner, "mine-admin", "admin", endpoints=["mine"])
    other = new_key(runner, "both-reader", "read", endpoints=["mine", "theirs"])
    client.get(f"/v2/activity-log?{WINDOW}", headers=mine).close()
    client.get(f"/v2/activity-log?{WINDOW}", headers=other).close()
    client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).close()
    assert [r["keyName"] for r in reads(client, headers=mine)] == ["mine-admin"]
    assert len(reads(client)) == 3


def test_off_and_expiry(app, client, database, runner):
    app.config["ANALYTICS_ACCESS_LOG"] = False
    client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).close()
    assert reads(client) == []
    app.config["ANALYTICS_ACCESS_LOG"] = True
    client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).close()
    (kept,) = reads(client)
    two_days_ago = int(time.time() * 1000) - 2 * 86_400_000
    run_sql(database, "UPDATE access_read SET ts = ?", [two_days_ago])
    app.config["ANALYTICS_ACCESS_LOG_RETENTION_DAYS"] = 3
    runner.invoke(args=["retention"])
    assert [r["id"] for r in reads(client)] == [kept["id"]]
    app.config["ANALYTICS_ACCESS_LOG_RETENTION_DAYS"] = 1
    runner.invoke(args=["retention"])
    assert reads(client) == []


def test_the_setting_is_checked_at_start(make_app):
    try:
        make_app(ANALYTICS_DATABASE=None, ANALYTICS_ACCESS_LOG="maybe")
    except RuntimeError as exc:
        assert "ANALYTICS_ACCESS_LOG must be true or false" in str(exc)
    else:
        raise AssertionError("an unreadable setting must stop the start")


def test_recorded_by_gunicorn_as_it_serves(tmp_path, database):
    """Under gunicorn the entry is written when the server closes the response, in whichever
    worker served it; a stream cut by its client is completed too."""
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY})
    try:
        assert server.call("POST", "/v2/ingest", [record(), record(question="b.com")], AUTH)[0] == 200
        status, body = server.fetch("GET", f"/v2/activity-log/csv?{WINDOW}", headers=AUTH)
        assert status == 200
        token = server.call("GET", "/v2/auth/token", headers=AUTH)[1]["token"]
        stream = StreamReader(server, f"/v2/activity-log/realtime?authToken={token}")
        assert server.call("POST", "/v2/ingest", [record(question="live.com")], AUTH)[0] == 200
        assert [e["data"]["question"] for e in stream.take(1)] == ["live.com"]
        stream.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = server.call("GET", f"/v2/access-log?{SINCE}", headers=AUTH)[1]["reads"]
            if len(found) == 2 and found[0]["rows"] is not None:
                break
            time.sleep(0.1)
        by_kind = {r["kind"]: r for r in found}
        assert (by_kind["activity-log/csv"]["rows"], by_kind["activity-log/csv"]["bytes"]) == (2, len(body))
        assert by_kind["activity-log/realtime"]["rows"] == 1
    finally:
        server.stop()
