"""The Privacy group: /v2/privacy, each endpoint's privacy settings (see models/privacy.py)."""

from flask import g

import models.privacy
from app.auth import check_endpoints, endpoint_limit, requires
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint
from models.database import write_transaction
from schemas.privacy import PrivacyListSchema, PrivacySettingsSchema, settings_json

from . import admin_actions

blp = Blueprint("privacy", __name__, url_prefix="/v2/privacy", description="What is kept of each endpoint's queries.")


@blp.route("", methods=["GET"])
@blp.response(200, PrivacyListSchema)
@requires("admin")
def list_settings():
    """The settings in force: the operator's default and every endpoint's own."""
    return {"items": models.privacy.in_force(endpoint_limit())}


@blp.route("/<endpointId>", methods=["PUT"])
@blp.arguments(PrivacySettingsSchema, location="json")
@blp.response(200, PrivacySettingsSchema)
@requires("admin")
def change_settings(fields, endpointId):  # noqa: N803 (the API's name)
    """Change some of an endpoint's settings (`_default`: the operator's default); they apply
    to the records stored from then on, and can be set before the endpoint's first record."""
    if not 0 < len(endpointId) <= 256:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'endpointId': 1 to 256 characters.")
    if endpointId == models.privacy.DEFAULT:
        if g.principal.endpoints is not None:
            raise ApiError(ErrorCode.FORBIDDEN_ENDPOINT, "Only a key without an endpoint limit sets the default.")
    else:
        check_endpoints({endpointId})
    if not fields:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "The body sets no field.")
    with write_transaction():
        result = models.privacy.change(endpointId, fields)
        named = None if endpointId == models.privacy.DEFAULT else [endpointId]
        admin_actions.record("privacy.set", settings_json(result), named=named)
    return result
