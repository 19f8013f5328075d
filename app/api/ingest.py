"""POST /v2/ingest: records in as a JSON array, {"records": [...]}, or NDJSON."""

from flask import current_app, g, request

import models.engine.database
import models.ingest.losses
import models.stores.bound
from app import metrics
from app.auth import check_endpoints
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint
from app.jobs.retention import past_horizon
from app.requests import parse_json
from models.runtime.clock import now_ms
from models.stores.interface import AlreadyStored
from schemas import record_batch
from schemas.losses import LossReportResponseSchema, LossReportSchema
from schemas.records import QueryDataSchema, RecordError, parse_records

blp = Blueprint("ingest", __name__, url_prefix="/v2/ingest", description="Feeding records in.")

MAX_IDEMPOTENCY_KEY = 200
NDJSON_TYPES = (
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/json-seq",
)

_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "oneOf": [
                    {"type": "array", "items": QueryDataSchema},
                    {
                        "type": "object",
                        "required": ["records"],
                        "properties": {"records": {"type": "array", "items": QueryDataSchema}},
                    },
                ]
            }
        },
        "application/x-ndjson": {"schema": {"type": "string", "description": "One QueryData JSON object per line."}},
    },
}


@blp.route("", methods=["POST"])
@blp.doc(
    requestBody=_BODY,
    responses={
        "200": {
            "description": "Every record is stored.",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["accepted", "pastRetention"],
                        "properties": {
                            "accepted": {"type": "integer"},
                            "pastRetention": {
                                "type": "integer",
                                "description": "Accepted records already older than the records' horizon "
                                "(ANALYTICS_RETENTION_DAYS): counted in the statistics, which keep them to the "
                                "statistics horizon, and stored as records until the next retention run.",
                            },
                        },
                    }
                }
            },
        }
    },
)
def ingest():
    """Store a batch of records, all or nothing."""
    with models.engine.database.storing():  # decoding and storing: the counting's writes let it go first
        return _ingest()


def _ingest():
    raw = request.get_data()
    ndjson = request.mimetype in NDJSON_TYPES
    now = now_ms()
    decoded = record_batch.decode(raw, ndjson)
    records = None
    if decoded is not None:
        _check_batch(len(decoded), record_batch.endpoints(decoded))
        records = record_batch.records(decoded, now)
    if records is None:  # the reference path, which says what is wrong with the batch
        records = _validated(raw, ndjson, now)
    past = past_horizon(records, now)
    key = _idempotency_key()
    try:
        accepted = (
            models.stores.bound.records().store_records(records)
            if key is None
            else models.stores.bound.records().store_once(records, key, now)
        )
    except AlreadyStored as stored:
        return {"accepted": stored.accepted, "pastRetention": past}, 200, {"Idempotency-Replayed": "true"}
    metrics.count_stored(records, past)
    return {"accepted": accepted, "pastRetention": past}


@blp.route("/losses", methods=["POST"])
@blp.arguments(LossReportSchema, location="json")
@blp.response(200, LossReportResponseSchema)
def report_losses(report):
    """A feed's totals of the records it lost, by place, since its run started (summed over
    runs in /metrics, dns_analytics_feed_lost_records_total)."""
    check_endpoints({report["endpointId"]})
    models.ingest.losses.report(report["run"], report["endpointId"], report["losses"], now_ms())
    return {"recorded": len(report["losses"])}


def _validated(raw: bytes, ndjson: bool, now: int) -> list[tuple]:
    """The batch's records by the reference validator; a 400 naming the first fault."""
    if ndjson:
        items = [
            parse_json(line, f"Line {number}") for number, line in enumerate(raw.split(b"\n"), start=1) if line.strip()
        ]
    else:
        body = parse_json(raw)
        items = body.get("records") if isinstance(body, dict) else body
        if not isinstance(items, list):
            raise ApiError(
                ErrorCode.MALFORMED_BODY,
                'The body must be a JSON array of records, {"records": [...]}, or NDJSON.',
            )
    _check_batch(
        len(items), {e for item in items if isinstance(item, dict) and isinstance(e := item.get("endpointId"), str)}
    )
    try:
        return parse_records(items, now)
    except RecordError as exc:
        raise ApiError(
            ErrorCode.INVALID_RECORD,
            f"Record {exc.index}: field '{exc.field}' {exc.message}. Nothing was stored.",
        ) from None


def _check_batch(size: int, endpoints: set[str]):
    """The batch's size, then the key's endpoint limit: before any record is validated (that is
    the costly part, and its memo keeps what it saw), a key must not make the service validate
    what it may not store anyway."""
    limit = current_app.config["ANALYTICS_MAX_BATCH"]
    if size > limit:
        raise ApiError(
            ErrorCode.BATCH_TOO_LARGE,
            f"A batch holds at most {limit} records (ANALYTICS_MAX_BATCH); got {size}.",
        )
    check_endpoints(endpoints)


def _idempotency_key() -> str | None:
    """The batch's Idempotency-Key header, scoped by the API key that sent it (its id; the
    operator key has none) (None: no header)."""
    value = request.headers.get("Idempotency-Key")
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY or not value.isprintable():
        raise ApiError(
            ErrorCode.INVALID_PARAMETER,
            f"Invalid 'Idempotency-Key': 1 to {MAX_IDEMPOTENCY_KEY} printable characters.",
        )
    return f"{g.principal.key_id or 'operator'}\n{value}"  # per key: names can be reused
