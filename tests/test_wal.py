"""The SQLite write-ahead log stays bounded while ingest goes on and readers overlap without a
pause (real gunicorn). SQLite restarts its log only when no reader uses it; readers that take
turns never leave it such a moment, and the log grew by gigabytes."""

import os
import sqlite3
import threading
import time

import pytest

from helpers import API_KEY, AUTH, record
from servers import Gunicorn

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
