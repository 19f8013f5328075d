"""The Privacy group: /v2/privacy, each endpoint's privacy settings (see models/privacy/privacy.py)."""

from flask import g

import models.privacy.privacy
from app.auth import check_endpoints, endpoint_limit, requires
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint, prebuilt
from models.engine.database import write_transaction
from models.runtime.clock import now_ms
from models.stores.bound import records
from schemas.privacy import PrivacyListSchema, PrivacySettingsSchema, settings_items, settings_json

from . import admin_actions

blp = Blueprint("privacy", __name__, url_prefix="/v2/privacy", description="What is kept of each endpoint's queries.")


@blp.route("", methods=["GET"])
@blp.response(200, PrivacyListSchema)
@requires("admin")
def list_settings():
    """The settings in force: the operator's default and every endpoint's own."""
    return prebuilt({"items": settings_items(records().privacy_in_force(endpoint_limit()))})


@blp.route("/<endpointId>", methods=["PUT"])
@blp.arguments(PrivacySettingsSchema, location="json")
@blp.response(200, PrivacySettingsSchema)
@requires("admin")
def change_settings(fields, endpointId):  # noqa: N803 (the API's name)
    """Change some of an endpoint's settings (`_default`: the operator's default), also before
    its first record; a stricter setting is applied to the records stored before (see
    pendingRewrite), a looser one to the records stored from then on."""
    if not 0 < len(endpointId) <= 256:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "Invalid 'endpointId': 1 to 256 characters.")
    if endpointId == models.privacy.privacy.DEFAULT:
        if g.principal.endpoints is not None:
            raise ApiError(ErrorCode.FORBIDDEN_ENDPOINT, "Only a key without an endpoint limit sets the default.")
    else:
        check_endpoints({endpointId})
    if not fields:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "The body sets no field.")
    with write_transaction():
        answer = settings_json(*records().change_privacy(endpointId, fields, now_ms()))
        admin_actions.record(
            "privacy.set", answer, named=None if endpointId == models.privacy.privacy.DEFAULT else [endpointId]
        )
    return prebuilt(answer)
