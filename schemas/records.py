"""The record (QueryData) on the wire, and the fast validator ingestion runs on each one.

Ingestion validates tens of thousands of records a second, so `parse_record` is plain Python
rather than a marshmallow load; the schemas below document the same shape (and are what the
activity log dumps), and tests hold the two together.
"""

import functools
import json
import operator

import marshmallow as ma
import orjson
from marshmallow import fields

from catalogue import BOOLEAN, FIELDS, FIELDS_BY_NAME, INTEGER, JSON_FIELDS, NUMBER, READ_FIELDS, TERM, TIME

from .datetimes import format_ms
from .fields import (
    IP,
    TRIGGERS,
    BaseSchema,
    Boolean,
    Datetime,
    Domain,
    Float,
    Integer,
    Trigger,
    normalize_domain,
    normalize_ip,
)
from .record_times import record_ms

ACTIONS = {-1: "failed", 0: "blocked", 1: "bypassed", 2: "spoofed", 3: "redirected"}
MAX_ID_LENGTH = 256
MAX_TEXT_LENGTH = 1024
MAX_ANSWERS = 64
MAX_ANSWER_IPS = 64
MAX_DNSSEC_LENGTH = 32
MAX_DURATION_MS = 86_400_000
# The longest text of a field where it is not MAX_TEXT_LENGTH.
TEXT_LIMITS = {
    "endpointId": MAX_ID_LENGTH,
    "clientId": MAX_ID_LENGTH,
    "profileId": MAX_ID_LENGTH,
    "dnssec": MAX_DNSSEC_LENGTH,
}
# What an unknown value of a field reads as in QueryData, where it is not "" (text) or null.
UNKNOWN = {"trigger": None, "sourceIp": None, "answers": []}


class _RecordPart(BaseSchema):
    """A record and its parts keep ingestion's rule, not the requests' (docs/api.md, "Strict
    requests"): a field a record carries that the service does not know is ignored. A record is
    data, not a filter: an unknown field cannot widen anything, and feeds may send more."""

    class Meta:
        unknown = ma.EXCLUDE


class GeoIPDataSchema(_RecordPart):
    countryCode = fields.String(metadata={"description": "ISO 3166-1 alpha-2; '' if unknown."})
    city = fields.String()
    isp = fields.String()
    asn = Integer(allow_none=True)


class AnswerSchema(_RecordPart):
    ips = fields.List(IP())
    geoip = fields.Nested(GeoIPDataSchema)


class ClientOsSchema(_RecordPart):
    type = fields.String()
    arch = fields.String()
    version = fields.String()


class ClientMetadataSchema(_RecordPart):
    host = fields.String()
    mac = fields.String()
    ip = fields.String()
    vendor = fields.String()
    os = fields.Nested(ClientOsSchema)


class _DeclaredQueryData(_RecordPart):
    timestamp = Datetime(metadata={"description": "When answered; on ingest defaults to receipt."})
    endpointId = fields.String(required=True)
    clientId = fields.String(required=True)
    profileId = fields.String()
    question = Domain(required=True)
    rrType = fields.String(metadata={"example": "AAAA"})
    statusCode = fields.String(metadata={"example": "NOERROR"})
    protocol = fields.String(metadata={"description": "legacy, doh, doh3, dot or doq."})
    action = Integer(
        allow_none=True,
        validate=ma.validate.OneOf(list(ACTIONS)),
        metadata={"description": "-1 failed, 0 blocked, 1 bypassed, 2 spoofed, 3 redirected."},
    )
    trigger = Trigger(allow_none=True)
    triggerValue = fields.String()
    spoofTarget = fields.String()
    sourceIp = IP(allow_none=True)
    sourceGeoip = fields.Nested(GeoIPDataSchema)
    answers = fields.List(fields.Nested(AnswerSchema))
    client = fields.Nested(
        ClientMetadataSchema,
        load_only=True,
        metadata={"description": "Ingest only: the client's metadata as seen in this record."},
    )


def _wire_field(field):
    kind = {INTEGER: Integer, NUMBER: Float, BOOLEAN: Boolean}.get(field.storage, fields.String)
    return kind(
        allow_none=field.storage != TERM,
        dump_only=bool(field.derived_from),
        metadata={"description": field.doc} if field.doc else {},
    )


# QueryData: the fields above, with their own types and rules, and every other QueryData field
# of the catalogue typed by its storage.
QueryDataSchema = type(
    "QueryDataSchema",
    (_DeclaredQueryData,),
    {
        field.name: _wire_field(field)
        for field in READ_FIELDS
        if field.path and len(field.path) == 1 and field.name not in _DeclaredQueryData._declared_fields
    },
)


