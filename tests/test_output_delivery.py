"""Outputs delivering through real gunicorn (two workers, so the lease matters) to real receivers:
an HTTP server, files, Debian's rsyslog over UDP, TCP and TLS. Every record arrives, in order,
at least once: through receiver outages, and through gunicorn killed with SIGKILL mid-run."""

import json
import time

import pytest

from support import processes, rsyslog, stores
from support.helpers import API_KEY, AUTH, samples, wait_for
from support.receivers import HttpReceiver, file_records, first_arrivals
from support.servers import Gunicorn


@pytest.fixture
def server(tmp_path, database):
    started = []

    def start(**env):
        server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY, **env}, workers=2)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def receiver():
    made = HttpReceiver()
    yield made
    made.stop()


@pytest.fixture
def syslog_receiver():
    rsyslog.probe()
    if rsyslog.UNAVAILABLE:
        pytest.skip(rsyslog.banner())
    made = rsyslog.Rsyslog()
    yield made
    made.close()


def ingest(server, first: int, count: int, batch: int = 250) -> list[str]:
    """Records q{first}.example ... in order, batch by batch; their questions."""
    questions = [f"q{n}.example" for n in range(first, first + count)]
    for at in range(0, count, batch):
        records = [
            {"timestamp": "2024-05-01T12:00:00Z", "endpointId": "ep1", "clientId": "c1", "question": q}
            for q in questions[at : at + batch]
        ]
        status, body = server.call("POST", "/v2/ingest", records, AUTH)
        assert status == 200, body
    return questions


def create(server, body) -> dict:
    status, made = server.call("POST", "/v2/output", body, AUTH)
    assert status == 201, made
    return made


def output(server, output_id) -> dict:
    status, found = server.call("GET", f"/v2/output/{output_id}", None, AUTH)
    assert status == 200, found
    return found


def test_http_and_file_outputs_receive_every_record_in_order(server, receiver, tmp_path, database):
    gunicorn = server()
    path = tmp_path / "out" / "queries.jsonl"
    path.parent.mkdir()
    early = ingest(gunicorn, 0, 400)
    http = create(gunicorn, {"kind": "http", "url": receiver.url, "headers": {"X-Token": "t0ken"}, "batchSize": 100})
    file = create(gunicorn, {"kind": "file", "url": f"file://{path}", "maxBytes": 50_000, "keep": 100})
    questions = early + ingest(gunicorn, 400, 600)

    wait_for(lambda: len(receiver.records) >= 1000, 60, "the HTTP receiver to get 1,000 records")
    wait_for(lambda: len(file_records(path)) >= 1000, 60, "the file to hold 1,000 records")
    # Nothing twice either: one worker at a time delivers each output.
    assert [r["question"] for r in receiver.records] == questions
    assert [r["question"] for r in file_records(path)] == questions
    ids = receiver.ids()
    assert ids == sorted(ids) and [r["recordId"] for r in file_records(path)] == ids
    assert receiver.records[0]["timestamp"] == "2024-05-01T12:00:00.000Z"
    assert {h["X-Token"] for h in receiver.requests} == {"t0ken"}
    assert {h["Content-Type"] for h in receiver.requests} == {"application/x-ndjson"}
    # Rotated by size: several files, none much past the limit.
    rotated = sorted(p for p in path.parent.iterdir() if p.name != path.name)
    assert len(rotated) >= 3 and all(p.stat().st_size <= 50_000 for p in rotated)

    # The receiver has a batch before the cursor moves past it (at least once): wait for that.
    caught_up = lambda: all(output(gunicorn, o["id"])["backlog"] == 0 for o in (http, file))  # noqa: E731
    wait_for(caught_up, 30, "the cursors to pass the last batch")
    state = output(gunicorn, http["id"])
    assert (state["delivered"], state["backlog"], state["failures"]) == (1000, 0, 0)
    assert state["cursor"] == ids[-1] and state["lastDeliveryAt"] is not None
    assert output(gunicorn, file["id"])["delivered"] == 1000
    status, text = gunicorn.fetch("GET", "/metrics", None, AUTH)
    counted = samples(text.decode())
    assert counted[("dns_analytics_output_records_total", (("output", receiver.url),))] == 1000

    # A restart (SIGTERM, as systemd stops it) hands the outputs over at once: delivery goes on
    # within seconds, not after the 30 s lease.
    processes.stop(gunicorn.process)
    assert stores.run_sql(database, "SELECT holder FROM job_lease WHERE name LIKE 'output:%'") == [(None,), (None,)]
    gunicorn.start()
    started = time.monotonic()
    questions += ingest(gunicorn, 1000, 100)
    wait_for(lambda: len(receiver.records) >= 1100, 60, "delivery after the restart")
    assert time.monotonic() - started < 25  # the 30 s lease did not have to run out
    assert [r["question"] for r in receiver.records] == questions
    wait_for(lambda: len(file_records(path)) >= 1100, 60, "the file after the restart")
    assert [r["question"] for r in file_records(path)] == questions

    # The file's folder gone for a while (a disk unmounted): the file output waits, then catches up.
    path.parent.rename(tmp_path / "away")
    later = ingest(gunicorn, 1100, 300)
    wait_for(lambda: output(gunicorn, file["id"])["failures"] > 0, 30, "the missing folder to be noticed")
    assert "No such file or directory" in output(gunicorn, file["id"])["lastError"]
    path.parent.mkdir()
    wait_for(lambda: {r["question"] for r in file_records(path)} >= set(later), 60, "the file to catch up")
    assert [r["question"] for r in first_arrivals(file_records(path))] == later


