"""The Outputs group on the wire: an output's settings in and out, and its state."""

import re
import ssl
from urllib.parse import urlsplit

import marshmallow as ma
from marshmallow import fields

from .clients import MAX_IDS
from .fields import BaseSchema, Boolean, Datetime, Integer
from .siem import SHAPES

KINDS = ("http", "syslog", "file")
SYSLOG_SCHEMES = {"udp": 514, "tcp": 514, "tls": 6514}
SYSLOG_FORMATS = ("rfc5424", "rfc3164")
REDACTED = "<redacted>"
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)
# Headers the sender sets itself.
_OWN_HEADERS = {"content-length", "content-type", "host", "transfer-encoding", "connection"}
# Each kind's own options: sent to another kind they are refused rather than ignored.
KIND_OPTIONS = {
    "http": {"headers", "tls", "batchSize", "timeoutSeconds"},
    "syslog": {"tls", "format", "facility", "appName", "timeoutSeconds", "batchSize"},
    "file": {"maxBytes", "keep", "batchSize"},
}
DEFAULTS = {
    "batchSize": 500,
    "timeoutSeconds": 10,
    "format": "rfc5424",
    "facility": 16,  # local0
    "appName": "dns-analytics",
    "maxBytes": 100 << 20,
    "keep": 5,
}


class TlsSchema(BaseSchema):
    verify = Boolean(load_default=True, metadata={"description": "false: accept any certificate (tests, self-signed)."})
    caCert = fields.String(
        validate=ma.validate.Length(min=1, max=100_000),
        metadata={"description": "PEM certificate(s) to trust instead of the system's authorities."},
    )

    @ma.validates("caCert")
    def _loads(self, value, **kwargs):
        try:
            ssl.create_default_context(cadata=value)
        except (ssl.SSLError, ValueError, TypeError) as exc:
            raise ma.ValidationError(f"not a PEM certificate: {exc}") from None


def _header_name(name: str):
    if not _TOKEN.match(name) or len(name) > 100:
        raise ma.ValidationError(f"{name!r} is not a header name")
    if name.lower() in _OWN_HEADERS:
        raise ma.ValidationError(f"{name} is set by the service itself")


_URL_HELP = (
    "http: http(s)://host/path; syslog: udp://, tcp:// or tls://host:port; "
    "file: file:///absolute/path (its folder must exist)."
)


class _Settings(BaseSchema):
    """What an output's settings may be; CreateOutputSchema and ChangeOutputSchema say which
    are required and what is left out."""

    url = fields.String(validate=ma.validate.Length(min=1, max=2000), metadata={"description": _URL_HELP})
    name = fields.String(
        validate=ma.validate.Length(min=1, max=128), metadata={"description": "Unique; defaults to the URL."}
    )
    endpointIds = fields.List(
        fields.String(validate=ma.validate.Length(min=1, max=256)),
        validate=ma.validate.Length(min=1, max=MAX_IDS),
        allow_none=True,
        metadata={"description": "The endpoints whose records it forwards; absent or null: every endpoint."},
    )
    shape = fields.String(validate=ma.validate.OneOf(list(SHAPES)), metadata={"description": "queryData."})
    headers = fields.Dict(
        keys=fields.String(validate=_header_name),
        values=fields.String(validate=[ma.validate.Length(max=8000), ma.validate.Regexp(r"^[^\r\n\x00]*$")]),
        validate=ma.validate.Length(max=50),
        metadata={"description": "http: sent with every POST (e.g. Authorization); their values are never shown."},
    )
    tls = fields.Nested(TlsSchema, allow_none=True, metadata={"description": "https and tls:// only (null: none)."})
    batchSize = Integer(
        validate=ma.validate.Range(min=1, max=10_000), metadata={"description": "Records per POST / write (500)."}
    )
    timeoutSeconds = Integer(validate=ma.validate.Range(min=1, max=120), metadata={"description": "10."})
    format = fields.String(validate=ma.validate.OneOf(SYSLOG_FORMATS), metadata={"description": "syslog: rfc5424."})
    facility = Integer(validate=ma.validate.Range(min=0, max=23), metadata={"description": "16 (local0)."})
    appName = fields.String(
        validate=[ma.validate.Length(min=1, max=48), ma.validate.Regexp(r"^[!-~]+$")],
        metadata={"description": "syslog: dns-analytics."},
    )
    maxBytes = Integer(
        validate=ma.validate.Range(min=1024, max=1 << 40),
        metadata={"description": "file: rotated past this size (100 MiB)."},
    )
    keep = Integer(
        validate=ma.validate.Range(min=0, max=1000), metadata={"description": "file: rotated files kept (5)."}
    )


