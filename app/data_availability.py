"""The Data Availability group: /v2/data-availability."""

from flask import current_app

import models
from schemas.statistics import COLUMNS, DataAvailabilitySchema

from .auth import endpoint_limit
from .extensions import Blueprint

blp = Blueprint("data_availability", __name__, url_prefix="/v2/data-availability", description="What data is stored.")


@blp.route("", methods=["GET"])
@blp.response(200, DataAvailabilitySchema)
def data_availability():
    """The oldest and newest record, the retention, the record count and the columns."""
    oldest, newest, total = models.availability(models.Filters(endpoint_limit=endpoint_limit()))
    return {
        "startTime": oldest,
        "endTime": newest,
        "retentionDays": current_app.config["ANALYTICS_RETENTION_DAYS"],
        "recordCount": total,
        "columns": [
            {"name": c.name, "type": c.type, "filterable": c.filterable, "groupable": c.groupable} for c in COLUMNS
        ],
    }
