"""flask collect-dnstap fed by a real Unbound: queries sent with dnspython over UDP and TCP
arrive in the store, each exactly once, with the right fields, read back through the API."""

import collections
import ipaddress
import json
import os
import re
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import dnstap_pb
import fstrm
import pytest

from feeds.sinks import LiveSink, LocalSink, StoreProcess
from schemas.datetimes import parse_datetime

from support import helpers, processes, stores, unbound
from support.collecting import (
    FEED,
    Collector,
    api_client,
    holding,
    lost_records,
    parse_lost,
    short_folder,
    store_locked,
    store_process,
    stored,
    wait_for,
    waits_on_the_lock,
)
from support.geoip_files import write_asn, write_city
from support.helpers import API_KEY, AUTH
from support.servers import ROOT, alive, children, free_port
from support.unbound import Unbound

# What the operator declares a block to look like, and who 127.0.0.2 is.
BLOCKS = ("--blocked-answer", "0.0.0.0", "--blocked-answer", "::", "--blocked-zone", "ads.test")
CLIENT_MAP = "127.0.0.2 kitchen-tablet   # a named client\n"

# A second process opens the test's store: chDB lets one process open a folder (docs/testing.md, "Engines").
pytestmark = pytest.mark.second_process


@pytest.fixture
def folder():
    with short_folder("dnstap-") as path:
        yield path


@pytest.fixture
def api(make_app, database):
    """A Flask test client on the database the collector writes (SQLite, then PostgreSQL)."""
    return api_client(make_app, database)


@pytest.fixture
def start_collector(folder, api):
    started = []

    def start(*options, **how):
        collector = Collector(folder, api.database, *options, **how)
        started.append(collector)
        return collector

    yield start
    for collector in started:
        collector.stop()


@pytest.fixture
def resolvers(folder):
    if unbound.UNAVAILABLE:
        pytest.skip(unbound.banner())
    started = []

    def start(**options):
        if options.get("socket_path"):
            unbound.let_connect(options["socket_path"])
        server = Unbound(folder, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


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
    collector = start_collector(
        "--socket", str(socket_path), "--batch-size", "1000", "--batch-delay", "60", "--batch-idle", "60"
    )
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:2])
    # Unbound sends within about a second (stopping it would not help: it drops what it holds).
    time.sleep(4)
    assert stored(api) == []  # the batch waits for 60 s of quiet, 60 s, or 1,000 records
    assert collector.stop() == 0
    assert len(stored(api)) == 2
    assert "2 records delivered" in collector.output()
    assert not socket_path.exists()


def test_a_pause_in_the_stream_delivers_the_open_batch(folder, api, start_collector, resolvers):
    """A batch that has not filled goes once the resolver pauses, long before --batch-delay: a
    lone query reaches the log without waiting for others."""
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path), "--batch-size", "1000", "--batch-delay", "60")
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:2])
    check(wait_for(api, 2, timeout=30), QUERIES[:2])


def test_without_query_messages_the_response_time_is_unknown(folder, api, start_collector, resolvers):
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path))
    resolver = resolvers(socket_path=socket_path, log_queries=False)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:1])
    (record,) = wait_for(api, 1)
    assert record["responseTimeMs"] is None
    assert record["action"] == 1
    assert "Storing batches of up to 500 records (--batch-size), 5000 when" in collector.output()


# Through the same process, messages written here the way the dnstap protobuf and Frame Streams
# define them, for what Unbound on loopback does not send: other transports, DNSSEC, EDE, a
# query time inside the response message, networks in the client map, broken senders.
RESPONSE_AT = 1_714_564_800  # 2024-05-01T12:00:00Z


def unanswered_queries(api) -> dict:
    """dns_analytics_feed_unanswered_queries_total from /metrics: {endpoint: count}."""
    scraped = helpers.samples(api.get("/metrics", headers=AUTH).get_data(as_text=True))
    return {
        dict(labels)["endpoint"]: value
        for (name, labels), value in scraped.items()
        if name == "dns_analytics_feed_unanswered_queries_total"
    }


