"""The Auth group: /v2/auth/token."""

from flask import g

from schemas.auth import TokenResponseSchema

from ..extensions import Blueprint
from . import issue_stream_token, requires

blp = Blueprint("auth", __name__, url_prefix="/v2/auth", description="Tokens for the realtime stream.")


@blp.route("/token", methods=["GET"])
@blp.response(200, TokenResponseSchema)
@requires(None)
def token():
    """A single-use token, valid for 60 seconds, for one realtime stream."""
    token, expires = issue_stream_token(g.principal)
    return {"token": token, "expiresAt": expires}
