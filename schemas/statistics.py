"""The Statistics and Data Availability groups on the wire."""

import marshmallow as ma
from marshmallow import fields

from catalogue import GROUPABLE, READ_FIELDS

from .fields import BaseSchema, Boolean, Datetime, DatetimeInput, Float, Integer
from .filters import FiltersSchema, OptionalWindowSchema, WindowSchema
from .privacy import PrivacySpanSchema

GROUPS = tuple(column.name for column in GROUPABLE)
# What first-seen lists: the question, and what is derived from it.
NAME_GROUPS = tuple(column.name for column in GROUPABLE if "question" in (column.sql, column.derived_from))
# DataAvailability's columns: the fields the query operations accept, as filters or groups.
COLUMNS = tuple(field for field in READ_FIELDS if field.filterable or field.groupable)
# How finely a part of a window is answered: see ResolutionSpanSchema.
RESOLUTIONS = ("record", "day")
INTERVALS = (60, 300, 900, 3600, 10800, 21600, 43200, 86400, 604800)
_SORT_ORDER = fields.String(load_default="desc", validate=ma.validate.OneOf(["desc", "asc"]))


class CountQuerySchema(FiltersSchema, WindowSchema):
    pass


class CountGroupQuerySchema(FiltersSchema, WindowSchema):
    limit = Integer(load_default=10, validate=ma.validate.Range(min=1, max=1000))
    sortOrder = _SORT_ORDER


class TimeSeriesQuerySchema(FiltersSchema, WindowSchema):
    interval = Integer(
        validate=ma.validate.OneOf(INTERVALS),
        metadata={"description": "Bucket length in seconds; default: the smallest that fits `limit`."},
    )
    limit = Integer(
        load_default=100,
        validate=ma.validate.Range(min=1, max=1000),
        metadata={"description": "Maximum number of buckets."},
    )


class TimeSeriesGroupQuerySchema(TimeSeriesQuerySchema):
    groupLimit = Integer(load_default=10, validate=ma.validate.Range(min=1, max=100))


class TrendQuerySchema(FiltersSchema, OptionalWindowSchema):
    baselineStartTime = DatetimeInput()
    baselineEndTime = DatetimeInput()
    limit = Integer(load_default=10, validate=ma.validate.Range(min=1, max=1000))

    @ma.validates_schema
    def _baseline_start_not_after_end(self, data, **kwargs):
        start, end = data.get("baselineStartTime"), data.get("baselineEndTime")
        if start is not None and end is not None and start > end:
            raise ma.ValidationError("baselineStartTime is after baselineEndTime.", field_name="baselineStartTime")


class FirstSeenQuerySchema(FiltersSchema, OptionalWindowSchema):
    limit = Integer(load_default=100, validate=ma.validate.Range(min=1, max=1000))


class LatencyQuerySchema(FiltersSchema, WindowSchema):
    pass


class LatencyGroupQuerySchema(CountGroupQuerySchema):
    pass


class _WindowResponse(BaseSchema):
    startTime = Datetime(required=True)
    endTime = Datetime(required=True)


class CountResponseSchema(_WindowResponse):
    count = Integer(required=True)


class GroupCountSchema(BaseSchema):
    value = fields.String(required=True)
    count = Integer(required=True)


class CountGroupResponseSchema(_WindowResponse):
    counts = fields.List(fields.Nested(GroupCountSchema), required=True)


class TimeSeriesPointSchema(BaseSchema):
    time = Datetime(required=True)
    count = Integer(required=True)


class TimeSeriesResponseSchema(_WindowResponse):
    interval = Integer(required=True, metadata={"description": "Bucket length in seconds."})
    queries = fields.List(fields.Nested(TimeSeriesPointSchema), required=True)


class TimeSeriesGroupPointSchema(BaseSchema):
    time = Datetime(required=True)
    count = fields.Dict(keys=fields.String(), values=Integer(), required=True)