class RecordError(ValueError):
    """A record failed validation; `field` is the path of the offending field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.index = None


def query_data(rows) -> list[dict]:
    """QueryData dicts from the store's record rows (models.RecordRow), ready for JSON."""
    parsed: dict = {}  # one parsed answer list per distinct answer set (shared, read-only)

    def answers(text):
        if text is None:
            return []
        found = parsed.get(text)
        if found is None:
            found = parsed[text] = orjson.loads(text)
        return found

    return [_QUERY_DATA(row, answers) for row in rows]


def _value_expression(at: int, field) -> str:
    """How a QueryData value is made from a record row `r` (see _QUERY_DATA)."""
    if field.storage == TIME:
        return f"format_ms(r[{at}])"
    if field.name in JSON_FIELDS:
        return f"answers(r[{at}])"
    if field.storage == BOOLEAN:
        return f"BOOLEANS[r[{at}]]"
    if field.storage == TERM and UNKNOWN.get(field.name, "") == "":
        return f'(r[{at}] or "")'  # text: unknown reads ""
    return f"r[{at}]"


def _query_data_source() -> str:
    """A lambda that builds one QueryData dict literally, made once from the catalogue: a
    loop over the fields of every record cost more than the query of a log page."""
    parts: dict[str, list] = {}  # QueryData key -> its value, or its nested (key, value) pairs
    for i, field in enumerate(READ_FIELDS):
        if field.path is None:
            continue
        expression = _value_expression(i + 1, field)
        if len(field.path) == 1:
            parts[field.path[0]] = expression
        else:
            parts.setdefault(field.path[0], []).append(f"{field.path[1]!r}: {expression}")
    items = []
    for key, value in parts.items():
        items.append(f"{key!r}: {{{', '.join(value)}}}" if isinstance(value, list) else f"{key!r}: {value}")
    return f"lambda r, answers: {{{', '.join(items)}}}"


_QUERY_DATA = eval(  # noqa: S307
    _query_data_source(), {"format_ms": format_ms, "BOOLEANS": {None: None, 0: False, 1: True}}
)


def parse_records(items, received_ms: int) -> list[dict]:
    """Validate a whole batch first; the first bad record raises RecordError with its index."""
    records = []
    for index, item in enumerate(items):
        try:
            records.append(parse_record(item, received_ms))
        except RecordError as exc:
            exc.index = index
            raise
    return records


def parse_record(raw, received_ms: int) -> tuple[tuple, dict]:
    """Validate one wire record; return it as the store takes new records (see
    models.store_records): the values of catalogue.FIELDS, and its client metadata."""
    if not isinstance(raw, dict):
        raise RecordError("record", "must be a JSON object")
    try:
        ts = record_ms(raw.get("timestamp"), received_ms)
    except ValueError as exc:
        raise RecordError("timestamp", str(exc)) from None
    question = _text(raw, "question", required=True, limit=MAX_TEXT_LENGTH)
    try:
        question = normalize_domain(question)
    except ma.ValidationError:
        raise RecordError("question", "not a valid domain name") from None
    action = raw.get("action")
    if action is not None and (type(action) is not int or action not in ACTIONS):
        raise RecordError("action", "must be one of -1, 0, 1, 2, 3")
    trigger = _text(raw, "trigger") or None
    if trigger is not None and trigger not in TRIGGERS:
        raise RecordError("trigger", f"must be one of {', '.join(TRIGGERS)}")
    source_ip = _text(raw, "sourceIp") or None
    if source_ip is not None:
        source_ip = _ip(source_ip, "sourceIp")
    src = _memoized(_geoip, raw.get("sourceGeoip"), "sourceGeoip")
    answers, dst = _memoized(_answer_parts, raw.get("answers"), "answers")
    places = (src, dst)
    values = _in_catalogue_order(
        {
            "timestamp": ts,
            "endpointId": _text(raw, "endpointId", required=True, limit=TEXT_LIMITS["endpointId"]),
            "clientId": _text(raw, "clientId", required=True, limit=TEXT_LIMITS["clientId"]),
            "profileId": _text(raw, "profileId", limit=TEXT_LIMITS["profileId"]) or None,
            "question": question,
            "rrType": _text(raw, "rrType") or None,
            "statusCode": _text(raw, "statusCode") or None,
            "protocol": _text(raw, "protocol") or None,
            "action": action,
            "trigger": trigger,
            "triggerValue": _text(raw, "triggerValue") or None,
            "spoofTarget": _text(raw, "spoofTarget") or None,
            "upstream": _text(raw, "upstream") or None,
            "responseTimeMs": _duration(raw, "responseTimeMs"),
            "cached": _flag(raw, "cached"),
            "dnssec": _text(raw, "dnssec", limit=TEXT_LIMITS["dnssec"]) or None,
            "sourceIp": source_ip,
            **{
                name: (places[side][key] or None) if term else places[side][key]
                for name, side, key, term in _GEOGRAPHY_AT
            },
            "answers": answers,
        }
    )
    return values, _memoized(_client_meta, raw.get("client"), "client")


