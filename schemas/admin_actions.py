"""The Admin Actions group on the wire."""

import marshmallow as ma
import orjson
from marshmallow import fields

from .activity_log import MAX_PAGE_SIZE, PaginationDataSchema
from .fields import BaseSchema, Datetime, Integer
from .filters import WindowSchema


class AdminActionQuerySchema(WindowSchema):
    action = fields.String(validate=ma.validate.Length(min=1, max=100))
    search = fields.String(
        validate=ma.validate.Length(min=1, max=256),
        metadata={"description": "Substring of the action or of its metadata."},
    )
    page = Integer(load_default=0, validate=ma.validate.Range(min=0, max=10_000_000))
    pageSize = Integer(load_default=100, validate=ma.validate.Range(min=1, max=MAX_PAGE_SIZE))


class AdminActionLogItemSchema(BaseSchema):
    """Dumped from the store's rows (models.AdminActionRow)."""

    id = Integer(required=True)
    timestamp = Datetime(required=True, attribute="ts")
    action = fields.String(required=True)
    keyId = Integer(
        required=True,
        allow_none=True,
        attribute="key_id",
        metadata={"description": "null: the operator key or the CLI."},
    )
    keyName = fields.String(required=True, attribute="key_name")
    sourceIp = fields.String(required=True, attribute="source_ip")
    metadata = fields.Function(lambda row: orjson.loads(row.metadata), required=True, metadata={"type": "object"})


class GetAdminActionLogResponseSchema(BaseSchema):
    meta = fields.Nested(PaginationDataSchema, required=True)
    actions = fields.List(fields.Nested(AdminActionLogItemSchema), required=True)
