"""The fast way a batch is read (schemas/record_batch.py: msgspec, then Python) against the
reference validator (schemas.records.parse_records): every batch the fast path takes gives
the same records, and every batch the reference refuses the fast path leaves to it."""

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import record_batch
from schemas.records import RecordError, parse_records

from support.helpers import AUTH, assert_error, record

NOW = 1_714_564_800_000
TEXTS = st.one_of(
    st.sampled_from(["", " ", "a", "Example.COM.", "10.0.0.1", "::ffff:10.0.0.1", "2001:DB8::1", "x" * 257]),
    st.sampled_from(["filter", "service", "nope", "NOERROR", "A", "secure", "ads.example", "x" * 1025]),
    st.sampled_from(["a\x00b", "\x00"]),
    st.text(max_size=12),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 5), st.integers(), st.floats(allow_nan=False, allow_infinity=False)
)
VALUES = st.one_of(TEXTS, SCALARS)
GEOIP = st.one_of(
    st.none(),
    VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "countryCode": st.one_of(TEXTS, st.just("NL"), st.just("TOOLONGCC")),
            "city": VALUES,
            "isp": VALUES,
            "asn": st.one_of(st.none(), st.integers(-1, 2**32), st.booleans(), st.just(64500)),
        },
    ),
)
ANSWER = st.one_of(
    VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "ips": st.one_of(VALUES, st.lists(st.one_of(TEXTS, st.just("192.0.2.1"), SCALARS), max_size=3)),
            "geoip": GEOIP,
        },
    ),
)
CLIENT = st.one_of(
    st.none(),
    VALUES,
    st.fixed_dictionaries(
        {},
        optional={
            "host": VALUES,
            "mac": VALUES,
            "ip": st.one_of(VALUES, st.just("192.0.2.7")),
            "vendor": VALUES,
            "os": st.one_of(VALUES, st.fixed_dictionaries({}, optional={"type": VALUES, "version": VALUES})),
        },
    ),
)
FIELD_VALUES = {
    "timestamp": st.one_of(
        st.sampled_from(
            ["2024-05-01T12:00:00.123Z", "2024-05-01T12:00:00Z", "2024-05-01 12:00:00+02:00", "1714564800000"]
        ),
        st.integers(-(2**63), 2**63),
        VALUES,
    ),
    "endpointId": st.one_of(st.just("ep"), VALUES),
    "clientId": st.one_of(st.just("cl"), VALUES),
    "question": st.one_of(st.just("www.example.com"), VALUES),
    "action": st.one_of(st.sampled_from([-1, 0, 1, 2, 3]), VALUES),
    "trigger": st.one_of(st.just("filter"), VALUES),
    "responseTimeMs": st.one_of(
        st.sampled_from([12.5, 86_400_000, 86_400_000.5, -0.5]), st.integers(-1, 2**40), VALUES
    ),
    "cached": VALUES,
    "sourceIp": st.one_of(st.just("198.51.100.4"), VALUES),
    "sourceGeoip": GEOIP,
    "answers": st.one_of(VALUES, st.lists(ANSWER, max_size=3)),
    "client": CLIENT,
    **{name: VALUES for name in ("profileId", "rrType", "statusCode", "protocol", "triggerValue", "spoofTarget")},
    **{name: VALUES for name in ("upstream", "dnssec", "unknownField")},
}
BASE = {
    "timestamp": "2024-05-01T12:00:00.250Z",
    "endpointId": "home",
    "clientId": "laptop",
    "question": "www.Example.org.",
    "profileId": "kids",
    "rrType": "AAAA",
    "statusCode": "NOERROR",
    "protocol": "doh",
    "action": 0,
    "trigger": "filter",
    "triggerValue": "ads",
    "spoofTarget": "",
    "upstream": "9.9.9.9#53",
    "responseTimeMs": 3,
    "cached": True,
    "dnssec": "secure",
    "sourceIp": "2001:db8:0:0::7",
    "sourceGeoip": {"countryCode": "NL", "city": "Delft", "isp": "X", "asn": 64500},
    "answers": [{"ips": ["192.0.2.1", "2001:DB8::1"], "geoip": {"countryCode": "US", "asn": 15169}}],
    "client": {"host": "pc", "mac": "aa:bb", "ip": "10.0.0.7", "os": {"type": "linux"}},
}
# A valid record with a few fields left out and one or two others changed to anything: most
# examples are then valid or wrong in one place, where the two paths could disagree.
CHANGES = st.lists(st.sampled_from(sorted(FIELD_VALUES)), max_size=2, unique=True).flatmap(
    lambda names: st.fixed_dictionaries({name: FIELD_VALUES[name] for name in names})
)
RECORDS = st.builds(
    lambda dropped, changes: {k: v for k, v in BASE.items() if k not in dropped} | changes,
    st.sets(st.sampled_from(sorted(BASE)), max_size=3),
    CHANGES,
)


