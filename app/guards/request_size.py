"""The request's size: a URL past MAX_URL_BYTES is a 414, a body past the body limit a 413 (one
sent with Content-Length is refused by werkzeug before it is read; a chunked one here)."""

import io

from flask import current_app, request

from app.errors import ApiError, ErrorCode

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
    while part := _read_part(stream, min(65536, limit + 1 - size)):
        parts.append(part)
        size += len(part)
        if size > limit:
            raise ApiError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"The request body is over {limit // (1024 * 1024)} MB (ANALYTICS_MAX_BODY_MB); nothing was stored.",
            )
    environ["wsgi.input"] = io.BytesIO(b"".join(parts))
    environ["CONTENT_LENGTH"] = str(size)
    # Without this header the body is one of known length to every later reader: werkzeug
    # takes any request that names chunked for a stream of unknown length, and reads nothing
    # of it once the server's own reader is gone.
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    for cached in ("content_length", "stream"):
        request.__dict__.pop(cached, None)  # werkzeug caches what it read from the environ


def _read_part(stream, size: int) -> bytes:
    """The next part of a chunked body; its framing broken (a chunk size that is no number, a
    bad trailer, the client gone before the last chunk) is the client's error, a 400."""
    try:
        return stream.read(size)
    except Exception:  # each server raises its own kinds: gunicorn's parse errors, OSError, ...
        raise ApiError(
            ErrorCode.MALFORMED_BODY,
            "The request body's chunked framing is broken or was cut off; nothing was stored.",
        ) from None


