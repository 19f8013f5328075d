"""The Activity Log group on the wire."""

import marshmallow as ma
from marshmallow import fields

from .clients import MAX_IDS
from .fields import BaseSchema, Datetime

_ID = fields.String(validate=ma.validate.Length(min=1, max=256))


class DeleteRecordsQuerySchema(BaseSchema):
    endpointId = fields.List(_ID, data_key="endpointId[]", validate=ma.validate.Length(max=MAX_IDS))
    clientId = fields.List(_ID, data_key="clientId[]", validate=ma.validate.Length(max=MAX_IDS))
    endTime = Datetime(metadata={"description": "Delete records up to this time (default: all)."})
    all = fields.Boolean(
        load_default=False,
        metadata={"description": "Required (true) to delete without an endpoint or client filter."},
    )


class DeleteRecordsBodySchema(BaseSchema):
    endpointIds = fields.List(_ID, validate=ma.validate.Length(max=MAX_IDS))
    clientIds = fields.List(_ID, validate=ma.validate.Length(max=MAX_IDS))
    endTime = Datetime()


class DeleteRecordsResponseSchema(BaseSchema):
    deletedCount = fields.Integer(required=True)