# Where the catalogue's geography fields come from: the source's geoip ("src") or the first
# answer's ("dst"), validated, and the key in it.
GEOGRAPHY = {
    "srcCountry": ("src", "countryCode"),
    "sourceCity": ("src", "city"),
    "srcIsp": ("src", "isp"),
    "srcAsn": ("src", "asn"),
    "dstCountry": ("dst", "countryCode"),
    "dstIsp": ("dst", "isp"),
    "dstAsn": ("dst", "asn"),
}


# Each geography field: (name, 0 for the source or 1 for the destination, its key there,
# whether it is stored as a term: an empty string is then no value), looked up once.
_GEOGRAPHY_AT = tuple(
    (name, side == "dst", key, FIELDS_BY_NAME[name].storage == TERM) for name, (side, key) in GEOGRAPHY.items()
)


# Values by field name -> the tuple of catalogue.FIELDS the store takes (in C).
_in_catalogue_order = operator.itemgetter(*(field.name for field in FIELDS))
_TIME_AT = [field.name for field in FIELDS].index("timestamp")


def count_older(records: list[tuple], before_ms: int) -> int:
    """How many records (as parse_record returns them) are older than `before_ms`."""
    return sum(1 for values, _ in records if values[_TIME_AT] < before_ms)


def _text(obj: dict, name: str, *, required=False, limit=MAX_TEXT_LENGTH, path=None) -> str:
    value = obj.get(name)
    # The common case first, in as few steps as possible: this runs ~25 times per record.
    if value.__class__ is str and 0 < len(value) <= limit and "\x00" not in value:
        return value
    path = path or name
    if value is None or value == "":
        if required:
            raise RecordError(path, "is required")
        return ""
    if not isinstance(value, str):
        raise RecordError(path, "must be a string")
    if len(value) > limit:
        raise RecordError(path, f"must be at most {limit} characters")
    if "\x00" in value:
        raise RecordError(path, "must not contain NUL characters")
    return value


def _duration(obj: dict, name: str) -> float | None:
    """Milliseconds: a finite number from 0 to a day."""
    value = obj.get(name)
    if value is None:
        return None
    if type(value) not in (int, float) or not 0 <= value <= MAX_DURATION_MS:
        raise RecordError(name, f"must be a number of milliseconds from 0 to {MAX_DURATION_MS}")
    return float(value)


def _flag(obj: dict, name: str) -> int | None:
    """A boolean, stored as 0 or 1."""
    value = obj.get(name)
    if value is None:
        return None
    if type(value) is not bool:
        raise RecordError(name, "must be true or false")
    return int(value)


def _ip(value: str, path: str) -> str:
    try:
        return _normalized_ip(value)
    except ma.ValidationError:
        raise RecordError(path, "not a valid IPv4 or IPv6 address") from None


# The same few thousand addresses recur in every batch: a hit costs ~60 ns, a parse 0.3-6 us.
_normalized_ip = functools.lru_cache(maxsize=65536)(normalize_ip)


def _geoip(value, path: str) -> dict:
    if value is None:
        return _NO_OBJECT
    if not isinstance(value, dict):
        raise RecordError(path, "must be an object")
    asn = value.get("asn")
    if asn is not None and (type(asn) is not int or not 0 <= asn < 2**32):
        raise RecordError(f"{path}.asn", "must be an integer from 0 to 4294967295")
    return {
        "countryCode": _text(value, "countryCode", limit=8, path=f"{path}.countryCode"),
        "city": _text(value, "city", path=f"{path}.city"),
        "isp": _text(value, "isp", path=f"{path}.isp"),
        "asn": asn,
    }