def send_and_stop(port: int, frames: list[bytes]) -> None:
    """A unidirectional sender's whole stream to 127.0.0.1:`port`: START, the frames, STOP, as a
    sender that expects no answer writes them."""
    codec = fstrm.FstrmCodec()
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap"))
        sender.sendall(b"".join(codec.encode_data(frame) for frame in frames))
        sender.sendall(codec.encode(fstrm.FSTRM_CONTROL_STOP))


def dnstap_response(name, *, protocol, client="192.0.2.7", rcode="NOERROR", ips=(), ad=False, ede=None, query_ns=None):
    query = dns.message.make_query(name, "A", want_dnssec=True)
    response = dns.message.make_response(query)
    response.set_rcode(dns.rcode.from_text(rcode))
    if ad:
        response.flags |= dns.flags.AD
    if ips:
        response.answer.append(dns.rrset.from_text(name + ".", 300, "IN", "A", *ips))
    if ede is not None:
        response.use_edns(0, options=[dns.edns.EDEOption(ede)])
    message = dnstap_pb.Message(
        type=dnstap_pb.Message.CLIENT_RESPONSE,
        socket_family=dnstap_pb.INET,
        socket_protocol=protocol,
        query_address=ipaddress.ip_address(client).packed,
        query_port=40000,
        response_time_sec=RESPONSE_AT,
        response_time_nsec=250_000_000,
        response_message=response.to_wire(),
    )
    if query_ns is not None:
        message.query_time_sec, message.query_time_nsec = divmod(query_ns, 1_000_000_000)
    return dnstap_pb.Dnstap(type=dnstap_pb.Dnstap.MESSAGE, message=message).SerializeToString()


def dnstap_exchange(name, kinds, *, sent_ns, client="192.0.2.7", answered=True):
    """A query's dnstap message and, if `answered`, its response's (with no query time, as
    Unbound and BIND write them), of the message kinds `kinds` (query kind, response kind)."""
    query = dns.message.make_query(name, "A")
    common = {
        "socket_family": dnstap_pb.INET,
        "socket_protocol": dnstap_pb.UDP,
        "query_address": ipaddress.ip_address(client).packed,
        "query_port": 40001,
    }
    seconds, nanoseconds = divmod(sent_ns, 1_000_000_000)
    asked = dnstap_pb.Message(
        type=kinds[0], query_time_sec=seconds, query_time_nsec=nanoseconds, query_message=query.to_wire(), **common
    )
    payloads = [asked]
    if answered:
        seconds, nanoseconds = divmod(sent_ns + 2_000_000, 1_000_000_000)  # answered 2 ms later
        response = dns.message.make_response(query).to_wire()
        payloads.append(
            dnstap_pb.Message(
                type=kinds[1],
                response_time_sec=seconds,
                response_time_nsec=nanoseconds,
                response_message=response,
                **common,
            )
        )
    return [dnstap_pb.Dnstap(type=dnstap_pb.Dnstap.MESSAGE, message=m).SerializeToString() for m in payloads]


