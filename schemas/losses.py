"""A feed's report of the records it lost (POST /v2/ingest/losses) on the wire."""

import marshmallow as ma
from marshmallow import fields

from models.ingest.losses import COUNTED_APART, LOSS_PLACES, MAX_RUN_LENGTH

from .fields import BaseSchema, Integer
from .records import MAX_ID_LENGTH

# One property a place, so that the document names them (a map of any key could not say which).
LossesSchema = BaseSchema.from_dict(
    {
        place: Integer(validate=ma.validate.Range(0, 2**62), metadata={"description": meaning})
        for place, meaning in (LOSS_PLACES | COUNTED_APART).items()
    },
    name="Losses",
)


class LossReportSchema(BaseSchema):
    run = fields.String(
        required=True,
        validate=ma.validate.Length(1, MAX_RUN_LENGTH),
        metadata={"description": "The feed run's own id: each run reports its totals since it started."},
    )
    endpointId = fields.String(required=True, validate=ma.validate.Length(1, MAX_ID_LENGTH))
    losses = fields.Nested(
        LossesSchema,
        required=True,
        metadata={
            "description": "Records lost since the run started, by place; and `unanswered`, queries the "
            "resolver never answered, which lost no record (a metric of their own)."
        },
    )


class LossReportResponseSchema(BaseSchema):
    recorded = Integer(required=True, metadata={"description": "Places whose totals were kept."})
