"""Feeds as the processes users run: following a source, pushing to a remote service through the
spool while the service comes and goes and the feed is killed, and overlapping runs."""

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from feeds.sinks import StoreProcess, _validate_and_store

from support import processes
from support.helpers import API_KEY, AUTH, wait_for
from support.importing import T0, add_row, entry, make_ftl_db, write_log
from support.servers import ROOT, Gunicorn

WHOLE = "startTime=2000-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z"


FEED_PROGRAM = os.path.join(os.path.dirname(sys.executable), "dns-analytics-feed")


def feed(tmp_path, *args, store="feeder.db", settings=None) -> subprocess.Popen:
    """`dns-analytics-feed ARGS` (the console entry point) as its own process, on its own local
    database (`settings`: more environment variables)."""
    env = {**os.environ, "ANALYTICS_DATABASE": str(tmp_path / store), "ANALYTICS_API_KEY": API_KEY, **(settings or {})}
    log_path = tmp_path / f"feed-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [FEED_PROGRAM, *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    process.log_path = log_path
    return process


@pytest.fixture
def questions_in(make_app):
    """The questions a database holds, read through the API (oldest first)."""

    def read(database: str) -> list[str]:
        client = make_app(ANALYTICS_DATABASE=database).test_client()
        found, page = [], 0
        while True:
            body = client.get(f"/v2/activity-log?{WHOLE}&sortOrder=asc&pageSize=500&page={page}", headers=AUTH).json
            found += [r["question"] for r in body["queries"]]
            if len(body["queries"]) < 500:
                return found
            page += 1

    return read


def test_following_an_adguard_log_across_rotation_then_stopping_cleanly(tmp_path, questions_in):
    path = tmp_path / "querylog.json"
    store = str(tmp_path / "store.db")
    write_log(path, entry("one.example", 1))
    follower = feed(tmp_path, "import-adguard", str(path), "--follow", "--interval", "0.1", store="store.db")
    try:
        wait_for(lambda: questions_in(store) == ["one.example"], what="the first line")
        write_log(path, entry("two.example", 2), mode="a")
        write_log(path, entry("three.example", 3), mode="a")
        path.rename(tmp_path / "querylog.json.1")  # AdGuard Home rotates the log
        write_log(path, entry("four.example", 4))
        expected = ["one.example", "two.example", "three.example", "four.example"]
        wait_for(lambda: questions_in(store) == expected, what="the rotated and the new lines")
    finally:
        assert processes.stop(follower, timeout=30, group=True) == 0


def frozen_in(database: str) -> int:
    with contextlib.closing(sqlite3.connect(database)) as conn:
        return conn.execute("SELECT COALESCE(SUM(n), 0) FROM record_block").fetchone()[0]


def test_a_feeds_own_store_freezes_past_the_hot_horizon_it_is_given(tmp_path, questions_in):
    """ANALYTICS_HOT_HOURS reaches the store of an import and the store process of a live feed:
    records three hours old are frozen as they are stored under 1 hour, and kept as rows under
    the default 48."""
    started = datetime.now(UTC) - timedelta(hours=3)
    stamps = [(started + timedelta(seconds=i)).isoformat() for i in range(20)]
    log = write_log(tmp_path / "querylog.json", *(entry(f"q{i}.example", T=ts) for i, ts in enumerate(stamps)))
    for hours, frozen in (("1", 20), ("48", 0)):
        store = str(tmp_path / f"import-{hours}.db")
        process = feed(tmp_path, "import-adguard", log, store=store, settings={"ANALYTICS_HOT_HOURS": hours})
        assert process.wait(timeout=60) == 0, process.log_path.read_text()
        assert questions_in(store) == [f"q{i}.example" for i in range(20)]
        assert frozen_in(store) == frozen
    wire = [
        {"endpointId": "lab", "clientId": "c1", "question": f"q{i}.example", "timestamp": ts}
        for i, ts in enumerate(stamps)
    ]
    for hours, frozen in ((1, 20), (48, 0)):
        store = str(tmp_path / f"live-{hours}.db")
        questions_in(store)  # the schema, as the live feed's own start makes it
        process = StoreProcess(store, "", 64 << 20, (None, None), hours, 300)
        try:
            assert not process.run(_validate_and_store, wire)
        finally:
            process.close()
        assert questions_in(store) == [f"q{i}.example" for i in range(20)]
        assert frozen_in(store) == frozen