def test_answers_from_served_zones_count_and_unanswered_queries_are_counted_apart(folder, api, start_collector):
    """BIND logs a query without recursion-desired as AUTH_QUERY and an answer from a zone it
    serves as AUTH_RESPONSE: both are a client's exchange, stored and timed like the CLIENT
    kinds (the resolver's own RESOLVER_* traffic is not). A logged query whose response never
    comes within 30 s, while the stream shows no dropped message, was never answered: counted
    apart from the losses, in /metrics and in the log, and no LOST."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}")
    M = dnstap_pb.Message
    start = RESPONSE_AT * 1_000_000_000
    frames = [
        *dnstap_exchange("zone.example", (M.AUTH_QUERY, M.AUTH_RESPONSE), sent_ns=start),
        *dnstap_exchange("mixed.example", (M.CLIENT_QUERY, M.AUTH_RESPONSE), sent_ns=start),
        *dnstap_exchange("plain.example", (M.CLIENT_QUERY, M.CLIENT_RESPONSE), sent_ns=start),
        *dnstap_exchange("upstream.example", (M.RESOLVER_QUERY, M.RESOLVER_RESPONSE), sent_ns=start),
        *(dnstap_exchange(f"lost{i}.example", (M.CLIENT_QUERY,), sent_ns=start, answered=False)[0] for i in range(3)),
        # 31 s later: the three unanswered queries are forgotten, and counted.
        *dnstap_exchange("later.example", (M.CLIENT_QUERY, M.CLIENT_RESPONSE), sent_ns=start + 31_000_000_000),
    ]
    send_and_stop(port, frames)
    records = {record["question"]: record for record in wait_for(api, 4)}
    assert sorted(records) == ["later.example", "mixed.example", "plain.example", "zone.example"]
    assert {record["responseTimeMs"] for record in records.values()} == {2.0}
    assert collector.stop() == 0
    assert "3 queries never answered in the stream" in collector.output()
    assert re.search(r"UNANSWERED 3 queries in \d+ s .*3 since this run started", collector.output())
    assert "LOST" not in collector.output()
    assert lost_records(api) == {}
    assert unanswered_queries(api) == {"lab": 3.0}


def test_queries_unanswered_while_the_resolver_drops_messages_are_lost(folder, api, start_collector):
    """A resolver whose dnstap buffer is full drops queries and responses alike: a response
    whose logged query never came shows it, and the queries left without a response meanwhile
    are counted lost at the resolver, not unanswered."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}")
    M = dnstap_pb.Message
    start = RESPONSE_AT * 1_000_000_000
    frames = [
        *dnstap_exchange("plain.example", (M.CLIENT_QUERY, M.CLIENT_RESPONSE), sent_ns=start),
        *(dnstap_exchange(f"gone{i}.example", (M.CLIENT_QUERY,), sent_ns=start, answered=False)[0] for i in range(3)),
        # Its query message was dropped: answered 250 ms after the three above were asked.
        dnstap_response("orphan.example", protocol=dnstap_pb.UDP),
        *dnstap_exchange("later.example", (M.CLIENT_QUERY, M.CLIENT_RESPONSE), sent_ns=start + 31_000_000_000),
    ]
    send_and_stop(port, frames)
    assert sorted(record["question"] for record in wait_for(api, 3)) == [
        "later.example",
        "orphan.example",
        "plain.example",
    ]
    assert collector.stop() == 0
    assert "3 responses the resolver dropped" in collector.output()
    assert re.search(r"LOST 3 records in \d+ s .* at resolver", collector.output())
    assert "UNANSWERED" not in collector.output() and "never answered" not in collector.output()
    assert lost_records(api) == {("lab", "resolver"): 3.0}
    assert unanswered_queries(api) == {}


def test_a_query_unbound_never_answers_is_unanswered_not_lost(folder, api, start_collector, resolvers, monkeypatch):
    """A real Unbound that sends no answer (a deny zone here; a name it must recurse for on a
    machine without upstream does the same): its logged query is counted unanswered once
    --answer-within has passed, and nothing is LOST; the answered queries around it pair up."""
    monkeypatch.setattr(unbound, "ZONES", unbound.ZONES + '    local-zone: "silent.test." deny\n')
    socket_path = folder / "dnstap.sock"
    collector = start_collector("--socket", str(socket_path), "--answer-within", "1")
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    assert resolver.ask("a.home.test", "A").rcode() == dns.rcode.NOERROR
    with pytest.raises(dns.exception.Timeout):
        resolver.ask("silent.test", "A", timeout=1.5)
    time.sleep(0.5)  # past --answer-within: the next query's arrival forgets it
    assert resolver.ask("b.home.test", "AAAA").rcode() == dns.rcode.NOERROR
    assert sorted(record["question"] for record in wait_for(api, 2)) == ["a.home.test", "b.home.test"]
    assert collector.stop() == 0
    assert re.search(r"UNANSWERED 1 queries in \d+ s", collector.output()), collector.output()
    assert "1 queries never answered in the stream" in collector.output()
    assert "LOST" not in collector.output() and "dropped" not in collector.output()
    assert lost_records(api) == {}
    assert unanswered_queries(api) == {"lab": 1.0}


