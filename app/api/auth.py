"""The Auth group: /v2/auth/token and /v2/auth/key."""

from flask import g

from app.auth import issue_stream_token, requires
from app.extensions import Blueprint
from schemas.auth import KeyResponseSchema, TokenResponseSchema

blp = Blueprint(
    "auth", __name__, url_prefix="/v2/auth", description="Tokens for the realtime stream; what the calling key may do."
)


@blp.route("/token", methods=["GET"])
@blp.response(200, TokenResponseSchema)
@requires(None)
def token():
    """A single-use token, valid for 60 seconds, for one realtime stream."""
    token, expires = issue_stream_token(g.principal)
    return {"token": token, "expiresAt": expires}


@blp.route("/key", methods=["GET"])
@blp.response(200, KeyResponseSchema)
@requires(None)
def key():
    """The calling key's name, scopes and endpoint limit (never its secret)."""
    principal = g.principal
    endpoints = None if principal.endpoints is None else sorted(principal.endpoints)
    return {"name": principal.name, "scopes": sorted(principal.scopes), "endpoints": endpoints}