def test_a_pushing_feed_killed_and_restarted_while_the_service_comes_and_goes_ends_exact(tmp_path, questions_in):
    service_db = str(tmp_path / "service.db")
    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": service_db, "ANALYTICS_API_KEY": API_KEY})
    path, spool = tmp_path / "querylog.json", str(tmp_path / "spool")
    args = ["import-adguard", str(path), "--follow", "--interval", "0.05", "--batch-size", "7"]
    args += ["--url", service.base, "--spool", spool]
    os.environ["ANALYTICS_FEED_KEY"] = API_KEY  # the key stays out of the process list
    rng = random.Random(7)
    written = 0

    def write(count):
        nonlocal written
        lines = [entry(f"q{written + i}.example", (written + i) % 60) for i in range(count)]
        write_log(path, *lines, mode="a")
        written += count

    try:
        write(30)
        process = feed(tmp_path, *args)
        for round_ in range(6):
            write(rng.randint(10, 60))
            time.sleep(rng.uniform(0.05, 0.4))
            if round_ == 2:
                service.kill_all()  # the service goes away: batches wait in the spool
                write(40)
                time.sleep(0.5)
            if round_ == 3:
                path.rename(str(path) + ".1")  # and AdGuard rotates its log meanwhile
                write(25)
                service.start()  # back, on the same address
            processes.stop(process, signal.SIGKILL, timeout=30, group=True)  # at whatever point it had reached
            process = feed(tmp_path, *args)

        def delivered():
            status, body = service.call("GET", f"/v2/statistic/count?{WHOLE}", headers=AUTH)
            return status == 200 and body["count"] >= written

        wait_for(delivered, timeout=60, what=f"{written} records at the service")
        assert processes.stop(process, timeout=30, group=True) == 0
        stored = questions_in(service_db)
        assert len(stored) == written, "nothing lost, nothing stored twice"
        assert sorted(stored) == sorted(f"q{i}.example" for i in range(written))
        assert not [name for _, _, names in os.walk(spool) for name in names if name[0].isdigit()], "spool drained"
    finally:
        os.environ.pop("ANALYTICS_FEED_KEY", None)
        service.stop()


def test_overlapping_runs_of_one_import_never_store_a_row_twice(tmp_path, questions_in):
    ftl = make_ftl_db(str(tmp_path / "pihole-FTL.db"))
    for i in range(400):
        add_row(ftl, i, T0 + i, f"q{i}.example")
    store = str(tmp_path / "store.db")
    questions_in(store)  # the schema exists before both start
    args = ["import-pihole", ftl, "--batch-size", "5", "--follow", "--interval", "0.05"]
    first, second = feed(tmp_path, *args, store="store.db"), feed(tmp_path, *args, store="store.db")
    try:
        for i in range(400, 600):
            add_row(ftl, i, T0 + i, f"q{i}.example")
            if i % 50 == 0:
                time.sleep(0.05)
        wait_for(lambda: len(questions_in(store)) >= 600, timeout=60, what="600 records")
        time.sleep(0.5)
    finally:
        codes = [processes.stop(first, timeout=30, group=True), processes.stop(second, timeout=30, group=True)]
    stored = questions_in(store)
    assert len(stored) == 600 and len(set(stored)) == 600
    for process, code in zip((first, second), codes, strict=True):
        text = process.log_path.read_text()
        assert code == 0 or "another run of this import moved its position" in text, text


@pytest.mark.parametrize("key", ["", "x" * 201, "a\tb"])
def test_a_bad_idempotency_key_is_refused(client, key):
    response = client.post("/v2/ingest", json=[], headers={**AUTH, "Idempotency-Key": key})
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json["error"]["message"]


def test_a_batch_sent_again_with_its_idempotency_key_is_stored_once(client, runner):
    batch = [{"endpointId": "e", "clientId": "c", "question": f"q{i}.example"} for i in range(3)]
    first = client.post("/v2/ingest", json=batch, headers={**AUTH, "Idempotency-Key": "spool-1"})
    again = client.post("/v2/ingest", json=batch, headers={**AUTH, "Idempotency-Key": "spool-1"})
    assert first.json == again.json == {"accepted": 3, "pastRetention": 0}
    assert again.headers["Idempotency-Replayed"] == "true" and "Idempotency-Replayed" not in first.headers
    other = client.post("/v2/ingest", json=batch, headers={**AUTH, "Idempotency-Key": "spool-2"})
    assert other.json["accepted"] == 3
    # Keys are per API key: another feed's "spool-1" is another batch.
    secret = runner.invoke(args=["keys", "create", "--name", "feeder", "--scope", "ingest"]).output.split()[-1]
    theirs = client.post("/v2/ingest", json=batch, headers={"Authorization": secret, "Idempotency-Key": "spool-1"})
    assert theirs.json["accepted"] == 3 and "Idempotency-Replayed" not in theirs.headers
    count = client.get(f"/v2/statistic/count?{WHOLE}", headers=AUTH).json["count"]
    assert count == 9


