"""The Auth group on the wire."""

from marshmallow import fields

from .fields import BaseSchema, Datetime


class TokenResponseSchema(BaseSchema):
    token = fields.String(required=True, metadata={"description": "Single use, for one realtime stream."})
    expiresAt = Datetime(required=True)
