"""The one error body of the API."""

from marshmallow import fields

from .fields import BaseSchema, Boolean, Integer


class ErrorDetailSchema(BaseSchema):
    message = fields.String(required=True, metadata={"description": "Human readable."})
    code = Integer(
        required=True,
        metadata={"description": "Stable code; its first three digits are the HTTP status."},
    )


class ErrorResponseSchema(BaseSchema):
    success = Boolean(required=True, metadata={"enum": [False]})
    error = fields.Nested(ErrorDetailSchema, required=True)