def test_a_killed_service_and_a_receiver_that_was_down_lose_nothing(server, receiver, database):
    # A 3 s lease (the output's send timeout short enough for it: a lease outlasts any send), so
    # that the killed processes' lease runs out in seconds rather than the default 30.
    gunicorn = server(ANALYTICS_OUTPUT_LEASE_SECONDS="3")
    receiver.delay = 0.05  # slow enough that the kill lands mid-delivery
    made = create(gunicorn, {"kind": "http", "url": receiver.url, "batchSize": 50, "timeoutSeconds": 1})
    questions = ingest(gunicorn, 0, 2000)
    wait_for(lambda: len(receiver.records) >= 300, 60, "delivery to be under way")
    gunicorn.kill_all()
    assert len(receiver.records) < 2000, "the kill came after the end: slow the receiver"
    lease = "SELECT holder FROM job_lease WHERE name LIKE 'output:%'"
    [(dead,)] = stores.run_sql(database, lease)
    assert dead is not None, "a kill hands nothing over: the dead process's lease is left to run out"
    gunicorn.start()
    # The dead process's lease runs out first, then a new worker takes it over from the cursor.
    wait_for(lambda: set(questions) <= {r["question"] for r in receiver.records}, 120, "every record after the kill")
    [(holder,)] = stores.run_sql(database, lease)
    assert holder not in (None, dead)

    receiver.stop()
    questions += ingest(gunicorn, 2000, 500)
    wait_for(lambda: output(gunicorn, made["id"])["failures"] > 0, 30, "the outage to be noticed")
    failing = output(gunicorn, made["id"])
    assert failing["lastError"] and failing["backlog"] > 0
    receiver.start()
    wait_for(lambda: set(questions) <= {r["question"] for r in receiver.records}, 120, "the receiver to catch up")

    # Every record, and in order where each first arrived: a repeat only goes back to resend.
    first = first_arrivals(receiver.records)
    assert [r["question"] for r in first] == questions
    assert [r["recordId"] for r in first] == sorted(r["recordId"] for r in first)
    wait_for(lambda: output(gunicorn, made["id"])["backlog"] == 0, 30, "the cursor to pass the last batch")
    final = output(gunicorn, made["id"])
    assert final["backlog"] == 0 and final["failures"] == 0 and final["delivered"] >= 2500


def test_https_with_its_own_authority_or_without_checks(server):
    trusted, unchecked = HttpReceiver(tls=True), HttpReceiver(tls=True)
    try:
        gunicorn = server()
        with open(trusted.certificate, encoding="utf-8") as handle:
            authority = handle.read()
        create(gunicorn, {"kind": "http", "url": trusted.url, "tls": {"caCert": authority}})
        create(gunicorn, {"kind": "http", "url": unchecked.url, "tls": {"verify": False}})
        # The system's authorities do not know the receiver's certificate: refused, and said why.
        strict = create(gunicorn, {"kind": "http", "url": unchecked.url, "name": "strict"})
        questions = ingest(gunicorn, 0, 300)
        wait_for(lambda: len(trusted.records) >= 300 and len(unchecked.records) >= 300, 60, "both HTTPS receivers")
        assert [r["question"] for r in trusted.records] == questions
        assert [r["question"] for r in unchecked.records] == questions
        wait_for(lambda: output(gunicorn, strict["id"])["failures"] > 0, 30, "the strict output to fail")
        assert "CERTIFICATE_VERIFY_FAILED" in output(gunicorn, strict["id"])["lastError"]
    finally:
        trusted.stop()
        unchecked.stop()


