"""BIND 9, Knot Resolver and dnsdist, Debian's, each configured with docs/feeding.md's own lines,
feed `dns-analytics-feed collect-dnstap` (the docs' command): every answered query arrives once,
with its fields and its response time. (Unbound: tests/test_dnstap.py.)"""

import collections

import dns.rcode
import pytest

from support.collecting import FEED, Collector, api_client, short_folder, wait_for
from support.resolvers import Bind, Dnsdist, Knot

# What is tested is the resolvers' dnstap and the collector: the store's engine adds nothing
# test_dnstap.py does not cover on both.
pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def folder():
    with short_folder("resolver-") as path:
        yield path


@pytest.fixture
def api(make_app, database):
    return api_client(make_app, database)


@pytest.fixture
def feeding(folder, api):
    """Start the collector on a socket (first: Knot Resolver connects only when it starts),
    then the resolver `kind` sending to it; both stopped at the end."""
    started = []

    def start(kind):
        socket_path = folder / "dnstap.sock"
        collector = Collector(folder, api.database, "--socket", str(socket_path), program=FEED, endpoint="lab")
        started.append(collector)
        resolver = kind(folder, socket_path)
        started.append(resolver)
        return collector, resolver

    yield start
    for process in reversed(started):
        process.stop()


def check(records, expected):
    """`expected`: (name, type, rcode, answer addresses), each stored exactly once, timed."""
    by_query = collections.Counter((r["question"], r["rrType"]) for r in records)
    assert sorted(by_query) == sorted((name, rdtype) for name, rdtype, *_ in expected), records
    assert set(by_query.values()) == {1}, by_query
    found = {(r["question"], r["rrType"]): r for r in records}
    for name, rdtype, rcode, ips in expected:
        record = found[name, rdtype]
        assert record["endpointId"] == "lab"
        assert record["statusCode"] == rcode, record
        assert sorted(ip for answer in record["answers"] for ip in answer["ips"]) == sorted(ips), record
        assert (record["clientId"], record["sourceIp"]) == ("127.0.0.1", "127.0.0.1")
        assert isinstance(record["responseTimeMs"], float) and 0 <= record["responseTimeMs"] < 2000, record


def test_bind(feeding, api):
    """Including a query without recursion-desired and answers from the zone BIND serves,
    which BIND logs as AUTH_QUERY / AUTH_RESPONSE."""
    collector, bind = feeding(Bind)
    asked = [
        ("a.home.example", "A", "NOERROR", ["192.0.2.1", "192.0.2.2"], {}),
        ("b.home.example", "AAAA", "NOERROR", ["2001:db8::1"], {"tcp": True}),
        ("missing.home.example", "A", "NXDOMAIN", [], {}),
        ("ns.home.example", "A", "NOERROR", ["127.0.0.1"], {"recursion": False}),
        ("elsewhere.example", "A", "REFUSED", [], {}),
    ]
    for name, rdtype, rcode, _, how in asked:
        assert bind.ask(name, rdtype, **how).rcode() == dns.rcode.from_text(rcode)
    check(wait_for(api, len(asked), timeout=20), [entry[:4] for entry in asked])
    assert collector.stop() == 0


def test_knot_resolver(feeding, api):
    collector, knot = feeding(Knot)
    asked = [
        ("a.home.example", "A", "NOERROR", ["192.0.2.1", "192.0.2.2"], {}),
        ("b.home.example", "AAAA", "NOERROR", ["2001:db8::1"], {"tcp": True}),
        ("tracker.ads.example", "A", "NXDOMAIN", [], {}),
    ]
    for name, rdtype, rcode, _, how in asked:
        assert knot.ask(name, rdtype, **how).rcode() == dns.rcode.from_text(rcode)
    check(wait_for(api, len(asked), timeout=20), [entry[:4] for entry in asked])
    assert collector.stop() == 0


def test_dnsdist(feeding, api):
    """Answers from its backend, from its packet cache, and its own (a spoofed answer)."""
    collector, dnsdist = feeding(Dnsdist)
    asked = [
        ("a.home.example", "A", "NOERROR", ["192.0.2.1", "192.0.2.2"], {}),
        ("b.home.example", "AAAA", "NOERROR", ["2001:db8::1"], {"tcp": True}),
        ("missing.home.example", "A", "NXDOMAIN", [], {}),
        ("self.home.example", "A", "NOERROR", ["192.0.2.9"], {}),
    ]
    for name, rdtype, rcode, _, how in asked:
        assert dnsdist.ask(name, rdtype, **how).rcode() == dns.rcode.from_text(rcode)
    check(wait_for(api, len(asked), timeout=20), [entry[:4] for entry in asked])
    # The same question again: answered from dnsdist's cache, and recorded as well.
    assert dnsdist.ask("a.home.example", "A").rcode() == 0
    records = wait_for(api, len(asked) + 1, timeout=20)
    assert sum(r["question"] == "a.home.example" for r in records) == 2
    assert collector.stop() == 0
