"""Fields with a named schema of their own in the OpenAPI document (Datetime, IP, Domain,
Trigger), and the base schema every request and response schema derives from."""

import ipaddress
import re
import socket

import marshmallow as ma
from marshmallow import fields

from .datetimes import MAX_MS, MIN_NUMERIC_MS, format_ms, parse_time

TRIGGERS = ("default", "filter", "service", "custom", "grule", "rebind")

# The OpenAPI components of the named fields; a field's property is a $ref to its component.
NAMED_FIELD_SCHEMAS = {
    "Datetime": {
        "type": "string",
        "format": "date-time",
        "description": "Written as YYYY-MM-DDTHH:MM:SS.mmmZ (UTC). Read as any RFC 3339 "
        "date-time or as integer epoch milliseconds (from 100000000000, 1973-03-03: a smaller number is "
        "taken for epoch seconds sent by mistake and refused); in a request's parameters also relative to the "
        "request's start: now, or -90s, -15m, -24h, -7d, -2w (also now-24h).",
        "example": "2024-05-01T12:00:00.000Z",
    },
    "DatetimeInput": {
        "description": "A time a request gives: an RFC 3339 date-time (any offset), integer epoch "
        "milliseconds (from 100000000000, 1973-03-03, to the year 9999: a smaller number is taken for epoch "
        "seconds sent by mistake and refused), or relative to the request's start: now, -90s, -15m, -24h, -7d, -2w "
        "(also now-24h).",
        "oneOf": [
            {"type": "string", "format": "date-time"},
            {"type": "string", "pattern": "^(now|now-[0-9]{1,9}[smhdw]|-[0-9]{1,9}[smhdw])$"},
            {"type": "integer", "format": "int64", "minimum": MIN_NUMERIC_MS, "maximum": MAX_MS},
        ],
        "example": "2024-05-01T12:00:00.000Z",
    },
    "IP": {"type": "string", "description": "An IPv4 or IPv6 address.", "example": "192.0.2.10"},
    "Domain": {
        "type": "string",
        "description": "A domain name, lower-case, without the trailing dot.",
        "example": "example.com",
    },
    "Trigger": {"type": "string", "enum": list(TRIGGERS)},
}


class BaseSchema(ma.Schema):
    class Meta:
        # An unknown field or parameter is a 400 naming it (app/strict.py): a misspelt filter
        # that was dropped would widen a read or a deletion.
        unknown = ma.RAISE


class Integer(fields.Integer):
    """A JSON integer only: 24.9 would be stored as 24, and 24.0 or "24" is not what the
    document says (a query string's text is typed before it gets here: app/strict.py)."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)


class Float(fields.Float):
    """A JSON number only, not its text."""

    def _validated(self, value):
        if isinstance(value, str):
            raise self.make_error("invalid", input=value)
        return super()._validated(value)


class Boolean(fields.Boolean):
    """JSON true or false only: not 0 or 1 (which equal False and True in Python, so the
    truthy/falsy sets let them through), "no" or "off"."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is True or value is False:
            return value
        raise self.make_error("invalid", input=value)


class NamedField(fields.Field):
    """A field documented as a reference to the component `schema_name`."""

    schema_name = ""


class Datetime(NamedField):
    schema_name = "Datetime"
    default_error_messages = {"invalid": "Not a valid datetime."}

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else format_ms(value)

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return parse_time(value)
        except ValueError as exc:
            raise ma.ValidationError(str(exc)) from None


class DatetimeInput(Datetime):
    """A Datetime a request gives: documented with the other ways it may be written."""

    schema_name = "DatetimeInput"


class _NamedString(NamedField):
    def _serialize(self, value, attr, obj, **kwargs):
        return value

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, str):
            raise ma.ValidationError("Not a valid string.")
        return self.normalize(value)

    def normalize(self, value: str) -> str:
        return value


class IP(_NamedString):
    schema_name = "IP"

    def normalize(self, value):
        return normalize_ip(value)


class Domain(_NamedString):
    schema_name = "Domain"

    def normalize(self, value):
        return normalize_domain(value)


class Trigger(_NamedString):
    schema_name = "Trigger"

    def normalize(self, value):
        if value not in TRIGGERS:
            raise ma.ValidationError(f"Must be one of: {', '.join(TRIGGERS)}.")
        return value


def normalize_ip(value: str) -> str:
    """An address as ipaddress writes it (IPv6 shortened, lower case); ValidationError if it is
    none. The C library reads and writes most addresses 10-20 times faster than ipaddress (2-6
    us, and a batch holds hundreds of addresses not seen before); what it writes differently
    (an IPv4 address inside an IPv6 one) or cannot read (a zone: fe80::1%eth0) ipaddress does.
    tests/test_addresses.py holds the two together."""
    text = value.strip()
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    try:
        written = socket.inet_ntop(family, socket.inet_pton(family, text))
    except (OSError, ValueError):  # ValueError: a NUL in the text
        pass
    else:
        if family == socket.AF_INET or "." not in written:
            return written
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ma.ValidationError("Not a valid IPv4 or IPv6 address.") from None


_NOT_IN_DOMAINS = re.compile(r"[\x00-\x20\x7f]")


def normalize_domain(value: str) -> str:
    name = value.strip().lower()
    if name != ".":
        name = name.removesuffix(".")
    if not name or len(name) > 253 or _NOT_IN_DOMAINS.search(name):
        raise ma.ValidationError("Not a valid domain name.")
    return name


def named_field_property(converter, field, **kwargs) -> dict:
    """apispec attribute function: document a NamedField as a $ref to its component."""
    if not isinstance(field, NamedField):
        return {}
    ref = {"$ref": f"#/components/schemas/{field.schema_name}"}
    if not field.allow_none:
        return ref
    # OpenAPI 3.0 ignores siblings of $ref, and `nullable` beside a bare allOf adds null to no
    # type (3.0.3: nullable needs a type beside it), so validators refuse null there: the
    # component is written out in place, with its type, as nullable.
    return {**NAMED_FIELD_SCHEMAS[field.schema_name], "nullable": True}


_APISPEC_NULL = {"type": "object", "nullable": True}


def null_branch_property(converter, field, ret=None, **kwargs) -> dict:
    """apispec attribute function: apispec writes a nullable nested object as anyOf its $ref or
    `{type: object, nullable: true}`, and that second branch admits any object at all, unknown
    fields included, which the service refuses: the branch is made to admit null alone."""
    branches = (ret or {}).get("anyOf")
    if not branches or _APISPEC_NULL not in branches:
        return {}
    return {"anyOf": [{**_APISPEC_NULL, "enum": [None]} if b == _APISPEC_NULL else b for b in branches]}
