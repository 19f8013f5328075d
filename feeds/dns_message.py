"""Just enough of the DNS wire format (RFC 1035) for the feeds: rcode names, type names, the
A/AAAA addresses of a response (the importers), and what a record needs of a response, read
straight from the wire (the dnstap collector: dnspython, its reference, is several times slower
and reads everything).
"""

import functools
import ipaddress
import struct

import dns.ipv4
import dns.ipv6

RCODES = {
    0: "NOERROR",
    1: "FORMERR",
    2: "SERVFAIL",
    3: "NXDOMAIN",
    4: "NOTIMP",
    5: "REFUSED",
    6: "YXDOMAIN",
    7: "YXRRSET",
    8: "NXRRSET",
    9: "NOTAUTH",
    10: "NOTZONE",
}

# IANA names of the types worth naming; any other is written the RFC 3597 way, TYPEnnn.
RR_TYPES = {
    1: "A",
    2: "NS",
    5: "CNAME",
    6: "SOA",
    12: "PTR",
    13: "HINFO",
    15: "MX",
    16: "TXT",
    28: "AAAA",
    33: "SRV",
    35: "NAPTR",
    43: "DS",
    46: "RRSIG",
    47: "NSEC",
    48: "DNSKEY",
    50: "NSEC3",
    52: "TLSA",
    64: "SVCB",
    65: "HTTPS",
    99: "SPF",
    251: "IXFR",
    252: "AXFR",
    255: "ANY",
    257: "CAA",
}

_HEADER = struct.Struct(">HHHHHH")
_RR_FIXED = struct.Struct(">HHIH")  # type, class, ttl, rdlength
_TYPE_A = 1
_TYPE_AAAA = 28


def rr_type_name(number: int) -> str:
    return RR_TYPES.get(number, f"TYPE{number}")


def parse_response(data: bytes) -> tuple[str | None, list[str]]:
    """The rcode name (None if unassigned) and the A/AAAA addresses in the answer section.

    Raises ValueError when `data` is not a well-formed DNS response.
    """
    if len(data) < _HEADER.size:
        raise ValueError("shorter than a DNS header")
    # The QR bit is not checked: the message is the answer by where it was logged (AdGuard
    # Home's own test data writes answers with QR clear).
    _, flags, qdcount, ancount, _, _ = _HEADER.unpack_from(data)
    offset = _HEADER.size
    for _ in range(qdcount):
        offset = _skip_name(data, offset) + 4  # qtype, qclass
    ips = []
    for _ in range(ancount):
        offset = _skip_name(data, offset)
        if offset + _RR_FIXED.size > len(data):
            raise ValueError("truncated resource record")
        rr_type, _, _, length = _RR_FIXED.unpack_from(data, offset)
        offset += _RR_FIXED.size
        rdata = data[offset : offset + length]
        if len(rdata) != length:
            raise ValueError("truncated resource record data")
        offset += length
        if rr_type == _TYPE_A and length == 4:
            ips.append(str(ipaddress.IPv4Address(rdata)))
        elif rr_type == _TYPE_AAAA and length == 16:
            ips.append(str(ipaddress.IPv6Address(rdata)))
    if offset > len(data):
        raise ValueError("truncated question")
    return RCODES.get(flags & 0x000F), ips


def _skip_name(data: bytes, offset: int) -> int:
    """The offset just past the (possibly compressed) name at `offset`.

    A compression pointer ends the name where it stands, so it is skipped, never followed:
    no loop of pointers can trap us.
    """
    while True:
        if offset >= len(data):
            raise ValueError("truncated name")
        length = data[offset]
        if length == 0:
            return offset + 1
        if length & 0xC0 == 0xC0:
            if offset + 2 > len(data):
                raise ValueError("truncated compression pointer")
            return offset + 2
        if length & 0xC0:
            raise ValueError("unsupported label type")
        offset += 1 + length


class Unusual(ValueError):
    """A message the fast reader leaves to dnspython (read_response's caller falls back)."""


_TYPE_OPT = 41
_TYPE_TSIG = 250
_OPTION_EDE = 15
# Label bytes dnspython writes as they are (escaping the rest: its Name.to_text()).
_PLAIN = frozenset(range(0x21, 0x7F)) - frozenset(b'"().;\\@$')


class Response:
    """What a record needs of a DNS response, read straight from the wire. `qname_key`: the
    question's labels, lower-cased (names compare without case)."""

    __slots__ = ("id", "flags", "rcode", "qname", "qname_key", "qtype", "ips", "ede")

    def __init__(self, ident, flags, rcode, qname, qname_key, qtype, ips, ede):
        self.id, self.flags, self.rcode, self.qname, self.qname_key = ident, flags, rcode, qname, qname_key
        self.qtype, self.ips, self.ede = qtype, ips, ede


