"""The dnstap collector as the tests run it (a process of its own, as an operator starts it),
and what they read back: the stored records, and the losses /metrics counts."""

import contextlib
import os
import pathlib
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from support import processes, servers, stores
from support.helpers import AUTH
from support.servers import ROOT

BIN = os.path.dirname(sys.executable)
FLASK = [os.path.join(BIN, "flask"), "--app", "wsgi"]  # the web app's alias of the feed commands
FEED = [os.path.join(BIN, "dns-analytics-feed")]  # the feeds' own program, as docs/feeding.md runs it


class Collector:
    """`flask --app wsgi collect-dnstap ...` (or `program collect-dnstap ...`) as an operator
    runs it, in a process of its own."""

    def __init__(self, folder, database, *options, program=FLASK, endpoint="lab"):
        servers.refuse_in_fast_lane("the dnstap collector")
        # A log of its own: the tests read what this collector said, not another's in the folder.
        self.log_path = next(path for n in range(100) if not (path := folder / f"collector{n or ''}.log").exists())
        self.log = open(self.log_path, "ab")
        env = {**os.environ, "ANALYTICS_DATABASE": database, "ANALYTICS_RETENTION_DAYS": "0"}
        command = [*program, "collect-dnstap", "--endpoint", endpoint, *options]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        listeners = sum(option in ("--socket", "--listen") for option in options)
        if not processes.started(self.process, lambda: self.output().count("Listening on") >= listeners, 30):
            assert self.process.poll() is None, f"the collector exited:\n{self.output()}"
            raise AssertionError(f"the collector did not start:\n{self.output()}")

    def wait_connected(self, count: int = 1):
        """Until `count` resolver connections were opened: Unbound connects just after it starts."""
        deadline = time.monotonic() + 15
        while self.output().count("A resolver connected") < count:
            assert time.monotonic() < deadline, f"no resolver connected:\n{self.output()}"
            time.sleep(0.05)

    def output(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        """SIGTERM, as systemd stops it; its exit status."""
        status = processes.stop(self.process, timeout=40)
        self.log.close()
        return status


def stored(api) -> list[dict]:
    """Every record in the log, oldest first, page by page."""
    records = []
    for page in range(100):
        response = api.get(
            f"/v2/activity-log?startTime=2000-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z&pageSize=500"
            f"&sortOrder=asc&page={page}",
            headers=AUTH,
        )
        assert response.status_code == 200, response.json
        records += response.json["queries"]
        if len(response.json["queries"]) < 500:
            return records
    raise AssertionError("more records than expected")


def wait_for(api, count: int, timeout: float = 10.0) -> list[dict]:
    """The stored records once there are `count` of them, and still `count` a moment later
    (no record comes twice)."""
    deadline = time.monotonic() + timeout
    records = stored(api)
    while len(records) < count and time.monotonic() < deadline:
        time.sleep(0.1)
        records = stored(api)
    assert len(records) == count, records
    time.sleep(1.5)  # longer than a batch's delay and Unbound's own buffering
    again = stored(api)
    assert len(again) == count, again
    return again


def lost_records(api) -> dict:
    """dns_analytics_feed_lost_records_total from /metrics: {(endpoint, place): count}."""
    response = api.get("/metrics", headers=AUTH)
    assert response.status_code == 200
    return parse_lost(response.get_data(as_text=True))


def parse_lost(exposition: str) -> dict:
    found = {}
    for line in exposition.splitlines():
        if line.startswith("dns_analytics_feed_lost_records_total{"):
            labels, value = line[len("dns_analytics_feed_lost_records_total{") :].split("} ")
            pairs = dict(part.split("=", 1) for part in labels.split(","))
            found[pairs["endpoint"].strip('"'), pairs["place"].strip('"')] = float(value)
    return found


def api_client(make_app, database):
    """A Flask test client on the database the collector writes (`make_app`: the test's fixture)."""
    client = make_app(ANALYTICS_DATABASE=database).test_client()
    client.database = database
    return client


@contextlib.contextmanager
def short_folder(prefix: str):
    """A folder of its own with a short path: a Unix socket's path is limited to 107 bytes.
    Readable by all, so that a resolver dropping its privileges reads its configuration."""
    path = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def holding(path) -> list[int]:
    """The processes other than this one with `path` (a SQLite file) or its log open."""
    names = {os.path.realpath(path), os.path.realpath(path) + "-wal"}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in names for fd in os.listdir(f"/proc/{entry}/fd")):
                found.append(int(entry))
    return found


@contextlib.contextmanager
def store_locked(database: str):
    """The record table locked against writers, whichever the engine: a batch being stored
    waits inside its transaction until the block ends (SQLite's busy timeout is 30 s)."""
    if not stores.is_postgres(database):
        lock = sqlite3.connect(database, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        return
    import psycopg

    with psycopg.connect(database) as lock:
        lock.execute("LOCK TABLE record IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            lock.rollback()


def waits_on_the_lock(database: str, pid: int) -> bool:
    """Whether the process `pid` is inside a batch that store_locked holds up: on SQLite it has
    the file open (a connection is opened only for a batch), on PostgreSQL a backend waits."""
    if not stores.is_postgres(database):
        return pid in holding(database)
    # This test's database alone (the cluster serves every test at once, and another test's
    # backend waiting on a lock made the batch seem held before it had reached the store), and
    # the batch's own statement: an autovacuum worker waits on the table's lock too.
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() "
        "AND backend_type = 'client backend' AND query LIKE 'INSERT INTO record %'"
    )
    return stores.scalar(database, waiting) > 0


def store_process(collector: int) -> int | None:
    """The pid of the collector's store process (feeds.sinks.StoreProcess), once it runs."""
    for pid in servers.children(collector):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"spawn_main" in cmdline.read():
                return pid
    return None
