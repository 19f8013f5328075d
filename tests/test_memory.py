"""A worker's memory stays under its ceiling (docs/configuration.md, "Memory per worker"): rejected hostile batches and
bursts of concurrent requests leave a real gunicorn worker bounded."""

import os
import threading

import pytest

import models.engine.database

from support.helpers import API_KEY, AUTH, ingest, record
from support.servers import Gunicorn

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def hostile_batch(number: int, size: int = 1000) -> list[dict]:
    """Records whose answers are large and all distinct, and a last record that is invalid,
    so nothing is stored and every answer set before it was validated."""
    records = [
        record(
            question="example.com",
            answers=[{"ips": ["192.0.2.1"], "geoip": {"city": f"{number}-{i}-" + "c" * 1000, "isp": "i" * 1000}}],
        )
        for i in range(size)
    ]
    return [*records, record(action=99)]


@pytest.fixture
def server(tmp_path):
    database = str(tmp_path / "memory.db")
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=1)
    server.database = database
    yield server
    server.stop()


def test_rejected_hostile_batches_do_not_grow_a_worker(server):
    (worker,) = server.worker_pids()
    assert server.call("POST", "/v2/ingest", hostile_batch(0), AUTH)[0] == 400
    before = rss_mb(worker)  # after one batch: its passing peak is not growth
    for number in range(1, 41):
        status, body = server.call("POST", "/v2/ingest", hostile_batch(number), AUTH)
        assert status == 400 and body["error"]["code"] == 40005
    grown = rss_mb(worker) - before
    print(f"worker RSS: {before:.0f} MB, then +{grown:.0f} MB after 40 hostile batches")
    assert grown < 150, f"the worker grew by {grown:.0f} MB"
    assert server.call("GET", f"/v2/activity-log?{WINDOW}", headers=AUTH)[1]["queries"] == []


@pytest.mark.sqlite_only
def test_a_burst_of_connections_leaves_few_idle_in_the_pool(app):
    """20 threads holding a connection at once (as 20 concurrent requests do), then none: the
    pool keeps only a few open, each with its page cache. (Counted in the pool itself: SQLite
    keeps a closed connection's file descriptor open while the process holds a lock on the
    file, so descriptors do not tell.)"""
    database = app.extensions["database"]
    together, done = threading.Barrier(20), []

    def request():
        with models.engine.database.connection():
            models.engine.database.db.execute_sql("SELECT COUNT(*) FROM record").fetchone()
            together.wait(timeout=10)
        done.append(True)

    threads = [threading.Thread(target=request) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(done) == 20 and len(database._in_use) == 0
    assert len(database._connections) <= 4


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@pytest.mark.sqlite_only
def test_batches_of_every_size_do_not_grow_the_process(client):
    """Batches of ever new sizes, each with thousands of statistics rows: the rows go many to a
    statement, and sqlite3 keeps a connection's last 128 statements prepared (2.5 MB for one
    of 1,310 records, the largest there were). Statements made for each number of rows kept one
    each; a few sizes of statement keep the process bounded."""

    def batch(number: int) -> list[dict]:
        size = 1_000 + 7 * number
        when = [f"2024-05-01T{i % 24:02d}:{i % 60:02d}:00Z" for i in range(size)]
        return [record(f"e{i % 3}", f"c{number}-{i}", when[i], f"n{i}.example") for i in range(size)]

    ingest(client, *batch(0))
    before = rss_mb(os.getpid())  # after one batch: its passing peak is not growth
    for number in range(1, 51):
        ingest(client, *batch(number))
    grown = rss_mb(os.getpid()) - before
    print(f"test process RSS: {before:.0f} MB, then +{grown:.0f} MB after 50 batches of new sizes")
    assert grown < 80, f"the process grew by {grown:.0f} MB"


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@pytest.mark.sqlite_only
def test_batches_of_ever_new_numbers_of_clients_do_not_grow_the_process(client):
    """A batch's client entries are written 500 a statement (18 values a client): statements
    made for each number of clients (0.8 MB prepared for 450) kept one each, as above."""

    def batch(number: int) -> list[dict]:
        return [record("e1", f"c{i}", "2024-05-01T10:00:00Z", "n.example") for i in range(400 + number)]

    ingest(client, *batch(0))
    before = rss_mb(os.getpid())
    for number in range(1, 100):
        ingest(client, *batch(number))
    grown = rss_mb(os.getpid()) - before
    print(f"test process RSS: {before:.0f} MB, then +{grown:.0f} MB after 99 batches of new numbers of clients")
    assert grown < 30, f"the process grew by {grown:.0f} MB"
