"""The Admin Actions group: /v2/admin-action, and writing its entries for changes made through
the API (inside the change's transaction, so an entry exists exactly when its change is
committed)."""

from flask import g, request

import models.access.admin_actions
from app.auth import actor, endpoint_limit, requires
from app.errors import ApiError
from app.extensions import Blueprint
from app.requests import checked_json
from models.runtime.clock import now_ms, request_now_ms
from schemas.admin_actions import AdminActionQuerySchema, GetAdminActionLogResponseSchema

blp = Blueprint("admin_actions", __name__, url_prefix="/v2/admin-action", description="The log of changes.")


@blp.route("", methods=["GET"])
@blp.arguments(AdminActionQuerySchema, location="query")
@blp.response(200, GetAdminActionLogResponseSchema)
@requires("admin")
def list_actions(query):
    """Changes made through the API and the command line, newest first."""
    actions = models.access.admin_actions.list_actions(
        query["startTime"],
        query.get("endTime", request_now_ms()),
        action=query.get("action"),
        search=query.get("search"),
        endpoint_limit=endpoint_limit(),
        page=query["page"],
        page_size=query["pageSize"],
    )
    return {"meta": {"page": query["page"], "pageSize": query["pageSize"]}, "actions": actions}


def request_metadata(result: dict, redact=None) -> dict:
    """The request's path parameters, query parameters and JSON body (through `redact`, for a
    body that carries secrets), and the result."""
    # The body as the view read it, whatever the Content-Type said (an alias sent as text/plain
    # is set all the same, so its entry shows it too).
    try:
        body = checked_json(request.get_data(cache=True)) if request.get_data(cache=True).strip() else None
    except ApiError:
        body = None
    if redact is not None and body is not None:
        body = redact(body)
    return {
        "path": dict(request.view_args or {}),
        "query": {name: values if len(values) > 1 else values[0] for name, values in request.args.lists()},
        "body": body,
        "result": result,
    }


def touched_endpoints(named) -> list | None:
    """The endpoints a change concerns: those the request named, else the key's limit, else
    None (a change across all endpoints, shown only to keys without an endpoint limit)."""
    if named:
        return sorted(set(named))
    limit = g.principal.endpoints
    return None if limit is None else sorted(limit)


def record(action: str, result: dict, named=None, redact=None) -> int:
    return models.access.admin_actions.record_action(
        action, actor(), request_metadata(result, redact), touched_endpoints(named), now_ms()
    )


class BatchedEntry:
    """One entry for a change committed in several transactions: created in the first,
    brought up to date in each later one."""

    def __init__(self, action: str, named=None):
        self.action, self.named, self.entry = action, named, None

    def __call__(self, result: dict):
        if self.entry is None:
            self.entry = record(self.action, result, self.named)
        else:
            models.access.admin_actions.update_metadata(self.entry, request_metadata(result))