# Results of validating nested objects, by the objects' JSON: a feed repeats the same geoip,
# answers and client metadata over and over, and validating them is most of a record's cost.
# The results are shared, so nothing may change them. One dict of them per validator, kept for
# the life of the process (json_reader's readers hold it): keyed by the text alone, a hit costs
# a third less than by (validator, text).
_MEMO: dict[object, dict[bytes, object]] = {}
# Bounded in bytes, not entries: rejected batches of large, distinct answer sets once grew a
# worker by over a GB. An entry is costed as three times its key's JSON (the result holds as
# much text again, e.g. the answers' compact JSON, and the geoip strings besides) plus the
# dict and tuple around them.
MEMO_BYTES = 16 * 1024 * 1024
_ENTRY_OVERHEAD = 400
# Larger objects are validated each time: they seldom repeat, and would crowd out the rest.
_MEMO_LARGEST = 16 * 1024
_memo_bytes = 0  # an estimate: threads may race on it, which only blurs the bound
# One encoder for all calls: json.dumps with options builds a new one each time.
_compact_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
_NO_OBJECT = {"countryCode": "", "city": "", "isp": "", "asn": None}


def _memoized(validate, value, path: str):
    if value is None:
        return validate(None, path)
    try:
        # The JSON text is the key: made in C, and it tells true, 1 and 1.0 apart, which
        # are equal in Python but not to the validators.
        text = orjson.dumps(value)
    except TypeError:  # not JSON (an importer's own objects): validate every time
        return validate(value, path)
    return _remembered(validate, text, lambda: value, path)


def json_reader(validate, path: str):
    """A function of a value still in its JSON text (the fast path's msgspec.Raw) that gives
    what _memoized(validate, the value, path) gives."""
    memo = _memo_of(validate)

    def read(raw):
        text = bytes(raw)
        found = memo.get(text)  # the usual case, in as few steps as possible
        if found is not None:
            return found
        if text == b"null":
            return validate(None, path)
        return _remembered(validate, text, lambda: orjson.loads(text), path)

    return read


def _memo_of(validate) -> dict[bytes, object]:
    """The validator's dict of results (setdefault would build an empty dict on every call: the
    reference path asks for each nested object of each record)."""
    memo = _MEMO.get(validate)
    if memo is None:
        memo = _MEMO[validate] = {}
    return memo


def _remembered(validate, text: bytes, value, path: str):
    """validate(value(), path), remembered by `text`, the value's JSON."""
    global _memo_bytes
    memo = _memo_of(validate)
    found = memo.get(text)
    if found is None:
        found = validate(value(), path)  # a RecordError is not remembered
        if len(text) > _MEMO_LARGEST:
            return found
        cost = 3 * len(text) + _ENTRY_OVERHEAD
        if _memo_bytes + cost > MEMO_BYTES:
            for each in _MEMO.values():  # emptied, not replaced: readers hold them
                each.clear()  # starting over is cheaper than tracking an order to evict in
            _memo_bytes = 0
        memo[text] = found
        _memo_bytes += cost
    return found


def _answer_parts(value, path: str = "answers") -> tuple[str | None, dict]:
    """(the answers as stored: compact JSON, or None when empty; the first answer's geoip)."""
    answers = _answers(value)
    if not answers:
        return None, _NO_OBJECT
    return _compact_json(answers), _geoip(answers[0].get("geoip"), "answers[0].geoip")


def _answers(value) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError("answers", "must be an array")
    if len(value) > MAX_ANSWERS:
        raise RecordError("answers", f"must have at most {MAX_ANSWERS} entries")
    answers = []
    for i, answer in enumerate(value):
        path = f"answers[{i}]"
        if not isinstance(answer, dict):
            raise RecordError(path, "must be an object")
        ips = answer.get("ips") or []
        if not isinstance(ips, list) or len(ips) > MAX_ANSWER_IPS:
            raise RecordError(f"{path}.ips", f"must be an array of at most {MAX_ANSWER_IPS} IPs")
        clean = {
            "ips": [
                _ip(_text({"ip": ip}, "ip", path=f"{path}.ips[{j}]", required=True), f"{path}.ips[{j}]")
                for j, ip in enumerate(ips)
            ]
        }
        geoip = answer.get("geoip")
        if geoip is not None:
            clean["geoip"] = _geoip(geoip, f"{path}.geoip")
        answers.append(clean)
    return answers


def _client_meta(value, path: str = "client") -> dict:
    """The non-empty metadata fields of a record, under the store's field names."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError("client", "must be an object")
    meta = {name: _text(value, name, path=f"client.{name}") for name in ("host", "mac", "ip", "vendor")}
    if meta["ip"]:
        meta["ip"] = _ip(meta["ip"], "client.ip")
    os_info = value.get("os")
    if os_info is not None:
        if not isinstance(os_info, dict):
            raise RecordError("client.os", "must be an object")
        for name in ("type", "arch", "version"):
            meta[f"os_{name}"] = _text(os_info, name, path=f"client.os.{name}")
    return {name: text for name, text in meta.items() if text}
