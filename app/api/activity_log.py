"""The Activity Log group: /v2/activity-log, its CSV export and its realtime stream."""

from flask import Response, current_app, request

import models.engine.database
from app.audit import Read
from app.auth import accepts_stream_token, endpoint_limit
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint, prebuilt
from models.stores.bound import records
from models.stores.interface import ROW_FIELDS
from schemas.activity_log import (
    ActivityLogQuerySchema,
    CsvQuerySchema,
    DeleteRecordsBodySchema,
    DeleteRecordsQuerySchema,
    DeleteRecordsResponseSchema,
    HistoricalQueriesResponseSchema,
    RealtimeQuerySchema,
)
from schemas.csv_format import CsvEncoder
from schemas.datetimes import format_ms
from schemas.filters import filters_from
from schemas.records import query_data

from . import admin_actions, realtime

blp = Blueprint("activity_log", __name__, url_prefix="/v2/activity-log", description="The log of DNS queries.")


@blp.route("", methods=["GET"])
@blp.arguments(ActivityLogQuerySchema, location="query")
@blp.response(200, HistoricalQueriesResponseSchema)
def list_records(query):
    """One page of the records in the window matching the filters."""
    filters = filters_from(query, endpoint_limit())
    read = Read("activity-log", filters, stream=False)
    queries = records().page_records(filters, query["page"], query["pageSize"], descending=query["sortOrder"] == "desc")
    response = prebuilt(
        {"meta": {"page": query["page"], "pageSize": query["pageSize"]}, "queries": query_data(queries)}
    )
    read.rows, read.bytes = len(queries), len(response.get_data())
    response.call_on_close(read.close)
    return response


@blp.route("", methods=["DELETE"])
@blp.arguments(DeleteRecordsQuerySchema, location="query")
@blp.arguments(DeleteRecordsBodySchema, location="json", required=False)
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
    entry = admin_actions.BatchedEntry("activity_log.delete", endpoints)
    deleted = records().delete_records(
        endpoints,
        client_ids,
        end_ms,
        batch_size=current_app.config["ANALYTICS_DELETE_BATCH"],
        endpoint_limit=endpoint_limit(),
        after_batch=lambda so_far: entry({"deletedCount": so_far}),
    )
    return {"deletedCount": deleted}


@blp.route("/csv", methods=["GET"])
@blp.arguments(CsvQuerySchema, location="query")
@blp.doc(responses={"200": {"description": "The records as CSV.", "content": {"text/csv": {}}}})
def export_csv(query):
    """Every record of the window matching the filters, as CSV (streamed)."""
    filters = filters_from(query, endpoint_limit())
    descending = query["sortOrder"] == "desc"
    name = f"activity-log_{format_ms(filters.start_ms)}_{format_ms(filters.end_ms)}.csv".replace(":", "-")

    def lines():
        encoder = CsvEncoder(ROW_FIELDS, records().value_texts)
        yield encoder.header()
        with models.engine.database.connection():
            written = records().csv_lines(filters, descending)
            if written is not None:
                yield from written
                return
            for rows in records().iter_raw_batches(filters, descending):
                yield encoder.lines(rows)

    read = Read("activity-log/csv", filters, stream=True)
    response = Response(
        read.counted(lines(), _csv_rows, header=True),
        mimetype="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
    response.call_on_close(read.close)
    return response


def _csv_rows(chunk: str | bytes) -> int:
    return chunk.count(b"\r\n" if isinstance(chunk, bytes) else "\r\n")


@blp.route("/realtime", methods=["GET"])
@blp.arguments(RealtimeQuerySchema, location="query")
@blp.doc(
    responses={"200": {"description": "Server-sent events, one per record.", "content": {"text/event-stream": {}}}}
)
@accepts_stream_token
def stream(query):
    """Records as they are ingested, as server-sent events (authenticate with authToken)."""
    filters = filters_from(query, endpoint_limit(), window=False)
    last_id = request.headers.get("Last-Event-ID") or query.get("lastEventId")
    if last_id is not None:
        try:
            last_id = int(last_id)
        except ValueError:
            last_id = -1
        if not 0 <= last_id < 2**63:
            raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'Last-Event-ID': not an event id.")
    config = current_app.config
    return realtime.event_stream(
        filters,
        last_id,
        config["ANALYTICS_MAX_STREAMS"],
        config["ANALYTICS_MAX_STREAMS_PER_KEY"],
        config["ANALYTICS_STREAM_BACKLOG"],
    )
