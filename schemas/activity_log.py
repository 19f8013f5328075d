"""The Activity Log group on the wire."""

import marshmallow as ma
from marshmallow import fields

from .clients import MAX_IDS
from .fields import BaseSchema, Boolean, DatetimeInput, Integer
from .filters import FiltersSchema, WindowSchema
from .records import QueryDataSchema

MAX_PAGE_SIZE = 500
_SORT_ORDER = fields.String(
    load_default="desc",
    validate=ma.validate.OneOf(["desc", "asc"]),
    metadata={"description": "desc: newest first (default); asc: oldest first."},
)


class ActivityLogQuerySchema(FiltersSchema, WindowSchema):
    page = Integer(load_default=0, validate=ma.validate.Range(min=0, max=10_000_000))
    pageSize = Integer(load_default=100, validate=ma.validate.Range(min=1, max=MAX_PAGE_SIZE))
    sortOrder = _SORT_ORDER


class CsvQuerySchema(FiltersSchema, WindowSchema):
    sortOrder = _SORT_ORDER


class RealtimeQuerySchema(FiltersSchema):
    authToken = fields.String(
        metadata={"description": "A token from GET /v2/auth/token (or send the Authorization header)."}
    )
    lastEventId = fields.String(
        metadata={"description": "Resume after this event id (as the Last-Event-ID header, which wins)."}
    )


class PaginationDataSchema(BaseSchema):
    page = Integer(required=True)
    pageSize = Integer(required=True)


class HistoricalQueriesResponseSchema(BaseSchema):
    meta = fields.Nested(PaginationDataSchema, required=True)
    queries = fields.List(fields.Nested(QueryDataSchema), required=True)


_ID = fields.String(validate=ma.validate.Length(min=1, max=256))


class DeleteRecordsQuerySchema(BaseSchema):
    endpointId = fields.List(_ID, data_key="endpointId[]", validate=ma.validate.Length(max=MAX_IDS))
    clientId = fields.List(_ID, data_key="clientId[]", validate=ma.validate.Length(max=MAX_IDS))
    endTime = DatetimeInput(metadata={"description": "Delete records up to this time (default: all)."})
    all = Boolean(
        load_default=False,
        metadata={"description": "Required (true) to delete without an endpoint or client filter."},
    )


class DeleteRecordsBodySchema(BaseSchema):
    endpointIds = fields.List(_ID, validate=ma.validate.Length(max=MAX_IDS))
    clientIds = fields.List(_ID, validate=ma.validate.Length(max=MAX_IDS))
    endTime = DatetimeInput()


class DeleteRecordsResponseSchema(BaseSchema):
    deletedCount = Integer(required=True)
