"""The Activity Log group: /v2/activity-log."""

import models
from schemas.activity_log import (
    DeleteRecordsBodySchema,
    DeleteRecordsQuerySchema,
    DeleteRecordsResponseSchema,
)

from .errors import ApiError, ErrorCode
from .extensions import Blueprint

blp = Blueprint(
    "activity_log", __name__, url_prefix="/v2/activity-log", description="The log of DNS queries."
)

# Records deleted per transaction: ingestion waits at most one batch for its turn.
DELETE_BATCH = 10_000


@blp.route("", methods=["DELETE"])
@blp.arguments(DeleteRecordsQuerySchema, location="query")
@blp.arguments(DeleteRecordsBodySchema, location="json")
@blp.response(200, DeleteRecordsResponseSchema)
def delete_records(query, body):
    """Delete records of endpoints and clients (or all, with all=true) up to endTime."""
    endpoints = (query.get("endpointId") or []) + (body.get("endpointIds") or [])
    client_ids = (query.get("clientId") or []) + (body.get("clientIds") or [])
    end_ms = query.get("endTime", body.get("endTime"))
    if not endpoints and not client_ids and not query["all"]:
        raise ApiError(
            ErrorCode.CONFIRMATION_REQUIRED,
            "Deleting the records of every endpoint needs all=true (or an endpointId/clientId filter).",
        )
    deleted = models.delete_records(endpoints, client_ids, end_ms, batch_size=DELETE_BATCH)
    return {"deletedCount": deleted}