def read_question(data: bytes) -> tuple[int, bytes, int]:
    """(id, the first question's name as lower-case wire labels, its type) of a DNS message;
    enough to pair a query with its response. Raises Unusual when there is no question."""
    if len(data) < _HEADER.size:
        raise Unusual("shorter than a DNS header")
    ident, _, qdcount = struct.unpack_from(">HHH", data)
    if qdcount < 1:
        raise Unusual("no question")
    labels, offset = _read_name(data, _HEADER.size)
    if offset + 4 > len(data):
        raise Unusual("truncated question")
    return ident, tuple(label.lower() for label in labels), struct.unpack_from(">H", data, offset)[0]


def read_response(data: bytes) -> Response:
    """The response's id, flags, rcode (extended by its OPT record), first question (text as
    dnspython writes it, and its key), A/AAAA addresses of the answer section (grouped and
    deduplicated as dnspython's rrsets are) and Extended DNS Error codes. Raises Unusual for
    what it does not read the way dnspython would (the caller then uses dnspython)."""
    if len(data) < _HEADER.size:
        raise Unusual("shorter than a DNS header")
    ident, flags, qdcount, ancount, nscount, arcount = _HEADER.unpack_from(data)
    if qdcount != 1:
        raise Unusual("not one question")
    labels, offset = _read_name(data, _HEADER.size)
    if offset + 4 > len(data):
        raise Unusual("truncated question")
    qtype = struct.unpack_from(">H", data, offset)[0]
    offset += 4
    groups: dict[tuple, list[str]] = {}
    ednsflags, ede, opts = 0, [], 0
    for index in range(ancount + nscount + arcount):
        owner, offset = _read_name(data, offset)
        if offset + _RR_FIXED.size > len(data):
            raise Unusual("truncated resource record")
        rr_type, rr_class, ttl, length = _RR_FIXED.unpack_from(data, offset)
        offset += _RR_FIXED.size
        end = offset + length
        if end > len(data):
            raise Unusual("truncated resource record data")
        if rr_type in (_TYPE_OPT, _TYPE_TSIG):
            if rr_type == _TYPE_TSIG or index < ancount + nscount or owner or opts:
                raise Unusual("an OPT or TSIG record where dnspython reads it specially")
            opts += 1
            ednsflags = ttl
            ede = _ede_codes(data, offset, end)
        elif index < ancount and rr_type in (_TYPE_A, _TYPE_AAAA):
            if (rr_type == _TYPE_A and length != 4) or (rr_type == _TYPE_AAAA and length != 16):
                raise Unusual("an address of the wrong length")
            address = _ntoa(data[offset:end])
            key = (tuple(label.lower() for label in owner), rr_type, rr_class)
            found = groups.setdefault(key, [])
            if address not in found:
                found.append(address)
        offset = end
    rcode = (flags & 0x000F) | ((ednsflags >> 20) & 0xFF0)
    qname = ".".join(map(_label_text, labels)) + "." if labels else "."
    ips = [address for addresses in groups.values() for address in addresses]
    return Response(ident, flags, rcode, qname, tuple(label.lower() for label in labels), qtype, ips, ede)


def _read_name(data: bytes, offset: int) -> tuple[list[bytes], int]:
    """The labels of the name at `offset` (pointers followed, each only backwards, so no loop)
    and the offset just past it where it stands."""
    labels, end, limit, size = [], None, offset, 0
    while True:
        if offset >= len(data):
            raise Unusual("truncated name")
        length = data[offset]
        if length == 0:
            return labels, (offset + 1 if end is None else end)
        if length & 0xC0 == 0xC0:
            if offset + 2 > len(data):
                raise Unusual("truncated compression pointer")
            target = ((length & 0x3F) << 8) | data[offset + 1]
            if target >= limit:
                raise Unusual("a compression pointer that does not point backwards")
            if end is None:
                end = offset + 2
            offset = limit = target
            continue
        if length & 0xC0:
            raise Unusual("unsupported label type")
        labels.append(data[offset + 1 : offset + 1 + length])
        offset += 1 + length
        size += 1 + length
        if size > 254:  # with the root label's byte, past the 255 a name may have
            raise Unusual("a name too long")


def _label_text(label: bytes) -> str:
    if _PLAIN.issuperset(label):
        return label.decode("ascii")
    return "".join(chr(c) if c in _PLAIN else ("\\" + chr(c) if c in b'"().;\\@$' else f"\\{c:03d}") for c in label)


def _ede_codes(data: bytes, offset: int, end: int) -> list[int]:
    codes = []
    while offset + 4 <= end:
        code, length = struct.unpack_from(">HH", data, offset)
        if code == _OPTION_EDE and length >= 2:
            codes.append(struct.unpack_from(">H", data, offset + 4)[0])
        offset += 4 + length
    if offset != end:
        raise Unusual("malformed EDNS options")
    return codes


@functools.lru_cache(maxsize=65536)  # answers' addresses recur
def _ntoa(raw: bytes) -> str:
    # dnspython's own text forms (its IPv6 form writes IPv4-mapped addresses its own way).
    return dns.ipv4.inet_ntoa(raw) if len(raw) == 4 else dns.ipv6.inet_ntoa(raw)
