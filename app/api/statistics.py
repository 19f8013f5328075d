"""The Statistics group: /v2/statistic/count, /timeseries, /trend, /latency and /first-seen."""

from app.auth import endpoint_limit
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint
from catalogue import FIELDS_BY_NAME
from models.runtime.clock import request_now_ms
from models.stores.bound import records
from schemas.datetimes import MIN_MS
from schemas.filters import filters_from
from schemas.statistics import (
    GROUPS,
    INTERVALS,
    NAME_GROUPS,
    CountGroupQuerySchema,
    CountGroupResponseSchema,
    CountQuerySchema,
    CountResponseSchema,
    FirstSeenQuerySchema,
    FirstSeenResponseSchema,
    LatencyGroupQuerySchema,
    LatencyGroupResponseSchema,
    LatencyQuerySchema,
    LatencyResponseSchema,
    TimeSeriesGroupQuerySchema,
    TimeSeriesGroupResponseSchema,
    TimeSeriesQuerySchema,
    TimeSeriesResponseSchema,
    TrendQuerySchema,
    TrendResponseSchema,
    latency_summary,
)

blp = Blueprint("statistics", __name__, url_prefix="/v2/statistic", description="Counts, time series and trends.")

DAY_MS = 86_400_000
_GROUP_PARAMETER = [
    {"in": "path", "name": "group", "required": True, "schema": {"type": "string", "enum": list(GROUPS)}}
]


def _column(group: str):
    if group not in GROUPS:
        raise ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid 'group': must be one of {', '.join(GROUPS)}.")
    return FIELDS_BY_NAME[group].sql


@blp.route("/count", methods=["GET"])
@blp.arguments(CountQuerySchema, location="query")
@blp.response(200, CountResponseSchema)
def count(query):
    """The number of records in the window matching the filters."""
    filters = filters_from(query, endpoint_limit())
    return {
        "startTime": filters.start_ms,
        "endTime": filters.end_ms,
        "count": records().count(filters),
    }


@blp.route("/count/<group>", methods=["GET"], parameters=_GROUP_PARAMETER)
@blp.arguments(CountGroupQuerySchema, location="query")
@blp.response(200, CountGroupResponseSchema)
def count_group(query, group):
    """Record counts per value of a column, the most (or least) frequent first."""
    column = _column(group)
    filters = filters_from(query, endpoint_limit())
    top = records().top(filters, column, query["limit"], query["sortOrder"] == "desc")
    return {
        "startTime": filters.start_ms,
        "endTime": filters.end_ms,
        "counts": [{"value": value, "count": n} for value, n in top],
    }


@blp.route("/latency", methods=["GET"])
@blp.arguments(LatencyQuerySchema, location="query")
@blp.response(200, LatencyResponseSchema)
def latency(query):
    """Response times of the records in the window that have one: mean, median, p95, max."""
    filters = filters_from(query, endpoint_limit())
    (row,) = records().latency(filters)
    return {"startTime": filters.start_ms, "endTime": filters.end_ms, **latency_summary(row)}


@blp.route("/latency/<group>", methods=["GET"], parameters=_GROUP_PARAMETER)
@blp.arguments(LatencyGroupQuerySchema, location="query")
@blp.response(200, LatencyGroupResponseSchema)
def latency_group(query, group):
    """Response times per value of a column, for the values with the most (or fewest) of them."""
    column = _column(group)
    filters = filters_from(query, endpoint_limit())
    rows = records().latency(filters, column, query["limit"], query["sortOrder"] == "desc")
    return {
        "startTime": filters.start_ms,
        "endTime": filters.end_ms,
        "latencies": [{"value": row.value, **latency_summary(row)} for row in rows],
    }


def _interval_ms(query, start_ms: int, end_ms: int) -> int:
    """The bucket length: the requested one, else the smallest that keeps within `limit`."""

    def bucket_count(seconds):
        size = seconds * 1000
        return end_ms // size - start_ms // size + 1

    limit = query["limit"]
    if "interval" in query:
        if bucket_count(query["interval"]) > limit:
            raise ApiError(
                ErrorCode.INVALID_PARAMETER,
                f"Invalid 'interval': {bucket_count(query['interval'])} buckets exceed limit={limit}.",
            )
        return query["interval"] * 1000
    for seconds in INTERVALS:
        if bucket_count(seconds) <= limit:
            return seconds * 1000
    raise ApiError(
        ErrorCode.INVALID_PARAMETER,
        f"Invalid 'limit': the window needs more than {limit} buckets even at one week each.",
    )


