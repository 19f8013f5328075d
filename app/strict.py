"""Strict at the door: a query parameter or body field no operation reads is a 400 naming it and
the known name it is closest to, because a misspelt filter that is dropped widens a read or a
deletion; and the query string's text typed by the schema, so that fields stay strict in JSON."""

import difflib
import functools
import re

import marshmallow as ma
from flask import request

from schemas.fields import Boolean, Float, Integer

from .errors import ApiError, ErrorCode

# The one exception (docs/api.md, "Strict requests"): query parameters whose name starts with
# this are ignored, for cache-busters such as jQuery's `_=1700000000`. No filter's name does.
IGNORED_PREFIX = "_"

# Names other APIs use for what ours calls otherwise; offered when the operation has the target.
ALIASES = {
    "limit": "pageSize",
    "size": "pageSize",
    "per_page": "pageSize",
    "perPage": "pageSize",
    "page_size": "pageSize",
    "offset": "page",
    "start": "startTime",
    "from": "startTime",
    "since": "startTime",
    "end": "endTime",
    "to": "endTime",
    "until": "endTime",
    "sort": "sortOrder",
    "order": "sortOrder",
    "q": "searchQuestion",
    "search": "searchQuestion",
}

_INTEGER_TEXT = re.compile(r"-?[0-9]+")
_NUMBER_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_BOOLEAN_TEXT = {"true": True, "false": False}


def ignored(name: str) -> bool:
    return name.startswith(IGNORED_PREFIX)


def unknown_error(steps: list, known, location: str) -> ApiError:
    """The 400 for the name at the end of `steps` (keys and list indexes from the top of the
    query string or body), which its place does not take among `known`."""
    nearest = closest(steps[-1], known)
    hint = f": did you mean '{nearest}'?" if nearest else ""
    path = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in steps).removeprefix(".")
    where = "parameter" if location == "query" else "field"
    return ApiError(ErrorCode.INVALID_PARAMETER, f"Unknown {where} '{path}'{hint}")


def closest(name: str, known) -> str | None:
    """The known name `name` most likely meant: the same but for case or brackets, a well-known
    alias, else the nearest by difflib's ratio (None if none is near)."""
    known = sorted(known)
    bare = name.removesuffix("[]").lower()
    for candidate in known:
        if candidate.removesuffix("[]").lower() == bare:
            return candidate
    alias = ALIASES.get(name.removesuffix("[]"))
    if alias in known:
        return alias
    by_bare = {candidate.removesuffix("[]").lower(): candidate for candidate in known}
    found = difflib.get_close_matches(bare, list(by_bare), n=1, cutoff=0.75)
    return by_bare[found[0]] if found else None


def known_names(schema: ma.Schema, path: list) -> set[str]:
    """The names a request may send at `path` (keys and list indexes) inside `schema`'s input."""
    for step in path:
        if isinstance(step, int):
            continue
        field = next((f for f in schema.load_fields.values() if (f.data_key or f.name) == step), None)
        while isinstance(field, ma.fields.List):
            field = field.inner
        if isinstance(field, ma.fields.Dict):
            field = field.value_field
        if not isinstance(field, ma.fields.Nested):
            return set()
        schema = field.schema
    return {field.data_key or field.name for field in schema.load_fields.values()}


def takes_no_query(view):
    """`view` with its operation's rule for an operation that reads no query parameter: any
    parameter (but the ignored ones) is unknown."""

    @functools.wraps(view)
    def checked(*args, **kwargs):
        for name in request.args:
            if not ignored(name):
                raise ApiError(
                    ErrorCode.INVALID_PARAMETER, f"Unknown parameter '{name}': this operation takes no parameters."
                )
        return view(*args, **kwargs)

    return checked


def typed(field, text):
    """A query string's text as the JSON value `field` takes (a number, true or false), or the
    text itself when it is not written as one, for the field to refuse."""
    if isinstance(field, ma.fields.List):
        field = field.inner
    if isinstance(field, Integer) and _INTEGER_TEXT.fullmatch(text):
        return int(text)
    if isinstance(field, Float) and _NUMBER_TEXT.fullmatch(text):
        return float(text)
    if isinstance(field, Boolean):
        return _BOOLEAN_TEXT.get(text.lower(), text)  # true, True, TRUE: never 1, yes or on
    return text