def test_files_pushed_to_a_service_resume_after_what_was_sent(runner, tmp_path, monkeypatch):
    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY})
    monkeypatch.setenv("ANALYTICS_FEED_KEY", API_KEY)
    path = tmp_path / "records.ndjson"
    lines = [{"endpointId": "files", "clientId": "c", "question": f"q{i}.example"} for i in range(25)]
    lines[3]["question"] = "not a domain"
    write_log(path, *lines)
    args = ["ingest", str(path), "--url", service.base, "--spool", str(tmp_path / "spool"), "--batch-size", "10"]
    try:
        first = runner.invoke(args=args)
        assert "Sent 24 records" in first.output and "1 rejected (question)" in first.output, first.output
        assert "Sent 0 records" in runner.invoke(args=args).output
        write_log(path, *[{**lines[0], "question": f"more{i}.example"} for i in range(5)], mode="a")
        assert "Sent 5 records" in runner.invoke(args=args).output
        status, body = service.call("GET", f"/v2/statistic/count?{WHOLE}", headers=AUTH)
        assert (status, body["count"]) == (200, 29)
    finally:
        service.stop()


def test_a_feed_pushing_to_a_service_opens_no_local_store(tmp_path):
    """On a resolver's machine there is no store: `--url` reads the source and spools, nothing else."""
    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY})
    path = tmp_path / "records.ndjson"
    write_log(path, *[{"endpointId": "remote", "clientId": "c", "question": f"q{i}.example"} for i in range(3)])
    spool = tmp_path / "spool"
    try:
        pusher = feed(
            tmp_path,
            "ingest",
            str(path),
            "--url",
            service.base,
            "--key",
            API_KEY,
            "--spool",
            str(spool),
            store="absent/never.db",
        )
        assert stop_after_exit(pusher) == 0, pusher.log_path.read_text()
        assert "Sent 3 records" in pusher.log_path.read_text()
        assert not (tmp_path / "absent").exists(), "no local database was opened"
        status, body = service.call("GET", f"/v2/statistic/count?{WHOLE}&endpointId[]=remote", headers=AUTH)
        assert (status, body["count"]) == (200, 3)
    finally:
        service.stop()


def stop_after_exit(process: subprocess.Popen, timeout: float = 60) -> int:
    return process.wait(timeout=timeout)


def test_a_batch_spooled_just_before_a_crash_is_sent_once_and_its_number_never_reused(tmp_path):
    from feeds.sinks import RemoteSink

    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY})
    spool = str(tmp_path / "spool")
    one = {"endpointId": "e", "clientId": "c", "question": "one.example"}

    def count():
        return service.call("GET", f"/v2/statistic/count?{WHOLE}", headers=AUTH)[1]["count"]

    try:
        with RemoteSink(service.base, API_KEY, spool, wait_seconds=1) as sink:
            sink.commit("src", [], [one], {"n": 1}, 0)
            wait_for(lambda: count() == 1, what="the first batch")
            folder = sink._folder("src")
            # Batch 2 written, the crash comes before its state: the sender must not send it yet.
            two = {"idempotencyKey": "x-2", "records": [{**one, "question": "two.example"}], "position": {"n": 2}}
            with open(os.path.join(folder, "000000000002.json"), "w") as handle:
                json.dump(two, handle)
            time.sleep(1.5)
            assert count() == 1
        with RemoteSink(service.base, API_KEY, spool) as sink:  # the restart
            assert sink.position("src") == {"n": 2}
            sink.commit("src", [], [{**one, "question": "three.example"}], {"n": 3}, 0)
        wait_for(lambda: count() == 3, what="batches two and three")
    finally:
        service.stop()


@pytest.mark.parametrize(
    "limit, records",
    [
        ({"ANALYTICS_MAX_BATCH": "4"}, 25),  # more records than the service takes at once
        ({"ANALYTICS_MAX_BODY_MB": "1"}, 30),  # a body over its size limit (~75 KB a record)
        ({"ANALYTICS_MAX_BODY_MB": "1"}, 200),  # so far over that the upload breaks off first
    ],
    ids=["records", "bytes", "upload-cut"],
)
def test_a_batch_too_large_for_the_service_is_sent_in_parts_once_each_in_order(tmp_path, limit, records):
    from feeds.sinks import RemoteSink

    env = {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY, **limit}
    service = Gunicorn(tmp_path, env)
    ips = [f"2001:db8:{a:x}::{b:x}" for a in range(64) for b in range(64)]
    answers = [{"ips": ips[i : i + 64]} for i in range(0, len(ips), 64)] if "ANALYTICS_MAX_BODY_MB" in limit else []
    wire = [
        {
            "endpointId": "e",
            "clientId": "c",
            "question": f"q{i}.example",
            "timestamp": f"2024-05-01T00:{i // 60:02d}:{i % 60:02d}Z",
        }
        | ({"answers": answers} if answers else {})
        for i in range(records)
    ]
    try:
        with RemoteSink(service.base, API_KEY, str(tmp_path / "spool"), wait_seconds=60) as sink:
            sink.commit("src", [], wire, {"n": 1}, 0)
        assert sink.pending() == 0
        body = service.call("GET", f"/v2/activity-log?{WHOLE}&sortOrder=asc&pageSize=500", headers=AUTH)[1]
        assert [q["question"] for q in body["queries"]] == [f"q{i}.example" for i in range(records)]
    finally:
        service.stop()