class CreateOutputSchema(_Settings):
    kind = fields.String(required=True, validate=ma.validate.OneOf(KINDS))
    url = fields.String(
        required=True, validate=ma.validate.Length(min=1, max=2000), metadata={"description": _URL_HELP}
    )
    shape = fields.String(load_default="queryData", validate=ma.validate.OneOf(list(SHAPES)))
    start = fields.String(
        load_default="oldest",
        validate=ma.validate.OneOf(("oldest", "now")),
        metadata={"description": "oldest: every record still stored; now: records stored from now on."},
    )
    paused = Boolean(load_default=False)

    @ma.validates_schema
    def _fits_kind(self, data, **kwargs):
        kind = data.get("kind")
        if kind not in KIND_OPTIONS:
            return
        for name in KIND_OPTIONS.keys() - {kind}:
            for option in KIND_OPTIONS[name] - KIND_OPTIONS[kind]:
                if option in data:
                    raise ma.ValidationError(f"not an option of a {kind} output", option)
        url_error = check_url(kind, data.get("url", ""))
        if url_error:
            raise ma.ValidationError(url_error, "url")
        if data.get("tls") is not None and urlsplit(data["url"]).scheme not in ("https", "tls"):
            raise ma.ValidationError("only for https:// and tls:// URLs", "tls")


def check_url(kind: str, url: str) -> str | None:
    """Why `url` does not suit an output of `kind`, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        return f"not a URL: {exc}"
    if kind == "http":
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "an http output needs an http:// or https:// URL"
    elif kind == "syslog":
        if parts.scheme not in SYSLOG_SCHEMES or not parts.hostname:
            return "a syslog output needs a udp://, tcp:// or tls:// URL with a host (and a port)"
        if parts.path not in ("", "/") or parts.query:
            return "a syslog URL is only udp://, tcp:// or tls://host:port"
    elif kind == "file":
        if parts.scheme != "file" or parts.netloc or not parts.path.startswith("/"):
            return "a file output needs a file:///absolute/path URL"
    return None


def output_options(data: dict) -> dict:
    """The options of the kind, with their defaults, as the store keeps them."""
    kind = data["kind"]
    options = {name: data.get(name, DEFAULTS.get(name)) for name in KIND_OPTIONS[kind]}
    if kind == "http":
        options["headers"] = options["headers"] or {}
    if "tls" in options:
        options["tls"] = options["tls"] if "tls" in data else None
    return {name: value for name, value in options.items() if value is not None}


def shown_url(url: str) -> str:
    """The URL as shown: a password in it redacted."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", f":{REDACTED}@", 1)
    return parts._replace(netloc=netloc).geturl()


def shown_options(options: dict) -> dict:
    """The options as GET shows them: header values (tokens, passwords) redacted."""
    shown = dict(options)
    if "headers" in shown:
        shown["headers"] = {name: REDACTED for name in shown["headers"]}
    return shown


def redacted_body(body):
    """A create request's body as the admin-action log keeps it: header values redacted."""
    if isinstance(body, dict) and isinstance(body.get("headers"), dict):
        return {**body, "headers": {name: REDACTED for name in body["headers"]}}
    return body


class OutputSchema(BaseSchema):
    """An output and how its delivery goes (dumped from a models.delivery.outputs.OutputRow as a dict, with
    its backlog)."""

    id = Integer(required=True)
    name = fields.String(required=True)
    kind = fields.String(required=True)
    url = fields.Function(lambda output: shown_url(output["url"]), required=True, metadata={"type": "string"})
    endpointIds = fields.List(fields.String(), required=True, allow_none=True, attribute="endpoints")
    shape = fields.String(required=True)
    paused = Boolean(required=True)
    options = fields.Function(
        lambda output: shown_options(output["options"]),
        required=True,
        metadata={"type": "object", "description": "The kind's settings, with their defaults; header values redacted."},
    )
    createdAt = Datetime(required=True, attribute="created")
    cursor = Integer(required=True, metadata={"description": "The last record id the receiver accepted (in id order)."})
    backlog = Integer(
        required=True,
        metadata={"description": "The output's records stored after the cursor (counted up to backlogLimit + 1)."},
    )
    backlogLimit = Integer(required=True, metadata={"description": "ANALYTICS_OUTPUT_BACKLOG."})
    delivered = Integer(required=True, metadata={"description": "Records accepted by the receiver."})
    skipped = Integer(
        required=True, metadata={"description": "Records never sent: skipped when the backlog was over its limit."}
    )
    lastDeliveryAt = Datetime(required=True, allow_none=True, attribute="last_delivery")
    failures = Integer(
        required=True, metadata={"description": "Failed attempts since the last accepted batch (0: healthy)."}
    )
    lastError = fields.String(required=True, allow_none=True, attribute="last_error")
    lastErrorAt = Datetime(required=True, allow_none=True, attribute="last_error_at")


class GetOutputsResponseSchema(BaseSchema):
    outputs = fields.List(fields.Nested(OutputSchema), required=True)


class ChangeOutputSchema(_Settings):
    """Any setting but the kind: what is sent replaces what the output had (`headers` all at
    once), the rest stays; the cursor stays where it is."""

    class Meta:
        min_properties = 1  # a change sets a field

    paused = Boolean(metadata={"description": "true: stop delivering; false: resume."})

    @ma.validates_schema
    def _something(self, data, **kwargs):
        if not data:
            raise ma.ValidationError("name at least one setting to change (e.g. paused)", "paused")


def settings_of(output: dict) -> dict:
    """A stored output (OutputRow as a dict) as the create body that makes it."""
    return {
        "kind": output["kind"],
        "url": output["url"],
        "name": output["name"],
        "endpointIds": output["endpoints"],
        "shape": output["shape"],
        "paused": output["paused"],
        **output["options"],
    }
