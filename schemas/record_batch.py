"""A batch of wire records read the fast way: decoded and type-checked in one pass in C
(msgspec), the few rules types cannot state checked in Python. A batch this path has any doubt
about (`None`) is read again by the reference validator, `records.parse_records`, which finds
the first bad record and says what is wrong with it; for every batch both accept they give the
same records (tests/test_record_batch.py holds them together).

Reading and validating a batch with orjson and `parse_record` cost ~35 us a record, most of the
ingest path's time; this path ~8.
"""

import functools
import re
from typing import Annotated, Literal

import marshmallow as ma
import msgspec

from catalogue import BOOLEAN, FIELDS, INTEGER, NUMBER, TERM, TIME

from .fields import TRIGGERS, normalize_domain
from .record_times import record_ms
from .records import (
    ACTIONS,
    GEOGRAPHY,
    MAX_DURATION_MS,
    MAX_TEXT_LENGTH,
    TEXT_LIMITS,
    RecordError,
    _answer_parts,
    _client_meta,
    _geoip,
    _ip,
    json_reader,
)

# Wire fields that are objects: kept as their JSON text, validated (and memoised by it) in Python.
_OBJECTS = ("sourceGeoip", "answers", "client")
_NULL = msgspec.Raw(b"null")
# Taken from what Python checked rather than from the decoded record.
_CHECKED = {
    "timestamp": "ts",
    "question": "question",
    "trigger": "trigger",
    "sourceIp": "source_ip",
    "answers": "answers",
}


def _wire_type(field):
    """A top-level wire field's type, as strict as parse_record's rules for it."""
    if field.storage == TIME:
        return str | int | None
    if field.name == "action":
        return Literal[tuple(ACTIONS)] | None
    if field.storage == INTEGER:
        return int | None
    if field.storage == NUMBER:
        return Annotated[float, msgspec.Meta(ge=0, le=MAX_DURATION_MS)] | None
    if field.storage == BOOLEAN:
        return bool | None
    limit = TEXT_LIMITS.get(field.name, MAX_TEXT_LENGTH)
    if field.required:
        return Annotated[str, msgspec.Meta(min_length=1, max_length=limit)]
    return Annotated[str, msgspec.Meta(max_length=limit)] | None


_TOP_LEVEL = [field for field in FIELDS if field.path and len(field.path) == 1 and field.name not in _OBJECTS]
# gc=False: a decoded record holds no other object that could hold it (its fields are strings,
# numbers and JSON text), and a batch of them untracked sets off fewer young collections.
_Record = msgspec.defstruct(
    "_Record",
    [(field.name, _wire_type(field)) for field in _TOP_LEVEL if field.required]
    + [(field.name, _wire_type(field), None) for field in _TOP_LEVEL if not field.required]
    + [(name, msgspec.Raw, _NULL) for name in _OBJECTS],
    gc=False,
)
_Envelope = msgspec.defstruct("_Envelope", [("records", list[_Record])])
_decode_array = msgspec.json.Decoder(list[_Record]).decode
_decode_envelope = msgspec.json.Decoder(_Envelope).decode
_decode_line = msgspec.json.Decoder(_Record).decode
# orjson refuses lone surrogates, which msgspec takes; and no stored string may hold NUL. Most
# bodies hold no backslash at all, which one pass in C tells (three searches for these escapes
# cost as much as decoding the body).
_DOUBTFUL_ESCAPE = re.compile(rb"\\u(?:0000|[dD])")


def _value_source() -> str:
    """A lambda making a record's values (catalogue order) from the decoded record `r` and what
    Python checked: made once from the catalogue, as parse_record's dict is."""
    parts = []
    for field in FIELDS:
        if field.name in _CHECKED:
            parts.append(_CHECKED[field.name])
        elif field.name in GEOGRAPHY:
            source, key = GEOGRAPHY[field.name]
            parts.append(f"{source}[{key!r}]" + (" or None" if field.storage == TERM else ""))
        elif field.storage == TERM and not field.required:
            parts.append(f"r.{field.name} or None")
        elif field.storage == BOOLEAN:
            parts.append(f"FLAGS[r.{field.name}]")
        else:
            parts.append(f"r.{field.name}")
    return f"lambda r, ts, question, trigger, source_ip, src, answers, dst: ({', '.join(f'({p})' for p in parts)},)"


_values = eval(_value_source(), {"FLAGS": {None: None, False: 0, True: 1}})  # noqa: S307
# Answer sets, geographies and clients recur; so do names (normalising one costs ~1 us).
_read_geoip = json_reader(_geoip, "sourceGeoip")
_read_answers = json_reader(_answer_parts, "answers")
_read_client = json_reader(_client_meta, "client")
_domain = functools.lru_cache(maxsize=65536)(normalize_domain)


def decode(body: bytes, ndjson: bool) -> list | None:
    """The batch's records as decoded and typed (None: the reference path must read it)."""
    if b"\\" in body and _DOUBTFUL_ESCAPE.search(body):
        return None
    try:
        if ndjson:
            return [_decode_line(line) for line in body.split(b"\n") if line.strip()]
        if body.lstrip()[:1] == b"{":
            return _decode_envelope(body).records
        return _decode_array(body)
    except (msgspec.DecodeError, ValueError, RecursionError):  # deep nesting: the reference refuses it
        return None


def endpoints(decoded: list) -> set[str]:
    """The endpoint names a decoded batch stores to."""
    return {record.endpointId for record in decoded}


def records(decoded: list, received_ms: int) -> list[tuple] | None:
    """The store's new records (see records.parse_record) of a decoded batch (None: a record
    broke a rule Python checks; the reference path will say which)."""
    try:
        return [_record(r, received_ms) for r in decoded]
    except (RecordError, ValueError, ma.ValidationError):
        return None


def _record(r, received_ms: int) -> tuple[tuple, dict]:
    ts = record_ms(r.timestamp, received_ms)
    question = _domain(r.question)
    trigger = r.trigger or None
    if trigger is not None and trigger not in TRIGGERS:
        raise RecordError("trigger", "not one of the triggers")
    source_ip = _ip(r.sourceIp, "sourceIp") if r.sourceIp else None
    src = _read_geoip(r.sourceGeoip)
    answers, dst = _read_answers(r.answers)
    values = _values(r, ts, question, trigger, source_ip, src, answers, dst)
    return values, _read_client(r.client)
