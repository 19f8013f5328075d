"""The Auth group on the wire."""

import marshmallow as ma
from marshmallow import fields

from .fields import BaseSchema, Datetime

# What an API key may be allowed: `admin` implies every other scope.
SCOPES = ("read", "write", "ingest", "admin", "metrics")


class TokenResponseSchema(BaseSchema):
    token = fields.String(required=True, metadata={"description": "Single use, for one realtime stream."})
    expiresAt = Datetime(required=True)


class KeyResponseSchema(BaseSchema):
    name = fields.String(required=True, metadata={"description": "'operator' for ANALYTICS_API_KEY."})
    scopes = fields.List(
        fields.String(validate=ma.validate.OneOf(SCOPES)),
        required=True,
        metadata={"description": "admin implies every other scope."},
    )
    endpoints = fields.List(
        fields.String(),
        required=True,
        allow_none=True,
        metadata={"description": "The endpoints the key is limited to; null: every endpoint."},
    )