def test_transports_dnssec_and_declared_blocks_from_a_unidirectional_sender(folder, api, start_collector):
    client_map = folder / "clients.txt"
    client_map.write_text("192.0.2.0/24 office\n192.0.2.7 printer\n")
    port = free_port()
    blocks = ("--blocked-rcode", "refused")
    collector = start_collector("--listen", f"127.0.0.1:{port}", "--client-map", str(client_map), *blocks)
    codec = fstrm.FstrmCodec()
    query_ns = RESPONSE_AT * 1_000_000_000 + 248_500_000  # 1.5 ms before the response
    frames = [
        dnstap_response("secure.example", protocol=dnstap_pb.DOH, ips=["198.51.100.1"], ad=True, query_ns=query_ns),
        dnstap_response("bogus.example", protocol=dnstap_pb.DOT, client="192.0.2.8", rcode="SERVFAIL", ede=6),
        dnstap_response("refused.example", protocol=dnstap_pb.DOQ, client="2001:db8::5", rcode="REFUSED"),
        dnstap_response("crypt.example", protocol=dnstap_pb.DNSCryptUDP, client="198.51.100.9"),
        b"\xff\xfe not a dnstap message",
    ]
    send_and_stop(port, frames)
    records = {record["question"]: record for record in wait_for(api, 4)}
    secure = records["secure.example"]
    assert (secure["protocol"], secure["dnssec"], secure["clientId"]) == ("doh", "secure", "printer")
    assert secure["responseTimeMs"] == 1.5
    assert secure["timestamp"] == "2024-05-01T12:00:00.250Z"
    assert secure["answers"] == [{"ips": ["198.51.100.1"]}]
    bogus = records["bogus.example"]
    assert (bogus["protocol"], bogus["dnssec"], bogus["clientId"], bogus["action"]) == ("dot", "bogus", "office", -1)
    assert bogus["responseTimeMs"] is None
    refused = records["refused.example"]
    assert (refused["protocol"], refused["clientId"], refused["sourceIp"]) == ("doq", "2001:db8::5", "2001:db8::5")
    assert (refused["action"], refused["trigger"], refused["triggerValue"]) == (0, "filter", "rcode:REFUSED")
    assert records["crypt.example"]["protocol"] == "dnscrypt"
    assert records["crypt.example"]["dnssec"] == ""

    # A bidirectional sender is answered ACCEPT; one that sends an absurd frame is dropped.
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlready(b"protobuf:dnstap.Dnstap"))
        sender.settimeout(5)
        assert sender.recv(100) == codec.encode_ctrlaccept(b"protobuf:dnstap.Dnstap")
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap") + struct.pack("!I", 1 << 30))
        sender.settimeout(5)
        assert sender.recv(100) == b""  # hung up on
    assert collector.stop() == 0
    assert "frame larger than 1 MiB" in collector.output()
    assert "4 records delivered" in collector.output()
    assert "1 unreadable" in collector.output()


