"""Addresses are stored as Python's ipaddress writes them (IPv6 shortened, lower case), whichever
way they came: schemas.fields.normalize_ip reads and writes most of them with the C library
and leaves the rest to ipaddress; the two must never disagree."""

import ipaddress

import marshmallow as ma
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.fields import normalize_ip

from support.helpers import AUTH, clients, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
# Each as it may come from a resolver or a script.
SENT = [
    "192.0.2.1",
    " 198.51.100.7 ",
    "2001:DB8::1",
    "2001:0db8:0000:0000:0000:0000:0000:0001",
    "2001:db8:0:0:1:0:0:1",
    "2001:db8:0:1:0:0:0:1",
    "::ffff:192.0.2.1",
    "::192.0.2.1",
    "::ffff:c000:201",
    "64:ff9b::192.0.2.1",
    "fe80::1%eth0",
    "::",
    "::1",
    "1::",
]


def reference(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return None


def normalized(text: str) -> str | None:
    try:
        return normalize_ip(text)
    except ma.ValidationError:
        return None


def test_every_address_is_stored_as_ipaddress_writes_it(client):
    ingest(
        client,
        *(
            record(
                client_id=f"c{i}",
                question=f"q{i}.example",
                sourceIp=address,
                answers=[{"ips": [address]}],
                client={"ip": address},
            )
            for i, address in enumerate(SENT)
        ),
    )
    response = client.get(f"/v2/activity-log?{WINDOW}&sortOrder=asc&pageSize=500", headers=AUTH)
    assert response.status_code == 200, response.json
    stored = {row["question"]: row for row in response.json["queries"]}
    entries = clients(client)["ep1"]["clients"]
    for i, address in enumerate(SENT):
        row = stored[f"q{i}.example"]
        assert row["sourceIp"] == reference(address), address
        assert row["answers"][0]["ips"] == [reference(address)], address
        assert entries[f"c{i}"]["ip"] == reference(address), address
    # Among them the forms only ipaddress writes this way (an IPv4 address inside IPv6).
    assert stored["q6.example"]["sourceIp"] == "::ffff:c000:201"


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n))),
        st.lists(st.sampled_from([0, 0, 0, 1, 0xFFFF, 0xDB8, 0xC000, 0x201]), min_size=8, max_size=8).map(
            lambda groups: ":".join(f"{g:x}" for g in groups)
        ),
        st.integers(0, 2**128 - 1).map(lambda n: ipaddress.IPv6Address(n).exploded.upper()),
        st.text(alphabet="0123456789abcdefABCDEF:.% x", max_size=24),
    )
)
def test_the_c_library_and_ipaddress_agree(text):
    assert normalized(text) == reference(text)
