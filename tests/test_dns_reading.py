"""The collector reads DNS responses straight from the wire (feeds/dns_message.py) and falls
back to dnspython, its reference, for what it leaves alone: both give the same records, for
every message of a real Unbound's dnstap and for messages built to be awkward."""

import ipaddress
import struct
from pathlib import Path

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rrset
import dnstap_pb
import pytest

from feeds import dns_message, dnstap

CAPTURE = Path(__file__).with_name("data") / "unbound-dnstap.bin"  # made by data/capture_unbound.py


def payloads(path: Path) -> list[bytes]:
    data, found, offset = path.read_bytes(), [], 0
    while offset < len(data):
        (length,) = struct.unpack_from(">I", data, offset)
        found.append(data[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return found


def records_both_ways(messages: list[bytes], **options) -> tuple[list, list]:
    fast, reference = dnstap.Decoder("lab", **options), dnstap.Decoder("lab", reference=True, **options)
    return [fast.record(m) for m in messages], [reference.record(m) for m in messages]


def test_every_message_of_a_real_unbound_capture_gives_the_same_record_both_ways():
    messages = payloads(CAPTURE)
    assert len(messages) >= 100
    fast, reference = records_both_ways(messages)
    assert sum(r is not None for r in reference) >= 50, "the capture holds responses"
    assert fast == reference
    left = [m for m in messages if _response_wire(m) and _left_to_dnspython(_response_wire(m))]
    assert left == [], "the fast reader reads every message of the capture itself"
    timed = [r for r in fast if r is not None and r.get("responseTimeMs") is not None]
    assert len(timed) == sum(r is not None for r in fast), "every response paired with its query"
    rules = dnstap.BlockRules(["0.0.0.0", "::"], ["NXDOMAIN"], ["HOME.test"])
    assert records_both_ways(messages, rules=rules)[0] == records_both_ways(messages, rules=rules)[1]


def _response_wire(payload: bytes) -> bytes:
    return dnstap_pb.Dnstap.FromString(payload).message.response_message


def _left_to_dnspython(wire: bytes) -> bool:
    try:
        dns_message.read_response(wire)
    except dns_message.Unusual:
        return True
    return False


def response_frame(response: dns.message.Message, query_ns=None) -> bytes:
    message = dnstap_pb.Message(
        type=dnstap_pb.Message.CLIENT_RESPONSE,
        socket_family=dnstap_pb.INET,
        socket_protocol=dnstap_pb.UDP,
        query_address=ipaddress.ip_address("192.0.2.7").packed,
        query_port=40000,
        response_time_sec=1714564800,
        response_time_nsec=250_000_000,
        response_message=response.to_wire(),
    )
    if query_ns:
        message.query_time_sec, message.query_time_nsec = divmod(query_ns, 1_000_000_000)
    return dnstap_pb.Dnstap(type=dnstap_pb.Dnstap.MESSAGE, message=message).SerializeToString()


def awkward() -> list[dns.message.Message]:
    made = []
    for name in ("Mixed.CASE.example", "a\\032b.example", 'x"y(z);w\\@v$.example', "\\000\\255.example", "."):
        query = dns.message.make_query(name, "A")
        response = dns.message.make_response(query)
        if name != ".":
            response.answer.append(dns.rrset.from_text(name + ".", 60, "IN", "A", "192.0.2.1"))
        made.append(response)
    # Several rrsets, addresses repeated, an IPv4-mapped IPv6 address, a CNAME chain.
    query = dns.message.make_query("www.example", "A")
    response = dns.message.make_response(query)
    response.answer.append(dns.rrset.from_text("www.example.", 60, "IN", "CNAME", "b.example."))
    response.answer.append(dns.rrset.from_text("b.example.", 60, "IN", "A", "192.0.2.2", "192.0.2.3"))
    response.answer.append(dns.rrset.from_text("c.example.", 60, "IN", "AAAA", "::ffff:192.0.2.9", "2001:db8::1"))
    made.append(response)
    # EDNS with an extended rcode, Extended DNS Errors, the AD bit.
    for rcode, ede, ad in (("BADVERS", None, False), ("SERVFAIL", 6, False), ("NOERROR", 3, True)):
        query = dns.message.make_query("edns.example", "AAAA", use_edns=0, want_dnssec=True)
        response = dns.message.make_response(query)
        response.set_rcode(dns.rcode.from_text(rcode))
        if ede is not None:
            response.use_edns(0, options=[dns.edns.EDEOption(ede, "why")])
        if ad:
            response.flags |= dns.flags.AD
        made.append(response)
    # An unknown type, and a name of 63-byte labels up to the longest a name may be.
    made.append(dns.message.make_response(dns.message.make_query("t.example", "TYPE65280")))
    longest = ".".join(["a" * 63] * 3 + ["b" * 61])
    made.append(dns.message.make_response(dns.message.make_query(longest, "A")))
    return made


@pytest.mark.parametrize("response", awkward(), ids=lambda r: r.question[0].name.to_text()[:30])
def test_awkward_responses_read_the_same_both_ways(response):
    dns_message.read_response(response.to_wire())  # read by the fast reader, not left to dnspython
    fast, reference = records_both_ways([response_frame(response, 1714564800_249_000_000)])
    assert fast == reference and fast[0] is not None


@pytest.mark.parametrize(
    "wire",
    [
        b"",
        b"\x12\x34\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00\x05short",  # a name cut off
        b"\x12\x34\x81\x80\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01",  # a pointer to itself
        b"\x12\x34\x81\x80\x00\x00\x00\x00\x00\x00\x00\x00",  # no question
    ],
)
def test_what_the_fast_reader_leaves_goes_to_dnspython(wire):
    with pytest.raises(dns_message.Unusual):
        dns_message.read_response(wire)
    with pytest.raises(dnstap.SkipRow):
        dnstap.read_with_dnspython(wire)
