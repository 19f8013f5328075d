"""The Access Log group on the wire."""

import marshmallow as ma
import orjson
from marshmallow import fields

from .activity_log import MAX_PAGE_SIZE, PaginationDataSchema
from .fields import BaseSchema, Datetime, Integer
from .filters import WindowSchema

KINDS = ("activity-log", "activity-log/csv", "activity-log/realtime")


class AccessLogQuerySchema(WindowSchema):
    kind = fields.String(validate=ma.validate.OneOf(KINDS), metadata={"description": "Only reads of this kind."})
    keyName = fields.String(
        validate=ma.validate.Length(min=1, max=256), metadata={"description": "Only reads by the key of this name."}
    )
    page = Integer(load_default=0, validate=ma.validate.Range(min=0, max=10_000_000))
    pageSize = Integer(load_default=100, validate=ma.validate.Range(min=1, max=MAX_PAGE_SIZE))


class AccessLogItemSchema(BaseSchema):
    """Dumped from the store's rows (models.AccessRow)."""

    id = Integer(required=True)
    timestamp = Datetime(required=True, attribute="ts", metadata={"description": "When the read began."})
    kind = fields.String(required=True, metadata={"description": "|".join(KINDS)})
    keyId = Integer(
        required=True, allow_none=True, attribute="key_id", metadata={"description": "null: the operator key."}
    )
    keyName = fields.String(required=True, attribute="key_name")
    sourceIp = fields.String(required=True, attribute="source_ip")
    query = fields.Function(
        lambda row: orjson.loads(row.query),
        required=True,
        metadata={"type": "object", "description": "The request's query parameters (a stream's token left out)."},
    )
    startTime = Datetime(
        required=True, allow_none=True, attribute="start_ms", metadata={"description": "The window read."}
    )
    endTime = Datetime(required=True, allow_none=True, attribute="end_ms")
    rows = Integer(
        required=True, allow_none=True, metadata={"description": "Records sent; null while a stream is open."}
    )
    bytes = Integer(required=True, allow_none=True, metadata={"description": "Body bytes sent."})


class GetAccessLogResponseSchema(BaseSchema):
    meta = fields.Nested(PaginationDataSchema, required=True)
    reads = fields.List(fields.Nested(AccessLogItemSchema), required=True)
