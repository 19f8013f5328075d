"""The Data Availability group: /v2/data-availability."""

from flask import current_app

import models.privacy.privacy
import models.records.filters
from app.auth import endpoint_limit
from app.extensions import Blueprint
from app.jobs.retention import horizon_ms, statistics_days, statistics_horizon_ms
from models.runtime.clock import now_ms
from models.stores.bound import records
from schemas.privacy import privacy_spans
from schemas.statistics import COLUMNS, DataAvailabilityQuerySchema, DataAvailabilitySchema

blp = Blueprint("data_availability", __name__, url_prefix="/v2/data-availability", description="What data is stored.")


@blp.route("", methods=["GET"])
@blp.arguments(DataAvailabilityQuerySchema, location="query")
@blp.response(200, DataAvailabilitySchema)
def data_availability(query):
    """The oldest and newest record, the retention, the record count and the columns; how far
    back statistics answer, and at what resolution each part of a window is answered."""
    oldest, newest, total = records().availability(models.records.filters.Filters(endpoint_limit=endpoint_limit()))
    now = now_ms()
    since = records().statistics_start()
    return {
        "startTime": oldest,
        "endTime": newest,
        "retentionDays": current_app.config["ANALYTICS_RETENTION_DAYS"],
        "recordCount": total,
        "columns": [
            {"name": c.name, "type": c.type, "filterable": c.filterable, "groupable": c.groupable} for c in COLUMNS
        ],
        "statistics": {
            "retentionDays": statistics_days(),
            "startTime": since,
            "resolutions": resolutions(query.get("startTime"), query.get("endTime", now), now, since),
        },
        "privacy": {
            name: privacy_spans(models.privacy.privacy.ages(settings), now, horizon_ms(now))
            for name, settings in models.privacy.privacy.in_force(endpoint_limit()).items()
        },
    }


def resolutions(start: int | None, end: int, now: int, since: int | None) -> list[dict]:
    """The parts of [start, end] answered to the record and in whole days. Records are kept
    from the records' horizon on (all of them when retention is off); statistics from the
    statistics horizon on; `start` defaults to the oldest of what either keeps."""
    records_from = horizon_ms(now)
    statistics_from = statistics_horizon_ms(now)
    if start is None:
        kept = [t for t in (statistics_from, since, records_from) if t is not None]
        start = min(kept) if kept else end
    spans = []
    if records_from is not None:
        day_start = max(start, statistics_from) if statistics_from is not None else start
        if day_start < min(end + 1, records_from):
            spans.append({"startTime": day_start, "endTime": min(end, records_from - 1), "resolution": "day"})
        start = max(start, records_from)
    if start <= end:
        spans.append({"startTime": start, "endTime": end, "resolution": "record"})
    return spans
