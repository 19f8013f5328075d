"""Reading request input beyond marshmallow's reach: raw JSON bodies, and the rules every value obeys."""

import io
import select
import socket

import orjson
from flask import current_app, request

from .errors import ApiError, ErrorCode

# The longest URL (path and query string) the service reads: room for 1,000 filter values of
# the longest domain names (253 characters). gunicorn.conf.py lets gunicorn pass longer ones on.
MAX_URL_BYTES = 512 * 1024


def bound_url():
    """A URL past MAX_URL_BYTES is a 414 with the API's error body, before anything else."""
    environ = request.environ
    size = len(environ.get("PATH_INFO", "")) + len(environ.get("QUERY_STRING", ""))
    if size > MAX_URL_BYTES:
        raise ApiError(
            ErrorCode.URL_TOO_LONG,
            f"The URL is over {MAX_URL_BYTES // 1024} KiB: fewer or shorter filter values, please.",
        )


def bound_chunked_body():
    """A body sent without Content-Length (chunked) is read here, up to the body limit: over
    it, the request is a 413 and nothing of it is used. Read whole, it is handed on as a body
    of known length, so no later reader can take a cut-off body for the whole one."""
    environ = request.environ
    if request.content_length is not None or not environ.get("wsgi.input_terminated"):
        return
    limit = current_app.config["MAX_CONTENT_LENGTH"]
    stream, parts, size = environ["wsgi.input"], [], 0
    while part := stream.read(min(65536, limit + 1 - size)):
        parts.append(part)
        size += len(part)
        if size > limit:
            raise ApiError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"The request body is over {limit // (1024 * 1024)} MB (ANALYTICS_MAX_BODY_MB); nothing was stored.",
            )
    environ["wsgi.input"] = io.BytesIO(b"".join(parts))
    environ["CONTENT_LENGTH"] = str(size)
    environ.pop("wsgi.input_terminated", None)
    request.__dict__.pop("content_length", None)  # werkzeug caches what it read from the environ
    request.__dict__.pop("stream", None)


def json_body():
    """The request body parsed as JSON (any JSON value), or a 400 MALFORMED_BODY."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise ApiError(ErrorCode.MALFORMED_BODY, "A JSON request body is required.")
    return checked_json(raw)


def checked_json(raw: bytes):
    """A request body parsed as JSON and held to the rule every value obeys (refuse_nul).
    Not for ingest bodies: records check their own strings, field by field."""
    body = parse_json(raw)
    refuse_nul(body)
    return body


def parse_json(raw: bytes, what: str = "The request body"):
    try:
        return loads(raw)
    except ValueError:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError(ErrorCode.MALFORMED_BODY, f"{what} is not valid UTF-8.") from None
        raise ApiError(ErrorCode.MALFORMED_BODY, f"{what} is not valid JSON.") from None


def loads(data: bytes | str):
    """Parse JSON, refusing what cannot be stored as text or is not JSON at all: lone
    surrogates (a "\\ud800" escape is valid JSON syntax but no valid Unicode string), nesting
    deeper than 1,024 levels, NaN and Infinity. Raises ValueError.

    orjson: ingestion parses ~3 MB per batch, and it does so ~4x faster than the json module."""
    return orjson.loads(data)


def refuse_nul(value, path="body"):
    """400 for a NUL character in any string of a parameter or body: nothing stored may hold
    one (PostgreSQL's text cannot), so the same rule holds on every engine and for lookups."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid '{path}': must not contain NUL characters.")
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_nul(key, path)
            refuse_nul(item, key if path == "body" else f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            refuse_nul(item, path)


def refuse_nul_in_path():
    """Before every request: the same rule for values in the URL path (endpoint and client
    ids of the alias operations)."""
    refuse_nul(request.view_args or {})


def hung_up(peer: socket.socket | None) -> bool:
    """Whether the client closed the connection, seen without writing to it (a stream, or a
    long read, can then stop at once rather than work for nobody)."""
    if peer is None:
        return False
    try:
        readable, _, _ = select.select([peer], [], [], 0)
        return bool(readable) and peer.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def hold_answer(seconds: float):
    """Send this request's answer only after `seconds`, without holding its thread: under
    gunicorn with app/worker.py's worker; under any other server it goes at once."""
    hold = getattr(request.environ.get("gunicorn.socket"), "hold_answer", None)
    if hold is not None:
        hold(seconds)
