"""Reading request bodies that are not a single marshmallow-shaped JSON object."""

import json
import re

from flask import request

from .errors import ApiError, ErrorCode


def json_body():
    """The request body parsed as JSON (any JSON value), or a 400 MALFORMED_BODY."""
    raw = request.get_data(cache=True)
    if not raw.strip():
        raise ApiError(ErrorCode.MALFORMED_BODY, "A JSON request body is required.")
    return parse_json(raw)


def parse_json(raw: bytes, what: str = "The request body"):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(ErrorCode.MALFORMED_BODY, f"{what} is not valid UTF-8.") from None
    try:
        return loads(text)
    # json raises RecursionError on absurdly deep nesting: a malformed body like any other.
    except (ValueError, RecursionError):
        raise ApiError(ErrorCode.MALFORMED_BODY, f"{what} is not valid JSON.") from None


def loads(text: str):
    """json.loads, refusing what cannot be stored as text: deep nesting and lone surrogates
    (a "\\ud800" escape is valid JSON but no valid Unicode string). Raises ValueError."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("JSON holds a lone UTF-16 surrogate") from None
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