def test_a_stop_reads_on_while_a_resolver_still_sends(folder, api, start_collector):
    """SIGTERM closes the listener but not the open connections: what a resolver sends while
    the stop is under way (its last flush) is stored too, and then the collector exits."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}")
    codec = fstrm.FstrmCodec()
    frames = [dnstap_response(f"q{i}.example", protocol=dnstap_pb.UDP) for i in range(200)]
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap"))
        sender.sendall(b"".join(codec.encode_data(frame) for frame in frames[:100]))
        wait_for(api, 100)
        for number, frame in enumerate(frames[100:]):  # a resolver still sending, one every 10 ms
            if number == 20:
                collector.process.send_signal(signal.SIGTERM)
            sender.sendall(codec.encode_data(frame))
            time.sleep(0.01)
        assert collector.process.poll() is None, "still reading while the resolver sends"
    assert collector.stop() == 0
    assert len(stored(api)) == 200
    assert "200 records delivered" in collector.output()


@pytest.mark.sqlite_only  # nothing reaches the store
@pytest.mark.parametrize(
    "options, message",
    [
        ([], "give --socket PATH and/or --listen HOST:PORT"),
        (["--listen", "6000"], "must be HOST:PORT"),
        (["--socket", "x.sock", "--blocked-rcode", "BLOCKED"], "'BLOCKED' is not an rcode"),
        (["--socket", "x.sock", "--blocked-answer", "0.0.0"], "does not appear to be an IPv4 or IPv6 address"),
        (["--socket", "x.sock", "--blocked-zone", "a..b"], "'a..b' is not a zone name"),
        (["--socket", "x.sock", "--client-map", "-"], "line 2: '10.0.0.300' is not an address or network"),
        (["--socket", "x.sock", "--socket-mode", "rw"], "must be octal permissions"),
    ],
)
def test_bad_options_are_refused_with_a_message(runner, options, message):
    result = runner.invoke(args=["collect-dnstap", *options], input="10.0.0.1 router\n10.0.0.300 typo\n")
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.sqlite_only  # the lock is SQLite's
def test_a_stuck_store_never_stops_the_reading(folder, api, start_collector):
    """While the database is locked, the collector still reads everything the resolver sends,
    keeps up to --max-pending records and drops (and counts) the rest; once the lock goes, what
    it kept is stored, once."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}", "--max-pending", "1000", "--batch-size", "100")
    codec = fstrm.FstrmCodec()
    frames = b"".join(codec.encode_data(dnstap_response(f"n{i}.example", protocol=dnstap_pb.UDP)) for i in range(3000))
    lock = sqlite3.connect(api.database, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # every writer now waits (up to its 30 s busy timeout)
    try:
        with socket.create_connection(("127.0.0.1", port)) as sender:
            sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap") + frames)
            sender.sendall(codec.encode(fstrm.FSTRM_CONTROL_STOP))
            sender.settimeout(20)
            assert sender.recv(1) == b""  # the collector read up to STOP and hung up
        assert stored(api) == []
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    records = wait_for(api, 1000, timeout=30)
    assert len({record["question"] for record in records}) == 1000
    assert collector.stop() == 0
    assert "1000 records delivered" in collector.output()
    assert "2000 dropped while the sink was behind" in collector.output()
    assert re.search(r"LOST 2,000 records in \d+ s \([\d,]+/s\) at collector-queue", collector.output())
    assert lost_records(api) == {("lab", "collector-queue"): 2000.0}


def test_a_record_the_store_refuses_is_skipped_alone(folder, api, start_collector):
    """A response whose record the validator refuses (where its batch is stored, by the store's
    own process) is skipped and counted; the rest of its batch is stored."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}", "--batch-size", "3")
    codec = fstrm.FstrmCodec()
    odd = ".".join(["\\001" * 63] * 2)  # a name of 506 characters as text: longer than any domain name
    names = ["a.example", odd, "b.example"]
    frames = b"".join(codec.encode_data(dnstap_response(name, protocol=dnstap_pb.UDP)) for name in names)
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap") + frames)
        sender.sendall(codec.encode(fstrm.FSTRM_CONTROL_STOP))
        sender.settimeout(20)
        assert sender.recv(1) == b""
    assert sorted(record["question"] for record in wait_for(api, 2)) == ["a.example", "b.example"]
    assert collector.stop() == 0
    assert "2 records delivered" in collector.output() and "skipped 1 rejected (question)" in collector.output()


def test_the_store_process_refuses_what_json_text_would_not_carry_as_it_came(folder, api):
    """Batches reach the store's process as JSON text, read the fast way; a record whose value
    JSON cannot say as it is (a number that is not finite would come back null, an integer past
    64 bits has no form) or that the fast reading doubts (a NUL) is still refused alone and set
    aside, the rest of its batch stored."""
    rejects = str(folder / "rejected")
    store = StoreProcess(api.database, "", 64 << 20, (None, None), 48, 300)
    sink = LiveSink(LocalSink(rejects), "dnstap:lab", store)
    now = int(time.time() * 1000)

    def wire(name, **fields):
        return {"timestamp": now, "endpointId": "lab", "clientId": "c1", "question": name, **fields}

    bad = {"responseTimeMs": float("nan"), "action": 2**70, "question": "nul\x00.example"}
    try:
        for index, (name, value) in enumerate(bad.items()):
            record = wire(f"bad{index}.example", **{name: value})
            assert sink.deliver([wire(f"good{index}.example"), record]) == {name: 1}
    finally:
        store.close()
    assert sorted(record["question"] for record in stored(api)) == [f"good{i}.example" for i in range(3)]
    [path] = [os.path.join(rejects, name) for name in os.listdir(rejects)]
    with open(path, encoding="utf-8") as refused:
        assert [line["error"].split("'")[1] for line in map(json.loads, refused)] == list(bad)


def test_the_store_process_fills_geography_from_the_operators_files(folder, api, start_collector, monkeypatch):
    """ANALYTICS_GEOIP_DB and ANALYTICS_ASN_DB fill a collected record's geography as for every
    feed, in the store's own process, which validates the records."""
    city, asn = folder / "city.mmdb", folder / "asn.mmdb"
    write_city(city, {"192.0.2.0/24": ("DE", "Berlin")})
    write_asn(asn, {"192.0.2.0/24": (3320, "Deutsche Telekom AG")})
    monkeypatch.setenv("ANALYTICS_GEOIP_DB", str(city))
    monkeypatch.setenv("ANALYTICS_ASN_DB", str(asn))
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}")
    codec = fstrm.FstrmCodec()
    frame = dnstap_response("geo.example", protocol=dnstap_pb.UDP, client="192.0.2.7")
    with socket.create_connection(("127.0.0.1", port)) as sender:
        sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap") + codec.encode_data(frame))
        sender.sendall(codec.encode(fstrm.FSTRM_CONTROL_STOP))
        sender.settimeout(20)
        assert sender.recv(1) == b""
    (stored_record,) = wait_for(api, 1)
    assert collector.stop() == 0
    assert stored_record["sourceGeoip"] == {
        "countryCode": "DE",
        "city": "Berlin",
        "isp": "Deutsche Telekom AG",
        "asn": 3320,
    }