def reference(body: bytes):
    """What the reference path makes of a JSON array body: records, or the RecordError (or the
    JSON error: orjson takes no integer past 64 bits)."""
    try:
        return parse_records(orjson.loads(body), NOW)
    except (RecordError, orjson.JSONDecodeError) as exc:
        return exc


def fast(body: bytes, ndjson=False):
    decoded = record_batch.decode(body, ndjson)
    return None if decoded is None else record_batch.records(decoded, NOW)


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, min_size=1, max_size=4))
def test_the_fast_path_takes_only_what_the_reference_takes_and_gives_the_same(items):
    body = json.dumps(items).encode()
    expected = reference(body)
    found = fast(body)
    if found is not None:
        assert not isinstance(expected, Exception), f"fast path took what the reference refuses: {expected}"
        assert found == expected


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={k: v for k, v in FIELD_VALUES.items() if k != "unknownField"})))
def test_records_missing_required_fields_are_left_to_the_reference(items):
    body = json.dumps(items).encode()
    expected = reference(body)
    found = fast(body)
    if found is not None:
        assert found == expected


def full_record(i):
    return record(
        "home",
        f"client-{i % 3}",
        f"2024-05-01T12:00:{i:02d}.250Z",
        f"Host{i}.Example.org.",
        rrType="AAAA",
        statusCode="NOERROR",
        protocol="doh",
        action=i % 4,
        trigger="filter" if i % 4 == 0 else "",
        triggerValue="ads",
        upstream="9.9.9.9#53",
        responseTimeMs=i,
        cached=i % 2 == 0,
        dnssec="secure",
        sourceIp="2001:db8:0:0::7",
        sourceGeoip={"countryCode": "NL", "city": "Delft", "isp": "X", "asn": 64500},
        answers=[{"ips": ["192.0.2.1", "2001:DB8::1"], "geoip": {"countryCode": "US", "asn": 15169}}],
        client={"host": "pc", "mac": "aa:bb", "ip": "10.0.0.7", "os": {"type": "linux"}},
    )


@pytest.mark.parametrize("ndjson", [False, True])
def test_usual_batches_take_the_fast_path(ndjson):
    items = [full_record(i) for i in range(40)] + [record(question="a.example")]
    body = b"\n".join(orjson.dumps(item) for item in items) if ndjson else orjson.dumps({"records": items})
    found = fast(body, ndjson)
    assert found is not None, "a usual batch fell back to the reference path"
    assert found == reference(orjson.dumps(items))


@pytest.mark.parametrize(
    "body",
    [
        b'[{"endpointId": "ep", "clientId": "cl", "question": "a", "rrType": "A\\u0000"}]',  # NUL
        b'[{"endpointId": "ep", "clientId": "cl", "question": "a\\ud800b"}]',  # a lone surrogate
        b'[{"endpointId": "ep", "clientId": "cl", "question": "a", "answers": [[[[1]]]]}]',
        b'[{"endpointId": "ep", "clientId": "cl", "question": "a", "question": ""}]',  # the last one counts
        b'[{"endpointId": "ep", "clientId": "cl", "question": "a\xff"}]',  # not UTF-8
    ],
)
def test_what_json_alone_cannot_say_is_left_to_the_reference(body):
    assert fast(body) is None


def test_a_bad_batch_is_refused_as_the_reference_says_and_stores_nothing(client):
    items = [full_record(1), full_record(2) | {"answers": [{"ips": ["999.1.1.1"]}]}]
    response = client.post("/v2/ingest", data=json.dumps(items), headers={**AUTH, "Content-Type": "application/json"})
    assert_error(response, 400, 40005)
    assert "Record 1: field 'answers[0].ips[0]'" in response.json["error"]["message"]
    assert client.get("/v2/activity-log?startTime=2024-01-01T00:00:00Z", headers=AUTH).json["queries"] == []
