"""flask collect-dnstap fed by a real Unbound: queries sent with dnspython over UDP and TCP
arrive in the store, each exactly once, with the right fields, read back through the API."""

import collections
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import dns.rcode
import pytest
import unbound
from unbound import Unbound

from app import create_app
from schemas.datetimes import parse_datetime

from helpers import API_KEY, AUTH
from servers import ROOT, free_port

FLASK = os.path.join(os.path.dirname(sys.executable), "flask")
# What the operator declares a block to look like, and who 127.0.0.2 is.
BLOCKS = ("--blocked-answer", "0.0.0.0", "--blocked-answer", "::", "--blocked-zone", "ads.test")
CLIENT_MAP = "127.0.0.2 kitchen-tablet   # a named client\n"


@pytest.fixture(autouse=True)
def _needs_unbound():
    if unbound.UNAVAILABLE:
        pytest.skip(unbound.banner())


@pytest.fixture
def folder():
    """A short folder of its own: a Unix socket's path is limited to 107 bytes."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="dnstap-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def api(tmp_path):
    """A Flask test client on the database the collector writes."""
    database = str(tmp_path / "analytics.db")
    app = create_app(
        {
            "TESTING": True,
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "ANALYTICS_DATABASE": database,
            "ANALYTICS_API_KEY": API_KEY,
        }
    )
    client = app.test_client()
    client.database = database
    return client


class Collector:
    """`flask --app wsgi collect-dnstap ...` as an operator runs it, in a process of its own."""

    def __init__(self, folder, database, *options):
        self.log_path = folder / "collector.log"
        self.log = open(self.log_path, "ab")
        env = {**os.environ, "ANALYTICS_DATABASE": database, "ANALYTICS_RETENTION_DAYS": "0"}
        command = [FLASK, "--app", "wsgi", "collect-dnstap", "--endpoint", "lab", *options]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        listeners = sum(option in ("--socket", "--listen") for option in options)
        deadline = time.monotonic() + 30
        while self.output().count("Listening on") < listeners:
            assert self.process.poll() is None, f"the collector exited:\n{self.output()}"
            assert time.monotonic() < deadline, f"the collector did not start:\n{self.output()}"
            time.sleep(0.05)

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
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


@pytest.fixture
def start_collector(folder, api):
    started = []

    def start(*options):
        collector = Collector(folder, api.database, *options)
        started.append(collector)
        return collector

    yield start
    for collector in started:
        collector.stop()


@pytest.fixture
def resolvers(folder):
    started = []

    def start(**options):
        server = Unbound(folder, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def stored(api) -> list[dict]:
    response = api.get("/v2/activity-log?startTime=2000-01-01T00:00:00Z&pageSize=500&sortOrder=asc", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["queries"]


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


# (name, type, over TCP, from, expected: rcode, answer IPs, action, trigger, triggerValue)
QUERIES = [
    ("a.home.test", "A", False, "127.0.0.1", "NOERROR", ["192.0.2.1", "192.0.2.2"], 1, "default", ""),
    ("b.home.test", "AAAA", False, "127.0.0.1", "NOERROR", ["2001:db8::1"], 1, "default", ""),
    ("c.home.test", "TXT", True, "127.0.0.1", "NOERROR", [], 1, "default", ""),
    ("missing.home.test", "A", True, "127.0.0.2", "NXDOMAIN", [], 1, "default", ""),
    ("blocked.test", "A", False, "127.0.0.2", "NOERROR", ["0.0.0.0"], 0, "filter", "answer:0.0.0.0"),
    ("www.blocked.test", "AAAA", True, "127.0.0.1", "NOERROR", ["::"], 0, "filter", "answer:::"),
    ("tracker.ads.test", "A", False, "127.0.0.1", "NXDOMAIN", [], 0, "filter", "zone:ads.test"),
    ("elsewhere.example", "A", False, "127.0.0.1", "REFUSED", [], -1, "default", ""),
]


def ask_all(resolver, queries=QUERIES) -> float:
    """Send every query; the time just before, in epoch milliseconds."""
    before = time.time() * 1000
    for name, rdtype, tcp, source, rcode, *_ in queries:
        answer = resolver.ask(name, rdtype, tcp=tcp, source=source)
        assert answer.rcode() == dns.rcode.from_text(rcode), (name, answer)
    return before


def check(records, queries=QUERIES, times=1):
    """Every query stored `times` times, with the fields the resolver's answer gives."""
    by_query = collections.defaultdict(list)
    for record in records:
        by_query[record["question"], record["rrType"]].append(record)
    assert sorted(by_query) == sorted((q[0], q[1]) for q in queries)
    for name, rdtype, _, source, rcode, ips, action, trigger, value in queries:
        found = by_query[name, rdtype]
        assert len(found) == times, (name, found)
        for record in found:
            assert record["endpointId"] == "lab"
            assert record["sourceIp"] == source
            assert record["clientId"] == ("kitchen-tablet" if source == "127.0.0.2" else source)
            assert record["protocol"] == "legacy"
            assert record["statusCode"] == rcode
            assert sorted(ip for answer in record["answers"] for ip in answer["ips"]) == sorted(ips)
            assert (record["action"], record["trigger"], record["triggerValue"]) == (action, trigger, value)
            # Unbound's responses carry no query time: it comes from the logged client query.
            assert isinstance(record["responseTimeMs"], float) and 0 <= record["responseTimeMs"] < 1000
            assert record["cached"] is None and record["upstream"] == "" and record["dnssec"] == ""


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_every_answered_query_arrives_once_with_its_fields(transport, folder, api, start_collector, resolvers):
    client_map = folder / "clients.txt"
    client_map.write_text(CLIENT_MAP)
    if transport == "unix":
        socket_path = folder / "dnstap.sock"
        collector = start_collector("--socket", str(socket_path), "--client-map", str(client_map), *BLOCKS)
        resolver = resolvers(socket_path=socket_path)
    else:
        port = free_port()
        collector = start_collector("--listen", f"127.0.0.1:{port}", "--client-map", str(client_map), *BLOCKS)
        resolver = resolvers(tcp=("127.0.0.1", port))
    collector.wait_connected()
    before = ask_all(resolver)
    after = time.time() * 1000
    records = wait_for(api, len(QUERIES))
    check(records)
    for record in records:
        assert before - 1000 <= parse_datetime(record["timestamp"]) <= after + 1000
    # Client entries: the mapped name and the address, each with its address as metadata.
    clients = api.get("/v2/client", headers=AUTH).json["items"]["lab"]["clients"]
    assert set(clients) == {"127.0.0.1", "kitchen-tablet"}


def test_the_collector_survives_unbound_restarting(folder, api, start_collector, resolvers):
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path), *BLOCKS)
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:3])
    wait_for(api, 3)
    resolver.stop()
    resolver.start()
    collector.wait_connected(2)
    ask_all(resolver, QUERIES[:3])
    check(wait_for(api, 6), QUERIES[:3], times=2)


def test_a_stop_stores_the_open_batch(folder, api, start_collector, resolvers):
    """SIGTERM delivers what waits for its batch to fill, and the collector exits cleanly."""
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path), "--batch-size", "1000", "--batch-delay", "60")
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:2])
    time.sleep(3)  # Unbound has sent them; the batch waits for 60 s or 1,000 records
    assert stored(api) == []
    assert collector.stop() == 0
    assert len(stored(api)) == 2
    assert "2 records delivered" in collector.output()
    assert not socket_path.exists()


def test_without_query_messages_the_response_time_is_unknown(folder, api, start_collector, resolvers):
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path))
    resolver = resolvers(socket_path=socket_path, log_queries=False)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:1])
    (record,) = wait_for(api, 1)
    assert record["responseTimeMs"] is None
    assert record["action"] == 1
