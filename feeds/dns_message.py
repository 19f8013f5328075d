"""Just enough of the DNS wire format (RFC 1035) for the importers: rcode names, type names,
and the A/AAAA addresses of a response."""

import ipaddress
import struct

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
