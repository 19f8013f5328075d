"""Who is asking and what they may do: API keys, scopes, endpoint limits, and the check run
before every view.

A request's key becomes a Principal (its scopes and endpoint limit) in `g.principal`. The
operator key from ANALYTICS_API_KEY is a Principal with every scope; keys made with
`flask keys create` are looked up by the hash of the secret and become Principals the same way.

Endpoint limits are enforced in two halves, both here or fed from here: a request that names
an endpoint outside the key's limit (path, query string or JSON body) is refused with a 403
before the view runs; everything else a limited key reads or changes is narrowed by the
limit, which the views pass to the store as `endpoint_limit` (or inside Filters).
"""

import hashlib
import hmac
from dataclasses import dataclass

from flask import current_app, g, request

import models.access.keys
import models.access.tokens
import models.engine.database
from app.errors import ApiError, ErrorCode
from app.guards import failed_auth
from models.runtime.clock import now_ms
from schemas.auth import SCOPES

from . import signing

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
# Where requests name endpoints: query parameters and JSON body fields.
ENDPOINT_PARAMETERS = ("endpointId", "endpointId[]")
ENDPOINT_BODY_FIELDS = ("endpointIds",)


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
    # Stored keys are found by the hash of the secret: an index lookup on a value the caller
    # cannot steer towards a partial match.
    key = models.access.keys.find_key(secret)
    if key is not None:
        return Principal(
            key_id=key["id"],
            name=key["name"],
            scopes=frozenset(key["scopes"]),
            endpoints=None if key["endpoints"] is None else frozenset(key["endpoints"]),
        )
    raise ApiError(ErrorCode.INVALID_KEY, "Invalid API key.")


def init_app(app):
    """Check every request (failed authentications are counted by app.guards.failed_auth)."""
    with models.engine.database.connection():
        app.extensions["token_secret"] = models.access.tokens.token_secret()
    app.before_request(check_request)


def issue_stream_token(principal: Principal) -> tuple[str, int]:
    expires = now_ms() + STREAM_TOKEN_LIFETIME_MS
    secret = current_app.extensions["token_secret"]
    return signing.sign(secret, {"principal": principal.to_dict(), "expires": expires}), expires


def redeem_stream_token(token: str) -> Principal:
    claims = signing.verify(current_app.extensions["token_secret"], token)
    now = now_ms()
    valid = claims is not None and isinstance(claims.get("expires"), int) and claims["expires"] >= now
    # A token holds its key's rights only while the key lives: revoking reaches it too.
    if (
        not valid
        or not models.access.keys.key_is_live(claims["principal"]["key_id"])
        or not models.access.tokens.use_token(token, claims["expires"], now)
    ):
        raise ApiError(ErrorCode.INVALID_TOKEN, "Invalid, expired or already used authToken, or its key was revoked.")
    return Principal.from_dict(claims["principal"])


def check_request():
    """before_request: authenticate and authorise, before any input is validated."""
    if request.endpoint is None or request.method == "OPTIONS":
        return  # routing failed (404/405) or a CORS preflight: no data is served
    view = current_app.view_functions[request.endpoint]
    if getattr(view, "public", False) or request.endpoint.startswith("api-docs."):
        return
    try:
        if getattr(view, "stream_token", False) and request.args.get("authToken"):
            principal = redeem_stream_token(request.args["authToken"])
        else:
            principal = authenticate(presented_key())
    except ApiError as failure:
        raise failed_auth.counted(failure) from None
    g.principal = principal
    scope = getattr(view, "required_scope", SCOPE_BY_METHOD.get(request.method, "admin"))
    if scope is not None and not principal.has_scope(scope):
        raise ApiError(ErrorCode.FORBIDDEN_SCOPE, f"This API key lacks the '{scope}' scope.")
    check_endpoints(named_endpoints())


def named_endpoints() -> list[str]:
    """The endpoints the request names in its path, query string or JSON body."""
    named = []
    if "endpointId" in (request.view_args or {}):
        named.append(request.view_args["endpointId"])
    for name in ENDPOINT_PARAMETERS:
        named += request.args.getlist(name)
    # Only the DELETE operations name endpoints in a body; ingestion bodies are left to the
    # ingest view, which checks every record's endpoint, so big batches are parsed once.
    body = request.get_json(silent=True) if request.is_json and request.method == "DELETE" else None
    if isinstance(body, dict):
        for name in ENDPOINT_BODY_FIELDS:
            values = body.get(name)
            if isinstance(values, list):
                named += [v for v in values if isinstance(v, str)]
    return named


def check_endpoints(endpoints):
    """A 403 if the key is limited and any of `endpoints` lies outside its limit."""
    limit = g.principal.endpoints
    if limit is None:
        return
    outside = sorted(set(endpoints) - limit)
    if outside:
        raise ApiError(ErrorCode.FORBIDDEN_ENDPOINT, f"This API key is not allowed endpoint {outside[0]!r}.")


def endpoint_limit():
    """The current key's endpoint limit (a frozenset), or None when it has none."""
    return g.principal.endpoints


def actor() -> dict:
    """Who made a change, for the admin-action log."""
    return {
        "key_id": g.principal.key_id,
        "key_name": g.principal.name,
        "source_ip": (request.remote_addr or "").replace("\x00", ""),
    }