@pytest.mark.sqlite_only
def test_a_socket_it_cannot_make_is_named_in_the_error(runner, tmp_path):
    not_a_socket = tmp_path / "file"
    not_a_socket.write_text("")
    missing = tmp_path / "missing" / "x.sock"
    cases = [(missing, f"its folder {missing.parent} does not exist"), (not_a_socket, "not a socket")]
    for path, message in cases:
        result = runner.invoke(args=["collect-dnstap", "--socket", str(path)])
        assert result.exit_code == 1, result.output
        assert f"{path}" in result.output and message in result.output


@pytest.mark.sqlite_only
def test_pushed_to_a_service_elsewhere_through_the_spool(folder, api, start_collector, tmp_path, monkeypatch):
    from support.servers import Gunicorn

    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY})
    monkeypatch.setenv("ANALYTICS_FEED_KEY", API_KEY)
    port = free_port()
    try:
        collector = start_collector(
            "--listen", f"127.0.0.1:{port}", "--url", service.base, "--spool", str(folder / "spool")
        )
        frames = [dnstap_response(f"pushed{i}.example", protocol=dnstap_pb.UDP) for i in range(5)]
        # Two queries never answered: counted apart, in the service's /metrics too.
        start, M = RESPONSE_AT * 1_000_000_000, dnstap_pb.Message
        frames += [
            dnstap_exchange(f"gone{i}.example", (M.CLIENT_QUERY,), sent_ns=start, answered=False)[0] for i in (1, 2)
        ]
        frames += dnstap_exchange("later.example", (M.CLIENT_QUERY,), sent_ns=start + 31_000_000_000, answered=False)
        send_and_stop(port, frames)
        window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
        deadline = time.monotonic() + 15
        while service.call("GET", f"/v2/statistic/count?{window}", headers=AUTH)[1]["count"] < 5:
            assert time.monotonic() < deadline, "the records did not reach the service"
            time.sleep(0.1)
        assert stored(api) == [], "nothing went into the collector's own database"
        assert collector.stop() == 0
        status, exposition = service.fetch("GET", "/metrics", headers=AUTH)
        assert status == 200 and parse_lost(exposition.decode()) == {}
        scraped = helpers.samples(exposition.decode())
        assert scraped[("dns_analytics_feed_unanswered_queries_total", (("endpoint", "lab"),))] == 2.0
    finally:
        service.stop()


