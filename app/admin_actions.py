"""The Admin Actions group: /v2/admin-action."""

import models
from schemas.admin_actions import AdminActionQuerySchema, GetAdminActionLogResponseSchema
from schemas.datetimes import now_ms

from .auth import endpoint_limit, requires
from .extensions import Blueprint

blp = Blueprint("admin_actions", __name__, url_prefix="/v2/admin-action", description="The audit log of changes.")


@blp.route("", methods=["GET"])
@blp.arguments(AdminActionQuerySchema, location="query")
@blp.response(200, GetAdminActionLogResponseSchema)
@requires("admin")
def list_actions(query):
    """Changes made through the API and the command line, newest first."""
    actions = models.list_actions(
        query["startTime"],
        query.get("endTime", now_ms()),
        action=query.get("action"),
        search=query.get("search"),
        endpoint_limit=endpoint_limit(),
        page=query["page"],
        page_size=query["pageSize"],
    )
    return {"meta": {"page": query["page"], "pageSize": query["pageSize"]}, "actions": actions}
