"""The SQLite write-ahead log stays bounded while ingest goes on and readers overlap without a
pause (real gunicorn). SQLite restarts its log only when no reader uses it; readers that take
turns never leave it such a moment, and the log grew by gigabytes."""

import multiprocessing
import os
import sqlite3
import threading
import time

import pytest

from support import stores
from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn

LIMIT_MB = 16  # a small limit, so that a few seconds of ingest would pass it several times over


def batch(number: int) -> list[dict]:
    return [
        record("home", f"c{i % 40}", f"2024-05-01T{i % 24:02d}:{i % 60:02d}:00Z", f"n{number}-{i}.example.com")
        for i in range(4000)
    ]


@pytest.mark.sqlite_only
def test_the_log_stays_bounded_under_overlapping_reads(tmp_path):
    path = str(tmp_path / "wal.db")
    server = Gunicorn(
        tmp_path, {"ANALYTICS_DATABASE": path, "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_WAL_LIMIT_MB": str(LIMIT_MB)}
    )
    stop = threading.Event()
    sizes = []

    def reader(offset: float):
        # A statistic that takes 0.4 s holds its snapshot that long; three of them, staggered,
        # always leave one reading.
        time.sleep(offset)
        with sqlite3.connect(path, timeout=30, isolation_level=None) as conn:
            while not stop.is_set():
                conn.execute("BEGIN")
                conn.execute("SELECT COUNT(*) FROM record").fetchone()
                time.sleep(0.4)
                conn.execute("COMMIT")

    def watch():
        while not stop.is_set():
            try:
                sizes.append(os.path.getsize(path + "-wal"))
            except OSError:
                pass
            time.sleep(0.05)

    threads = [threading.Thread(target=reader, args=(i * 0.13,)) for i in range(3)]
    threads.append(threading.Thread(target=watch))
    try:
        assert server.call("POST", "/v2/ingest", batch(0), AUTH)[0] == 200
        for thread in threads:
            thread.start()
        stored, began = 1, time.monotonic()
        while time.monotonic() - began < 20:
            status, body = server.call("POST", "/v2/ingest", batch(stored), AUTH)
            assert status == 200, body
            stored += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        server.stop()
    assert stored >= 10, "ingest went on"
    # Checked after commits at most once a second: the log may pass the limit by a second of
    # ingest before it is restarted.
    assert max(sizes) < 2 * LIMIT_MB << 20, f"the log reached {max(sizes) / 2**20:.0f} MiB"
    # Once restarted, the log is small again: a log left at a quarter of the limit or more would
    # have every write after it wait for readers.
    quarter = LIMIT_MB << 18
    passed = next(i for i, size in enumerate(sizes) if size >= quarter)
    assert min(sizes[passed:]) < quarter, "the log stayed past a quarter of its limit"


def _ingest_while_the_file_cannot_grow(make_app, database, results):
    """Ingest until an answer is not 200, the database file unable to grow past its size (a
    full disk): the log reuses its own space, but a checkpoint must extend the file. Puts
    (records acknowledged, the answers' statuses) on `results`."""
    import resource
    import signal

    import models.engine.database

    app = make_app(ANALYTICS_DATABASE=database, ANALYTICS_WAL_LIMIT_MB=1)
    client = app.test_client()

    def batch(number):
        return [record("home", f"c{i % 40}", question=f"n{number}-{i}.example.com") for i in range(500)]

    acknowledged, statuses = 0, []
    for number in range(30):
        if number == 6:  # the file as large as it will be: from now on its size is the limit
            with models.engine.database.connection():
                models.engine.database.query("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(database) + 8192, resource.RLIM_INFINITY))
        statuses.append(client.post("/v2/ingest", json=batch(number), headers=AUTH).status_code)
        if statuses[-1] != 200:
            break
        acknowledged += 500
    results.put((acknowledged, statuses))


@pytest.mark.sqlite_only
def test_a_batch_is_answered_as_stored_when_bounding_the_log_after_it_fails(make_app, tmp_path):
    # Bounding the log runs after the commit: its failure must not turn a stored batch into an
    # error (a sender would send it again, and it would be stored twice).
    database = str(tmp_path / "full.db")
    forked = multiprocessing.get_context("fork")
    results = forked.Queue()
    process = forked.Process(target=_ingest_while_the_file_cannot_grow, args=(make_app, database, results))
    process.start()
    acknowledged, statuses = results.get(timeout=120)
    process.join(30)
    stored = stores.records_scalar(database, "SELECT COUNT(*) FROM {records}")
    assert stored == acknowledged, f"{stored} records stored, {acknowledged} acknowledged (answers {statuses})"