class TimeSeriesGroupResponseSchema(_WindowResponse):
    interval = Integer(required=True)
    queries = fields.List(fields.Nested(TimeSeriesGroupPointSchema), required=True)


class _LatencySummary(BaseSchema):
    count = Integer(required=True, metadata={"description": "Records with a responseTimeMs."})
    meanMs = Float(required=True, allow_none=True)
    p50Ms = Float(required=True, allow_none=True, metadata={"description": "Median (nearest rank)."})
    p95Ms = Float(required=True, allow_none=True, metadata={"description": "95th percentile (nearest rank)."})
    maxMs = Float(required=True, allow_none=True)


class LatencyResponseSchema(_WindowResponse, _LatencySummary):
    pass


class GroupLatencySchema(_LatencySummary):
    value = fields.String(required=True)


class LatencyGroupResponseSchema(_WindowResponse):
    latencies = fields.List(fields.Nested(GroupLatencySchema), required=True)


def latency_summary(row) -> dict:
    """The wire form of a models.LatencyRow."""
    return {"count": row.count, "meanMs": row.mean, "p50Ms": row.p50, "p95Ms": row.p95, "maxMs": row.max}


class FirstSeenItemSchema(BaseSchema):
    value = fields.String(required=True)
    firstSeen = Datetime(required=True, metadata={"description": "Its first appearance in the scope."})
    count = Integer(required=True, metadata={"description": "Its records in the window matching the filters."})


class FirstSeenResponseSchema(_WindowResponse):
    names = fields.List(fields.Nested(FirstSeenItemSchema), required=True)


class TrendItemSchema(BaseSchema):
    value = fields.String(required=True)
    count = Integer(required=True)
    baselineCount = Integer(required=True)
    change = Float(required=True, allow_none=True)


class TrendResponseSchema(_WindowResponse):
    baselineStartTime = Datetime(required=True)
    baselineEndTime = Datetime(required=True)
    trends = fields.List(fields.Nested(TrendItemSchema), required=True)


class ColumnSchema(BaseSchema):
    name = fields.String(required=True)
    type = fields.String(required=True, metadata={"enum": ["string", "integer", "boolean"]})
    filterable = Boolean(required=True)
    groupable = Boolean(required=True)


class DataAvailabilityQuerySchema(OptionalWindowSchema):
    pass


class ResolutionSpanSchema(BaseSchema):
    startTime = Datetime(required=True)
    endTime = Datetime(required=True)
    resolution = fields.String(
        required=True,
        validate=ma.validate.OneOf(RESOLUTIONS),
        metadata={
            "description": "record: every statistic, the activity log and CSV answer to the millisecond; "
            "day: statistics answer from rollups in whole UTC days (filters and groups on endpoints, "
            "action, clientId and question), the activity log has nothing."
        },
    )


class StatisticsAvailabilitySchema(BaseSchema):
    retentionDays = Integer(required=True, metadata={"description": "How long statistics are kept (0: forever)."})
    startTime = Datetime(
        required=True, allow_none=True, metadata={"description": "Start of the oldest day the statistics count."}
    )
    resolutions = fields.List(
        fields.Nested(ResolutionSpanSchema),
        required=True,
        metadata={"description": "The parts of the asked window (default: all that is kept) and their resolution."},
    )


class DataAvailabilitySchema(BaseSchema):
    startTime = Datetime(required=True, allow_none=True)
    endTime = Datetime(required=True, allow_none=True)
    retentionDays = Integer(required=True)
    recordCount = Integer(required=True)
    columns = fields.List(fields.Nested(ColumnSchema), required=True)
    statistics = fields.Nested(StatisticsAvailabilitySchema, required=True)
    privacy = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.Nested(PrivacySpanSchema)),
        required=True,
        metadata={
            "description": "What detail the records keep, by age: per endpoint with settings of its own (and "
            "'_default' for the others; for a key limited to endpoints, each of its endpoints), newest period "
            "first, the oldest reaching back to the records' horizon (startTime null: retention off)."
        },
    )
