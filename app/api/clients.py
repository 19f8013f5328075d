"""The Clients group: /v2/client and /v2/client/alias/{endpointId}/{clientId}."""

import marshmallow as ma
from flask import current_app

import models.clients.clients
import models.engine.database
from app.auth import endpoint_limit
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint, prebuilt, validation_error
from app.jobs import alerts
from app.requests import json_body
from models.runtime.clock import request_now_ms
from models.stores.bound import records
from schemas.clients import (
    AliasRequestSchema,
    ClientActivitySchema,
    ClientQuerySchema,
    DeleteClientRequestSchema,
    DeleteClientResponseSchema,
    GetClientResponseSchema,
    LoggingRequestSchema,
    client_activity,
    client_items,
)
from schemas.errors import ErrorResponseSchema

from . import admin_actions

blp = Blueprint("clients", __name__, url_prefix="/v2/client", description="Endpoints and their clients.")

_ALIAS_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                "oneOf": [
                    AliasRequestSchema,
                    {"type": "string", "minLength": 1, "maxLength": 64},
                ]
            }
        }
    },
}


@blp.route("", methods=["GET"])
@blp.arguments(ClientQuerySchema, location="query")
@blp.response(200, GetClientResponseSchema)
def list_clients(query):
    """List endpoints and their clients, with last-activity times."""
    endpoints, rows = records().list_clients(query.get("endpointId"), query.get("clientId"), endpoint_limit())
    return prebuilt(client_items(endpoints, rows))


@blp.route("", methods=["DELETE"])
@blp.arguments(DeleteClientRequestSchema)
@blp.response(200, DeleteClientResponseSchema)
def delete_clients(body):
    """Delete clients with no activity after endTime, and their records up to it."""
    endpoints, client_ids = body.get("endpointIds") or [], body.get("clientIds") or []
    if not endpoints and not client_ids and "endTime" not in body:
        raise ApiError(
            ErrorCode.CONFIRMATION_REQUIRED,
            "Deleting every client needs an explicit 'endTime' (or endpointIds/clientIds).",
        )
    end_ms, limit = body.get("endTime", request_now_ms()), endpoint_limit()
    entry = admin_actions.BatchedEntry("client.delete", endpoints)
    purged = records().purge_records(
        endpoints,
        client_ids,
        end_ms,
        limit,
        batch_size=current_app.config["ANALYTICS_DELETE_BATCH"],
        after_batch=lambda so_far: entry({"deletedRecords": so_far}),
    )
    with models.engine.database.write_transaction():
        deleted, left = records().delete_clients(endpoints, client_ids, end_ms, limit)
        alerts.forget_clients(deleted)
        result = {
            "deletedCount": len(deleted),
            "deletedClients": [{"endpointId": e, "clientId": c} for e, c in deleted],
        }
        entry({**result, "deletedRecords": purged + left})
    return result


@blp.route("/alias/<endpointId>/<clientId>", methods=["PUT"])
@blp.doc(requestBody=_ALIAS_BODY)
@blp.response(200, ClientActivitySchema)
@blp.alt_response(404, schema=ErrorResponseSchema, description="No such client.")
def set_alias(endpointId, clientId):
    """Set a client's alias."""
    body = json_body()
    if isinstance(body, str):
        body = {"alias": body}
    if not isinstance(body, dict):
        raise ApiError(ErrorCode.INVALID_PARAMETER, 'The body must be {"alias": "..."} or a string.')
    schema = AliasRequestSchema()
    try:
        alias = schema.load(body)["alias"]
    except ma.ValidationError as exc:
        if "alias" not in exc.messages:  # a field besides it
            raise validation_error(exc, schema) from None
        code = ErrorCode.MISSING_FIELD if "alias" not in body else ErrorCode.INVALID_PARAMETER
        raise ApiError(code, f"Invalid 'alias': {exc.messages['alias'][0]}") from None
    return _change_alias(endpointId, clientId, alias)


@blp.route("/alias/<endpointId>/<clientId>", methods=["DELETE"])
@blp.response(200, ClientActivitySchema)
@blp.alt_response(404, schema=ErrorResponseSchema, description="No such client.")
def clear_alias(endpointId, clientId):
    """Clear a client's alias."""
    return _change_alias(endpointId, clientId, "")


@blp.route("/logging/<endpointId>/<clientId>", methods=["PUT"])
@blp.arguments(LoggingRequestSchema, location="json")
@blp.response(200, ClientActivitySchema)
def set_logging(body, endpointId, clientId):  # noqa: N803 (the API's names)
    """Mark a client as not logged (its records go, and none of its queries is stored from
    then on) or as logged again; a client not seen yet gets its entry, so it can be marked
    before its first query."""
    for name, value in (("endpointId", endpointId), ("clientId", clientId)):
        if len(value) > 256:
            raise ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid '{name}': 1 to 256 characters.")
    with models.engine.database.write_transaction():
        entry, deleted = records().set_logged(endpointId, clientId, body["logged"])
        if not body["logged"]:
            alerts.forget_clients([(endpointId, clientId)])
        admin_actions.record("client.logging.set", {"logged": body["logged"], "deletedCount": deleted}, [endpointId])
    return prebuilt(client_activity(entry))


def _change_alias(endpoint: str, client_id: str, alias: str) -> dict:
    with models.engine.database.write_transaction():
        if not models.clients.clients.set_alias(endpoint, client_id, alias):
            raise ApiError(ErrorCode.CLIENT_NOT_FOUND, "No such client for this endpoint.")
        (entry,) = records().list_clients(endpoint, [client_id])[1]
        admin_actions.record("client.alias.set" if alias else "client.alias.clear", {"alias": alias}, [endpoint])
    return prebuilt(client_activity(entry))