class Sender:
    """A resolver sending a response every 20 ms over Frame Streams until told to stop (or hung up
    on): a collector's stop drains such a connection for up to 5 seconds."""

    def __init__(self, socket_path, prefix: str):
        self.connection = socket.socket(socket.AF_UNIX)
        self.connection.connect(str(socket_path))
        self.connection.sendall(fstrm.FstrmCodec().encode_ctrlstart(b"protobuf:dnstap.Dnstap"))
        self.prefix, self.sent = prefix, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._send, daemon=True)
        self._thread.start()

    def _send(self):
        codec = fstrm.FstrmCodec()
        while not self._stop.wait(0.02):
            frame = codec.encode_data(dnstap_response(f"{self.prefix}{self.sent}.example", protocol=dnstap_pb.UDP))
            try:
                self.connection.sendall(frame)
            except OSError:
                return
            self.sent += 1

    def stop(self) -> int:
        """Stop sending and hang up; how many responses were sent."""
        self._stop.set()
        self._thread.join()
        self.connection.close()
        return self.sent


def test_a_collector_started_while_the_old_one_stops_keeps_its_socket(folder, api, start_collector, resolvers):
    """SIGTERM, then at once a new collector on the same socket (a script, an operator, a
    supervisor that does not wait): while the old one still drains a resolver's connection, the
    new one listens; the old one's end leaves the new one's socket in place, and a resolver
    started then feeds the new one."""
    socket_path = folder / "dnstap.sock"
    sent = 0
    # The old one drains for at most DRAIN_MAX (5 s) while the sender sends: a machine so busy
    # that the new one takes longer to start leaves nothing to test, and the scenario is run again.
    for attempt in range(3):
        old = start_collector("--socket", str(socket_path), program=FEED)
        sender = Sender(socket_path, f"old{attempt}-")
        # it sends: the stop drains
        helpers.wait_for(lambda: len(stored(api)) > sent, what="the sender's first records")  # noqa: B023
        old.process.send_signal(signal.SIGTERM)
        new = start_collector("--socket", str(socket_path), program=FEED)
        if old.process.poll() is None:
            break
        sent += sender.stop()
        assert old.process.wait(timeout=40) == 0, old.output()
        assert new.stop() == 0
    assert old.process.poll() is None, f"the old collector ended before the new one listened:\n{old.output()}"
    sent += sender.stop()
    assert old.process.wait(timeout=40) == 0, old.output()
    assert socket_path.exists(), "the old collector removed the new one's socket"
    resolver = resolvers(socket_path=socket_path)
    new.wait_connected()
    ask_all(resolver, QUERIES[:3])
    records = wait_for(api, sent + 3)
    check([record for record in records if not record["question"].startswith("old")], QUERIES[:3])
    assert new.stop() == 0
    assert "3 records delivered" in new.output()
    assert not socket_path.exists()


