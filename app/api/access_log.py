"""The Access Log group: /v2/access-log, the reads of the activity log (see app/audit.py)."""

import models.access.access_log
from app.auth import endpoint_limit, requires
from app.extensions import Blueprint
from models.runtime.clock import request_now_ms
from schemas.access_log import AccessLogQuerySchema, GetAccessLogResponseSchema

blp = Blueprint("access_log", __name__, url_prefix="/v2/access-log", description="Who read the activity log.")


@blp.route("", methods=["GET"])
@blp.arguments(AccessLogQuerySchema, location="query")
@blp.response(200, GetAccessLogResponseSchema)
@requires("admin")
def list_reads(query):
    """Reads of the activity log, its CSV export and its realtime stream, newest first."""
    reads = models.access.access_log.list_reads(
        query["startTime"],
        query.get("endTime", request_now_ms()),
        kind=query.get("kind"),
        key_name=query.get("keyName"),
        endpoint_limit=endpoint_limit(),
        page=query["page"],
        page_size=query["pageSize"],
    )
    return {"meta": {"page": query["page"], "pageSize": query["pageSize"]}, "reads": reads}