def test_a_batch_stored_before_its_answer_was_lost_is_not_split_and_stored_again(tmp_path):
    """The service stored the batch, the feed never heard so, and the service's batch limit
    was lowered since: the feed's 413 must not become two parts stored a second time."""
    from feeds.sinks import RemoteSink

    env = {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY}
    records = [{"endpointId": "e", "clientId": "c", "question": f"q{i}.example"} for i in range(25)]
    service = Gunicorn(tmp_path, env)
    assert service.call("POST", "/v2/ingest", records, headers={**AUTH, "Idempotency-Key": "s-1"})[0] == 200
    service.stop()
    service = Gunicorn(tmp_path, {**env, "ANALYTICS_MAX_BATCH": "4"})
    folder = spool_folder(tmp_path / "spool", "src", "s")
    (folder / "000000000001.json").write_text(json.dumps({"idempotencyKey": "s-1", "records": records, "position": {}}))
    try:
        with RemoteSink(service.base, API_KEY, str(tmp_path / "spool"), wait_seconds=10) as sink:
            pass
        assert sink.pending() == 0
        assert service.call("GET", f"/v2/statistic/count?{WHOLE}", headers=AUTH)[1]["count"] == 25
    finally:
        service.stop()


def spool_folder(spool, source: str, spool_id: str):
    """A spool folder as a feed leaves it, with its state counting one batch."""
    import hashlib

    folder = spool / hashlib.sha256(source.encode()).hexdigest()[:24]
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({"source": source, "spool": spool_id, "batch": 1, "position": {}}))
    return folder


def test_a_split_batch_resumed_after_a_crash_sends_each_part_once(tmp_path):
    """The crash came after the service stored a batch's first part and before the spool
    file said so: the restarted feed sends that part again, and its key makes it a replay."""
    from feeds.sinks import RemoteSink

    env = {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY}
    service = Gunicorn(tmp_path, env)
    records = [{"endpointId": "e", "clientId": "c", "question": f"q{i}.example"} for i in range(4)]
    parts = [{"idempotencyKey": "s-1.1", "records": records[:2]}, {"idempotencyKey": "s-1.2", "records": records[2:]}]
    folder = spool_folder(tmp_path / "spool", "src", "s")
    (folder / "000000000001.json").write_text(json.dumps({"parts": parts, "position": {}}))
    try:
        headers = {**AUTH, "Idempotency-Key": "s-1.1"}
        assert service.call("POST", "/v2/ingest", records[:2], headers=headers)[0] == 200
        with RemoteSink(service.base, API_KEY, str(tmp_path / "spool"), wait_seconds=10) as sink:
            pass
        assert sink.pending() == 0
        body = service.call("GET", f"/v2/activity-log?{WHOLE}&sortOrder=asc&pageSize=100", headers=AUTH)[1]
        assert sorted(q["question"] for q in body["queries"]) == [f"q{i}.example" for i in range(4)]
    finally:
        service.stop()


def test_after_a_batch_too_large_larger_ones_are_split_before_they_are_sent(tmp_path):
    from feeds.sinks import RemoteSink

    env = {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_MAX_BATCH": "4"}
    service = Gunicorn(tmp_path, env)
    records = [{"endpointId": "e", "clientId": "c", "question": f"q{i}.example"} for i in range(32)]
    try:
        with RemoteSink(service.base, API_KEY, str(tmp_path / "spool"), wait_seconds=30) as sink:
            sink.commit("src", [], records[:16], {"n": 1}, 0)
            sink.commit("src", [], records[16:], {"n": 2}, 0)
        assert service.call("GET", f"/v2/statistic/count?{WHOLE}", headers=AUTH)[1]["count"] == 32
        metrics = service.fetch("GET", "/metrics", headers=AUTH)[1].decode()
        refused = [line for line in metrics.splitlines() if line.startswith("dns_analytics_ingest_requests_total")]
        # 16 and then 8 records refused once each; every other part of 8 or more split unsent.
        assert [line.split()[-1] for line in refused if '"41302"' in line] == ["2.0"], refused
    finally:
        service.stop()
