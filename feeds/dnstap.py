"""dnstap messages into wire records: each answer to a client a resolver reports (a
CLIENT_RESPONSE, or BIND's AUTH_RESPONSE) is one record.

The protobuf is decoded by `dnstap_pb`; the DNS messages inside it are read straight from the
wire for what a record needs (feeds/dns_message.py), and by dnspython, the reference, where
that reader meets something it leaves alone (Decoder(reference=True) uses dnspython only; the
tests require both to give the same records). dnstap says
nothing of policy, cache or upstream; what a block looks like is the operator's to declare
(BlockRules), and who a client is may be declared too (ClientMap). See docs/feeding.md.
"""

import collections
import functools
import ipaddress
from dataclasses import dataclass, field

import dns.edns
import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dnstap_pb
from google.protobuf.message import DecodeError

from schemas.records import MAX_ID_LENGTH

from . import dns_message
from .common import SkipRow, compact

# socket_protocol -> protocol. DNSCrypt is not in the contract's list, but protocol takes any
# string, and "legacy" would hide that the client encrypted its queries.
PROTOCOLS = {
    dnstap_pb.UDP: "legacy",
    dnstap_pb.TCP: "legacy",
    dnstap_pb.DOT: "dot",
    dnstap_pb.DOH: "doh",
    dnstap_pb.DOQ: "doq",
    dnstap_pb.DNSCryptUDP: "dnscrypt",
    dnstap_pb.DNSCryptTCP: "dnscrypt",
}
# Extended DNS Errors (RFC 8914) that say the answer failed DNSSEC validation: DNSSEC Bogus,
# Signature Expired, Signature Not Yet Valid, DNSKEY Missing, RRSIGs Missing, NSEC Missing.
BOGUS_EDE = {6, 7, 8, 9, 10, 12}
FAILED_RCODES = {"SERVFAIL", "REFUSED"}
MAX_IPS = 64  # the most addresses one answer of a record may hold
# Client queries waiting for their response, kept to time the response when the response
# message itself carries no query time (Unbound's do not).
# A client's query and the answer it got. BIND logs an AUTH_QUERY for a query without the
# recursion-desired flag and an AUTH_RESPONSE for an answer from a zone it serves (so a pair can
# mix the kinds); RESOLVER_* and FORWARDER_* messages are the resolver's own upstream traffic.
QUERIES = frozenset({dnstap_pb.Message.CLIENT_QUERY, dnstap_pb.Message.AUTH_QUERY})
RESPONSES = frozenset({dnstap_pb.Message.CLIENT_RESPONSE, dnstap_pb.Message.AUTH_RESPONSE})
PENDING_QUERIES = 65536
PENDING_SECONDS = 30  # the default of --answer-within
UNKNOWN_CLIENT = "unknown"


class BlockRules:
    """How the operator's blocks look: answers that are block addresses (0.0.0.0, ::), rcodes
    that only blocks produce, zones whose every answer is a block."""

    def __init__(self, answers=(), rcodes=(), zones=()):
        self.answers = {str(ipaddress.ip_address(value.strip())) for value in answers}
        self.rcodes = set()
        for value in rcodes:
            try:
                self.rcodes.add(dns.rcode.to_text(dns.rcode.from_text(value.strip().upper())))
            except dns.rcode.UnknownRcode:
                raise ValueError(f"{value!r} is not an rcode (e.g. NXDOMAIN, REFUSED)") from None
        self.zones = []
        for value in zones:
            try:
                zone = dns.name.from_text(value.strip())
            except dns.exception.DNSException as exc:
                raise ValueError(f"{value!r} is not a zone name: {exc}") from None
            # Its labels without the root's, lower-cased: a name is in it when it ends with them.
            self.zones.append((tuple(label.lower() for label in zone.labels[:-1]), zone))

    def match(self, labels: tuple, rcode: str, ips: list[str]) -> str | None:
        """The triggerValue of the rule that makes this answer a block, or None. `labels`:
        the question's, lower-cased, without the root's."""
        for suffix, zone in self.zones:
            if not suffix or labels[-len(suffix) :] == suffix:
                return f"zone:{zone.to_text(omit_final_dot=True) or '.'}"
        for ip in ips:
            if ip in self.answers:
                return f"answer:{ip}"
        if rcode in self.rcodes:
            return f"rcode:{rcode}"
        return None


