"""Who is asking and what they may do: API keys, scopes, and the check run before every view.

A request's key becomes a Principal (its scopes and endpoint limit) in `g.principal`. The
operator key from ANALYTICS_API_KEY is a Principal with every scope; stored keys (hashed)
are looked up by `find_key` and become Principals the same way.
"""

import hashlib
import hmac
from dataclasses import dataclass

from flask import current_app, g, request

import models
from schemas.datetimes import now_ms

from .errors import ApiError, ErrorCode

SCOPES = ("read", "write", "ingest", "admin")
STREAM_TOKEN_LIFETIME_MS = 60_000
# The scope an operation needs unless its view says otherwise (see `requires`).
SCOPE_BY_METHOD = {
    "GET": "read",
    "HEAD": "read",
    "POST": "ingest",
    "PUT": "write",
    "DELETE": "write",
    "PATCH": "write",
}


@dataclass(frozen=True)
class Principal:
    key_id: int | None
    name: str
    scopes: frozenset
    endpoints: frozenset | None = None  # None: every endpoint

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes

    def to_dict(self) -> dict:
        return {
            "key_id": self.key_id,
            "name": self.name,
            "scopes": sorted(self.scopes),
            "endpoints": None if self.endpoints is None else sorted(self.endpoints),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Principal":
        endpoints = data["endpoints"]
        return cls(
            key_id=data["key_id"],
            name=data["name"],
            scopes=frozenset(data["scopes"]),
            endpoints=None if endpoints is None else frozenset(endpoints),
        )


OPERATOR = Principal(key_id=None, name="operator", scopes=frozenset(SCOPES))


def requires(scope: str | None):
    """Mark a view as needing `scope` (None: any valid key) instead of its method's scope."""

    def mark(view):
        view.required_scope = scope
        return view

    return mark


def accepts_stream_token(view):
    """Mark a view as also taking `?authToken=` (a single-use token) instead of a key."""
    view.stream_token = True
    return view


def public(view):
    """Mark a view as open to everyone (the API description)."""
    view.public = True
    return view


def key_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def presented_key() -> str:
    header = request.headers.get("Authorization", "").strip()
    if header[:7].lower() == "bearer ":
        header = header[7:].strip()
    return header


def authenticate(secret: str) -> Principal:
    if not secret:
        raise ApiError(ErrorCode.MISSING_KEY, "Missing API key: send it in the Authorization header.")
    operator_key = current_app.config.get("ANALYTICS_API_KEY")
    # Compare digests in constant time, so response timing tells nothing about the key.
    if operator_key and hmac.compare_digest(key_digest(secret), key_digest(operator_key)):
        return OPERATOR
    raise ApiError(ErrorCode.INVALID_KEY, "Invalid API key.")


def issue_stream_token(principal: Principal) -> tuple[str, int]:
    return models.create_token(principal.to_dict(), now_ms(), STREAM_TOKEN_LIFETIME_MS)


def redeem_stream_token(token: str) -> Principal:
    data = models.redeem_token(token, now_ms())
    if data is None:
        raise ApiError(ErrorCode.INVALID_TOKEN, "Invalid, expired or already used authToken.")
    return Principal.from_dict(data)


def check_request():
    """before_request: authenticate and authorise, before any input is validated."""
    if request.endpoint is None or request.method == "OPTIONS":
        return  # routing failed (404/405) or a CORS preflight: no data is served
    view = current_app.view_functions[request.endpoint]
    if getattr(view, "public", False) or request.endpoint.startswith("api-docs."):
        return
    if getattr(view, "stream_token", False) and request.args.get("authToken"):
        principal = redeem_stream_token(request.args["authToken"])
    else:
        principal = authenticate(presented_key())
    g.principal = principal
    scope = getattr(view, "required_scope", SCOPE_BY_METHOD.get(request.method, "admin"))
    if scope is not None and not principal.has_scope(scope):
        raise ApiError(ErrorCode.FORBIDDEN_SCOPE, f"This API key lacks the '{scope}' scope.")