def _bucket_starts(start_ms: int, end_ms: int, interval_ms: int) -> range:
    first = start_ms - start_ms % interval_ms
    if first < MIN_MS:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'startTime': its bucket would begin before the year 1.")
    return range(first, end_ms + 1, interval_ms)


@blp.route("/timeseries", methods=["GET"])
@blp.arguments(TimeSeriesQuerySchema, location="query")
@blp.response(200, TimeSeriesResponseSchema)
def timeseries(query):
    """Record counts per time bucket over the window, empty buckets included."""
    return _series(query, records().series, lambda found: found or 0)


@blp.route("/timeseries/<group>", methods=["GET"], parameters=_GROUP_PARAMETER)
@blp.arguments(TimeSeriesGroupQuerySchema, location="query")
@blp.response(200, TimeSeriesGroupResponseSchema)
def timeseries_group(query, group):
    """Per time bucket, the record counts of the window's top values of a column."""
    column = _column(group)
    values = []

    def count(filters, interval):
        top, counts = records().top_series(filters, interval, column, query["groupLimit"])
        values.extend(top)
        return counts

    return _series(query, count, lambda found: {value: (found or {}).get(value, 0) for value in values})


def _series(query, count, point):
    """A time series answer: `count(filters, interval)` gives what each bucket holds, `point`
    makes a bucket's count (also for empty buckets) from it."""
    filters = filters_from(query, endpoint_limit())
    interval = _interval_ms(query, filters.start_ms, filters.end_ms)
    counts = count(filters, interval)
    return {
        "startTime": filters.start_ms,
        "endTime": filters.end_ms,
        "interval": interval // 1000,
        "queries": [
            {"time": start, "count": point(counts.get(start))}
            for start in _bucket_starts(filters.start_ms, filters.end_ms, interval)
        ],
    }


@blp.route(
    "/first-seen/<group>",
    methods=["GET"],
    parameters=[{**_GROUP_PARAMETER[0], "schema": {"type": "string", "enum": list(NAME_GROUPS)}}],
)
@blp.arguments(FirstSeenQuerySchema, location="query")
@blp.response(200, FirstSeenResponseSchema)
def first_seen(query, group):
    """Names (questions or registrable domains) first seen in the window, newest first."""
    if group not in NAME_GROUPS:
        raise ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid 'group': must be one of {', '.join(NAME_GROUPS)}.")
    end = query.get("endTime", request_now_ms())
    start = query.get("startTime", end - DAY_MS)
    if start > end:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'startTime': startTime is after endTime.")
    filters = filters_from({**query, "startTime": start, "endTime": end}, endpoint_limit())
    found = records().newly_seen(filters, FIELDS_BY_NAME[group].sql, query["limit"])
    return {
        "startTime": start,
        "endTime": end,
        "names": [{"value": value, "firstSeen": first, "count": n} for value, first, n in found],
    }


@blp.route("/trend/<group>", methods=["GET"], parameters=_GROUP_PARAMETER)
@blp.arguments(TrendQuerySchema, location="query")
@blp.response(200, TrendResponseSchema)
def trend(query, group):
    """The top values of a column in the window against a baseline window before it."""
    column = _column(group)
    end = query.get("endTime", request_now_ms())
    start = query.get("startTime", end - DAY_MS)
    if start > end:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'startTime': startTime is after endTime.")
    baseline_end = query.get("baselineEndTime", start - 1)
    baseline_start = query.get("baselineStartTime", baseline_end - (end - start))
    if baseline_start > baseline_end:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'baselineStartTime': it is after baselineEndTime.")
    if min(start, baseline_start) < MIN_MS:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'startTime': the windows would begin before the year 1.")
    filters = filters_from({**query, "startTime": start, "endTime": end}, endpoint_limit())
    baseline_filters = filters_from({**query, "startTime": baseline_start, "endTime": baseline_end}, endpoint_limit())
    trends = [
        {"value": value, "count": n, "baselineCount": before, "change": (n - before) / before if before else None}
        for value, n, before in records().trend(filters, baseline_filters, column, query["limit"])
    ]
    return {
        "startTime": start,
        "endTime": end,
        "baselineStartTime": baseline_start,
        "baselineEndTime": baseline_end,
        "trends": trends,
    }