class ClientMap:
    """Names for clients by address or network, from lines `address-or-network name`."""

    def __init__(self, lines=()):
        self.exact: dict[str, str] = {}
        self.networks: list[tuple[ipaddress._BaseNetwork, str]] = []
        for number, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split(None, 1)
            if len(parts) != 2 or len(parts[1].strip()) > MAX_ID_LENGTH:
                raise ValueError(f"line {number}: expected 'address name', a name of 1 to {MAX_ID_LENGTH} characters")
            try:
                network = ipaddress.ip_network(parts[0], strict=False)
            except ValueError:
                raise ValueError(f"line {number}: {parts[0]!r} is not an address or network") from None
            if network.num_addresses == 1:
                self.exact[str(network.network_address)] = parts[1].strip()
            else:
                self.networks.append((network, parts[1].strip()))
        # The most specific network wins.
        self.networks.sort(key=lambda item: item[0].prefixlen, reverse=True)

    def name(self, ip: str) -> str | None:
        found = self.exact.get(ip)
        if found is None and self.networks:
            address = ipaddress.ip_address(ip)
            for network, name in self.networks:
                if address.version == network.version and address in network:
                    return name
        return found


@dataclass
class Decoder:
    """Turns dnstap payloads into wire records of one endpoint. `reference`: read the DNS
    messages with dnspython only (the tests compare both ways)."""

    endpoint: str
    rules: BlockRules = field(default_factory=BlockRules)
    clients: ClientMap = field(default_factory=ClientMap)
    reference: bool = False
    # Seconds a logged query waits for its response before it is forgotten and counted.
    answer_within: float = PENDING_SECONDS
    _queries: collections.OrderedDict = field(default_factory=collections.OrderedDict, repr=False, compare=False)
    # Queries forgotten without a response, told apart by what the stream showed meanwhile. A
    # resolver's full dnstap buffer drops queries and responses alike, so a response whose
    # query never came is the evidence that it drops: a query forgotten since such a response
    # most likely lost its response the same way (`dropped`: models.ingest.losses, place
    # "resolver"; a lower bound, since a pair dropped whole leaves no trace). Any other was
    # never answered (`unanswered`: no upstream, a time-out, a deny rule), and lost no record.
    unanswered: int = field(default=0, compare=False)
    dropped: int = field(default=0, compare=False)
    _logs_queries: bool = field(default=False, repr=False, compare=False)
    _last_query: int = field(default=0, repr=False, compare=False)  # ns, the newest query's time
    _dropped_at: int = field(default=-1, repr=False, compare=False)  # ns, the newest such response
    # Forgotten queries, so that a response coming after all is no evidence of a drop.
    _forgotten: collections.OrderedDict = field(default_factory=collections.OrderedDict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The live source's name (a feeds.source.Named): its spool folder's and bad-record
        file's key, and how the collector's messages name it."""
        return f"dnstap:{self.endpoint}"

    def keys(self) -> list[str]:
        return [self.name]

    def record(self, payload: bytes) -> dict | None:
        """The wire record of an answer to a client (RESPONSES), None for any other message (a
        client's query, QUERIES, is remembered for its time). Raises SkipRow when the payload
        is no dnstap message, or its response no DNS message."""
        try:
            frame = dnstap_pb.Dnstap.FromString(payload)
        except DecodeError as exc:
            raise SkipRow(f"not a dnstap message: {exc}") from None
        if frame.type != dnstap_pb.Dnstap.MESSAGE or not frame.HasField("message"):
            return None
        message = frame.message
        if message.type in QUERIES:
            self._remember_query(message)
            return None
        if message.type not in RESPONSES:
            return None
        response = self.read(message.response_message)
        ips = response.ips[:MAX_IPS]
        rcode = _rcode_text(response.rcode)
        ip = _address(message.query_address)
        response_ns = _time_ns(message.response_time_sec, message.response_time_nsec)
        query_ns = self._query_time(message, response, response_ns)
        blocked_by = self.rules.match(response.qname_key, rcode, ips)
        if blocked_by:
            action, trigger, value = 0, "filter", blocked_by
        else:
            action, trigger, value = (-1 if rcode in FAILED_RCODES else 1), "default", None
        return compact(
            {
                "timestamp": response_ns // 1_000_000 if response_ns else None,
                "endpointId": self.endpoint,
                "clientId": (self.clients.name(ip) or ip) if ip else UNKNOWN_CLIENT,
                "question": response.qname,
                "rrType": _type_text(response.qtype),
                "statusCode": rcode,
                "protocol": PROTOCOLS.get(message.socket_protocol),
                "action": action,
                "trigger": trigger,
                "triggerValue": value,
                "responseTimeMs": _elapsed_ms(query_ns, response_ns),
                "dnssec": _dnssec(response),
                "sourceIp": ip,
                "answers": [{"ips": ips}] if ips else None,
                "client": {"ip": ip} if ip else None,
            }
        )

    def read(self, wire: bytes) -> dns_message.Response:
        """What a record needs of a response: read from the wire, or by dnspython."""
        if not self.reference:
            try:
                return dns_message.read_response(wire)
            except dns_message.Unusual:
                pass
        return read_with_dnspython(wire)

    def _remember_query(self, message) -> None:
        sent = _time_ns(message.query_time_sec, message.query_time_nsec)
        if not sent:
            return
        try:
            ident, labels, qtype = self._question(message.query_message)
        except (dns.exception.DNSException, ValueError):
            return
        key = (message.socket_protocol, message.query_address, message.query_port, ident, labels, qtype)
        self._logs_queries = True
        self._last_query = sent
        self._queries[key] = sent
        self._queries.move_to_end(key)
        horizon = sent - int(self.answer_within * 1_000_000_000)
        while self._queries and (len(self._queries) > PENDING_QUERIES or next(iter(self._queries.values())) < horizon):
            forgotten, asked = self._queries.popitem(last=False)
            if self._dropped_at >= asked:  # the resolver dropped messages while this query waited
                self.dropped += 1
            else:
                self.unanswered += 1
            self._forgotten[forgotten] = asked
            if len(self._forgotten) > PENDING_QUERIES:
                self._forgotten.popitem(last=False)

    def _question(self, wire: bytes) -> tuple[int, tuple, int]:
        """(id, lower-cased question labels, type) of a query: what pairs it with its response."""
        if not self.reference:
            try:
                return dns_message.read_question(wire)
            except dns_message.Unusual:
                pass
        query = dns.message.from_wire(wire, ignore_trailing=True)
        if not query.question:
            raise ValueError("no question")
        question = query.question[0]
        return query.id, _lower_labels(question.name), question.rdtype

    def _query_time(self, message, response: dns_message.Response, response_ns: int | None) -> int | None:
        """The response's own query time, else its logged query's; the logged query is
        forgotten either way (it is answered), and a response whose query the resolver logs
        none of is the evidence that it drops messages (see `dropped`)."""
        own = _time_ns(message.query_time_sec, message.query_time_nsec)
        if not self._logs_queries:
            return own
        key = (
            message.socket_protocol,
            message.query_address,
            message.query_port,
            response.id,
            response.qname_key,
            response.qtype,
        )
        logged = self._queries.pop(key, None)
        if logged is None and self._forgotten.pop(key, None) is None:
            self._dropped_at = max(self._dropped_at, response_ns or self._last_query)
        return own or logged


def read_with_dnspython(wire: bytes) -> dns_message.Response:
    """The reference reading of a response (and the one for what the fast reader leaves)."""
    try:
        response = dns.message.from_wire(wire, ignore_trailing=True)
    except (dns.exception.DNSException, ValueError) as exc:
        raise SkipRow(f"the response is not a DNS message: {exc}") from None
    if not response.question:
        raise SkipRow("the response has no question")
    question = response.question[0]
    ips = [
        rdata.address
        for rrset in response.answer
        if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA)
        for rdata in rrset
    ]
    return dns_message.Response(
        response.id,
        int(response.flags),
        int(response.rcode()),
        question.name.to_text(),
        _lower_labels(question.name),
        int(question.rdtype),
        ips,
        [option.code for option in response.extended_errors()],
    )


def _lower_labels(name: dns.name.Name) -> tuple:
    return tuple(label.lower() for label in name.labels if label)


@functools.cache
def _rcode_text(rcode: int) -> str:
    return dns.rcode.to_text(rcode)


@functools.cache
def _type_text(rdtype: int) -> str:
    return dns.rdatatype.to_text(rdtype)


@functools.lru_cache(maxsize=65536)  # a resolver's clients recur: formatting one costs ~2 us
def _address(raw: bytes) -> str | None:
    if len(raw) in (4, 16):
        return str(ipaddress.ip_address(raw))
    return None


def _time_ns(seconds: int, nanoseconds: int) -> int | None:
    return seconds * 1_000_000_000 + nanoseconds if seconds else None


def _elapsed_ms(start_ns, end_ns) -> float | None:
    if start_ns is None or end_ns is None or end_ns < start_ns:
        return None
    return round((end_ns - start_ns) / 1_000_000, 3)


_AD = int(dns.flags.AD)  # a plain int: an enum's & costs a microsecond a record


def _dnssec(response: dns_message.Response) -> str | None:
    """ "secure" when the resolver set AD (it validated the answer: RFC 4035 3.2.3), "bogus" when
    an Extended DNS Error says validation failed; otherwise unknown. A clear AD bit proves
    nothing: the client may not have asked (DO/AD), or the resolver may not validate."""
    if response.flags & _AD:
        return "secure"
    if any(code in BOGUS_EDE for code in response.ede):
        return "bogus"
    return None