def test_syslog_reaches_rsyslog_over_udp_tcp_and_tls(server, syslog_receiver):
    gunicorn = server()
    with open(syslog_receiver.certificate, encoding="utf-8") as handle:
        authority = handle.read()
    tls = {"caCert": authority}
    create(gunicorn, {"kind": "syslog", "url": syslog_receiver.url("udp")})
    create(gunicorn, {"kind": "syslog", "url": syslog_receiver.url("tcp"), "shape": "controlD"})
    create(gunicorn, {"kind": "syslog", "url": syslog_receiver.url("tls"), "tls": tls, "batchSize": 60})
    create(
        gunicorn,
        {
            "kind": "syslog",
            "url": syslog_receiver.url("tls"),
            "name": "old",
            "format": "rfc3164",
            "tls": {"verify": False},
        },
    )
    questions = ingest(gunicorn, 0, 300)

    def arrived(transport, version):
        return [m for m in syslog_receiver.received(transport) if m["version"] == version]

    wait_for(lambda: len(arrived("udp", "1")) >= 300, 60, "rsyslog to get 300 messages over UDP")
    wait_for(lambda: len(arrived("tcp", "1")) >= 300, 60, "rsyslog to get 300 messages over TCP")
    wait_for(lambda: len(arrived("tls", "1")) >= 300, 60, "rsyslog to get 300 messages over TLS")
    wait_for(lambda: len(arrived("tls", "0")) >= 300, 60, "rsyslog to get 300 RFC 3164 messages")

    for transport, version, name in [
        ("udp", "1", "question"),
        ("tcp", "1", "query"),
        ("tls", "1", "question"),
        ("tls", "0", "question"),
    ]:
        messages = arrived(transport, version)
        assert {(m["app"], m["pri"]) for m in messages} == {("dns-analytics", "134")}  # local0.info
        if version == "1":
            assert {m["msgid"] for m in messages} == {"dnsquery"}
        records = [json.loads(m["msg"]) for m in messages]
        assert [r[name] for r in records] == questions, (transport, version)

    def streams_caught_up(seconds, what):
        """The TCP and TLS outputs delivered every question so far, in order, each at least once."""
        for transport, version, key, name in [("tcp", "1", "record_id", "query"), ("tls", "1", "recordId", "question")]:
            wait_for(
                lambda t=transport, v=version, n=name: (
                    set(questions) <= {json.loads(m["msg"])[n] for m in arrived(t, v)}
                ),
                seconds,
                f"{transport} {what}",
            )
            records = first_arrivals([json.loads(m["msg"]) for m in arrived(transport, version)], key)
            assert [r[name] for r in records] == questions

    # rsyslog away for a while: the stream outputs wait and catch up (UDP has no way to know).
    syslog_receiver.stop()
    questions += ingest(gunicorn, 300, 200)
    syslog_receiver.start()
    streams_caught_up(90, "to catch up after the outage")

    # And through a restart of the service.
    processes.stop(gunicorn.process)
    gunicorn.start()
    questions += ingest(gunicorn, 500, 100)
    streams_caught_up(60, "after the restart")


def test_past_the_backlog_limit_the_oldest_are_skipped_and_counted(server, receiver):
    gunicorn = server(ANALYTICS_OUTPUT_BACKLOG="100")
    receiver.stop()
    questions = ingest(gunicorn, 0, 300)
    made = create(gunicorn, {"kind": "http", "url": receiver.url, "name": "siem"})
    wait_for(lambda: output(gunicorn, made["id"])["skipped"] == 200, 30, "the backlog to be cut")
    receiver.start()
    wait_for(lambda: len(receiver.records) >= 100, 30, "the newest 100 records")
    assert [r["question"] for r in receiver.records] == questions[200:]
    status, text = gunicorn.fetch("GET", "/metrics", None, AUTH)
    assert samples(text.decode())[("dns_analytics_output_skipped_records_total", (("output", "siem"),))] == 200
    log = gunicorn.log_path.read_text()
    assert "output 1 (siem): 200 records skipped, never sent: more than ANALYTICS_OUTPUT_BACKLOG=100" in log
    status, actions = gunicorn.call("GET", "/v2/admin-action?startTime=-1h&action=output.skip", None, AUTH)
    assert [a["metadata"]["skipped"] for a in actions["actions"]] == [200]
