"""Nothing acknowledged is lost: ingestion through gunicorn while workers and the whole server
are killed with SIGKILL, and several writers, readers and deleters at once."""

import http.client
import os
import random
import signal
import threading
import time

import pytest

from support import stores
from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn

BATCH = 100


def batch_records(batch_id: str) -> list[dict]:
    return [record("crash", batch_id, question=f"{batch_id}-{i}.example") for i in range(BATCH)]


def stored_batches(database) -> dict[str, int]:
    if not stores.is_postgres(database):
        assert stores.scalar(database, "PRAGMA integrity_check") == "ok"
    return dict(
        stores.on_records(
            database,
            "SELECT c.client_id, COUNT(*) FROM {records} r JOIN client c ON c.id = r.client GROUP BY c.client_id",
        )
    )


# A second process opens the test's store: chDB lets one process open a folder (docs/testing.md, "Engines").
@pytest.mark.second_process
def test_sigkill_during_ingestion_loses_nothing_acknowledged(tmp_path, database):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    acknowledged, attempted = set(), set()
    lock = threading.Lock()
    stop = threading.Event()
    rng = random.Random(7)

    def feed(feeder: int):
        n = 0
        while not stop.is_set():
            batch_id = f"f{feeder}-b{n}"  # never retried: an unanswered batch may or may not be in
            n += 1
            with lock:
                attempted.add(batch_id)
            try:
                status, _ = server.call("POST", "/v2/ingest", batch_records(batch_id), AUTH, timeout=10)
            except (OSError, http.client.HTTPException):  # the worker died mid-answer
                time.sleep(0.05)
                continue
            if status == 200:
                with lock:
                    acknowledged.add(batch_id)

    feeders = [threading.Thread(target=feed, args=(i,)) for i in range(3)]
    for feeder in feeders:
        feeder.start()
    kills = {"worker": 0, "server": 0}
    try:
        for round_ in range(12):
            time.sleep(rng.uniform(0.15, 0.5))
            if round_ % 4 == 3:
                server.kill_all()
                kills["server"] += 1
                server.start()
            else:
                workers = server.worker_pids()
                if workers:
                    os.kill(rng.choice(workers), signal.SIGKILL)
                    kills["worker"] += 1
        # Enough traffic after the last kill to mean something, however slowly a loaded machine
        # brings the server back (each start looks at the database's version first).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.5)
            with lock:
                if len(acknowledged) > 20:
                    break
    finally:
        stop.set()
        for feeder in feeders:
            feeder.join()
        server.kill_all()

    batches = stored_batches(database)
    lost = [b for b in acknowledged if batches.get(b) != BATCH]
    partial = {b: n for b, n in batches.items() if n != BATCH}
    print(
        f"\nfaults: {kills['worker']} workers and {kills['server']} servers killed; {len(attempted)} batches sent, "
        f"{len(acknowledged)} acknowledged ({len(acknowledged) * BATCH} records), "
        f"{len(batches)} stored, {len(lost)} acknowledged batches lost, {len(partial)} partial"
    )
    assert len(acknowledged) > 20, "enough traffic got through to mean something"
    assert lost == []
    assert partial == {}
    assert set(batches) <= attempted


# A second process opens the test's store: chDB lets one process open a folder (docs/testing.md, "Engines").
@pytest.mark.second_process
def test_concurrent_writers_readers_and_deleters(tmp_path, database):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    stop = threading.Event()
    lock = threading.Lock()
    totals = {"ingested": 0, "deleted": 0, "calls": 0}
    problems = []
    window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"

    def check(status, body, what):
        with lock:
            totals["calls"] += 1
            if status != 200:
                problems.append((what, status, body))

    def writer(w):
        n = 0
        while not stop.is_set():
            clients = ["keep", f"doomed{n % 3}"]
            batch = [record("busy", clients[i % 2], question=f"w{w}-{n}-{i}.com") for i in range(200)]
            status, body = server.call("POST", "/v2/ingest", batch, AUTH)
            check(status, body, "ingest")
            if status == 200:
                with lock:
                    totals["ingested"] += body["accepted"]
            n += 1

    def reader():
        paths = [
            f"/v2/activity-log?{window}&pageSize=200",
            f"/v2/statistic/count/clientId?{window}",
            f"/v2/statistic/timeseries?{window}",
            "/v2/client",
            "/v2/data-availability",
        ]
        n = 0
        while not stop.is_set():
            check(*server.call("GET", paths[n % len(paths)], headers=AUTH), "read")
            n += 1

    def deleter():
        n = 0
        while not stop.is_set():
            status, body = server.call("DELETE", f"/v2/activity-log?clientId[]=doomed{n % 3}", headers=AUTH)
            check(status, body, "delete")
            if status == 200:
                with lock:
                    totals["deleted"] += body["deletedCount"]
            n += 1
            time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    threads += [threading.Thread(target=deleter)]
    for thread in threads:
        thread.start()
    time.sleep(6)
    stop.set()
    for thread in threads:
        thread.join()
    try:
        assert problems == []
        assert "locked" not in server.log_path.read_text()
        status, body = server.call("GET", f"/v2/statistic/count?{window}", headers=AUTH)
        assert body["count"] == totals["ingested"] - totals["deleted"]
        assert stores.records_scalar(database, "SELECT COUNT(*) FROM {records}") == body["count"]
        assert stores.records_scalar(database, "SELECT COUNT(DISTINCT question) FROM {records}") == body["count"]
        print(f"\nconcurrency: {totals['calls']} calls, {totals['ingested']} ingested, {totals['deleted']} deleted")
        assert totals["ingested"] > 0 and totals["deleted"] > 0
    finally:
        server.stop()