def refused(*options, database) -> subprocess.CompletedProcess:
    """`dns-analytics-feed collect-dnstap OPTIONS` expected to refuse to start."""
    env = {**os.environ, "ANALYTICS_DATABASE": database}
    result = subprocess.run(
        [*FEED, "collect-dnstap", *options], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result
    return result


def test_a_second_collector_on_a_live_socket_or_port_is_refused_and_the_first_works_on(
    folder, api, start_collector, resolvers
):
    socket_path, port = folder / "dnstap.sock", free_port()
    first = start_collector("--socket", str(socket_path), "--listen", f"127.0.0.1:{port}", program=FEED)
    resolver = resolvers(socket_path=socket_path)
    first.wait_connected()
    second = refused("--socket", str(socket_path), database=api.database)
    assert f"{socket_path}: another collector is listening on it" in second.stderr
    second = refused("--listen", f"127.0.0.1:{port}", database=api.database)
    assert f"127.0.0.1:{port} is in use: another collector (or another program) listens on it" in second.stderr
    ask_all(resolver, QUERIES[:3])
    check(wait_for(api, 3), QUERIES[:3])
    assert socket_path.exists()
    assert first.stop() == 0


def test_a_stale_socket_is_replaced(folder, api, start_collector, resolvers):
    """A socket nothing listens on any more (its collector was killed) is taken over."""
    socket_path = folder / "dnstap.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_path))
    stale.close()
    collector = start_collector("--socket", str(socket_path), program=FEED)
    resolver = resolvers(socket_path=socket_path)
    collector.wait_connected()
    ask_all(resolver, QUERIES[:2])
    check(wait_for(api, 2), QUERIES[:2])
    assert collector.stop() == 0


def test_a_killed_collectors_store_process_ends_after_the_batch_in_hand(folder, api, start_collector):
    """SIGKILL the collector while its store process is storing a batch (held up by a lock):
    the store process finishes the batch, then ends by itself, and no process is left holding
    the database."""
    port = free_port()
    collector = start_collector("--listen", f"127.0.0.1:{port}", "--batch-size", "1000", program=FEED)
    codec = fstrm.FstrmCodec()
    frames = b"".join(codec.encode_data(dnstap_response(f"k{i}.example", protocol=dnstap_pb.UDP)) for i in range(200))
    with store_locked(api.database):
        with socket.create_connection(("127.0.0.1", port)) as sender:
            sender.sendall(codec.encode_ctrlstart(b"protobuf:dnstap.Dnstap") + frames)
            sender.sendall(codec.encode(fstrm.FSTRM_CONTROL_STOP))
            sender.settimeout(20)
            assert sender.recv(1) == b""  # all 200 read: one batch, delivered once the stream pauses
        helpers.wait_for(lambda: store_process(collector.process.pid), what="the store process")
        store = store_process(collector.process.pid)
        helpers.wait_for(lambda: waits_on_the_lock(api.database, store), what="the batch in the store")
        family = children(collector.process.pid)  # the store process, and multiprocessing's tracker
        processes.stop(collector.process, signal.SIGKILL)
        time.sleep(1)  # several of its looks at its parent
        assert alive(store), "the store process left its batch unfinished"
    helpers.wait_for(lambda: not any(alive(pid) for pid in family), timeout=10, what="the store process to end")
    records = wait_for(api, 200)
    assert len({record["question"] for record in records}) == 200
    window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
    assert api.get(f"/v2/statistic/count?{window}", headers=AUTH).json["count"] == 200
    if not stores.is_postgres(api.database):
        assert holding(api.database) == []
        assert stores.scalar(api.database, "PRAGMA integrity_check") == "ok"
