"""Every error leaves the API through here, as the ErrorResponse body with a stable code."""

from enum import IntEnum

from flask import current_app
from werkzeug.exceptions import HTTPException

from .connection import close_after_error


class ErrorCode(IntEnum):
    """The `error.code` values; the first three digits are the HTTP status.
    The README's error table lists the same codes (a test keeps them in step)."""

    INVALID_PARAMETER = 40001
    INVALID_DATETIME = 40002
    MISSING_FIELD = 40003
    MALFORMED_BODY = 40004
    INVALID_RECORD = 40005
    CONFIRMATION_REQUIRED = 40006
    MISSING_KEY = 40101
    INVALID_KEY = 40102
    INVALID_TOKEN = 40103
    FORBIDDEN_SCOPE = 40301
    FORBIDDEN_ENDPOINT = 40302
    NOT_FOUND = 40401
    CLIENT_NOT_FOUND = 40402
    OUTPUT_NOT_FOUND = 40403
    METHOD_NOT_ALLOWED = 40501
    REQUEST_TIMEOUT = 40801  # the proxy's (deploy/nginx-site.conf), like the other codes it alone sends
    OUTPUT_EXISTS = 40901
    PAYLOAD_TOO_LARGE = 41301
    BATCH_TOO_LARGE = 41302
    URL_TOO_LONG = 41401
    TOO_MANY_REQUESTS = 42901
    TOO_MANY_STREAMS = 42902
    TOO_MANY_FAILURES = 42903
    INTERNAL = 50001
    BAD_GATEWAY = 50201
    UNAVAILABLE = 50301
    TOO_SLOW = 50302
    TOO_MANY_CONNECTIONS = 50303
    GATEWAY_TIMEOUT = 50401

    @property
    def status(self) -> int:
        return self.value // 100


class ApiError(HTTPException):
    """Raise anywhere in a request to answer with this error."""

    def __init__(self, error_code: ErrorCode, message: str, headers: dict | None = None):
        super().__init__(message)
        self.code = error_code.status
        self.error_code = error_code
        self.headers = headers or {}


# Codes for HTTP errors raised by Flask/werkzeug themselves (routing, body limit, crashes).
_CODE_BY_STATUS = {
    400: ErrorCode.MALFORMED_BODY,
    401: ErrorCode.MISSING_KEY,
    403: ErrorCode.FORBIDDEN_SCOPE,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    500: ErrorCode.INTERNAL,
    503: ErrorCode.UNAVAILABLE,
}

_MESSAGES = {
    ErrorCode.NOT_FOUND: "No such path.",
    ErrorCode.METHOD_NOT_ALLOWED: "Method not allowed on this path.",
    ErrorCode.INTERNAL: "Internal server error.",
}


def error_body(error_code: ErrorCode, message: str) -> dict:
    return {"success": False, "error": {"message": message, "code": int(error_code)}}


def error_response(error: HTTPException):
    """(body, status, headers) for any HTTPException, ours or werkzeug's; the connection closes
    after it if the request has a body (see app.connection)."""
    close_after_error()
    return _answer(error)


def _answer(error: HTTPException):
    if isinstance(error, ApiError):
        return error_body(error.error_code, error.description), error.code, error.headers
    status = error.code or 500
    code = _CODE_BY_STATUS.get(status)
    if code is None:
        code = ErrorCode.INTERNAL if status >= 500 else ErrorCode.INVALID_PARAMETER
        status = code.status
    if code is ErrorCode.PAYLOAD_TOO_LARGE:
        limit_mb = current_app.config["ANALYTICS_MAX_BODY_MB"]
        message = f"Request body too large: the limit is {limit_mb} MB (ANALYTICS_MAX_BODY_MB)."
    elif code in _MESSAGES or status >= 500:
        # Never the description of an unexpected exception: it may hold internals.
        message = _MESSAGES.get(code, "Internal server error.")
    else:
        message = error.description or code.name
    headers = {
        name: value for name, value in error.get_headers() if name.lower() not in ("content-type", "content-length")
    }
    return error_body(code, message), status, headers
