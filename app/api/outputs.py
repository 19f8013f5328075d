"""The Outputs group: /v2/output, where stored records are forwarded (app/outputs/ delivers)."""

import marshmallow as ma
from flask import current_app

import models.delivery.outputs
import models.engine.database
from app.auth import check_endpoints, endpoint_limit, requires
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint, validation_error
from app.outputs import delivery, manage
from schemas.errors import ErrorResponseSchema
from schemas.outputs import (
    ChangeOutputSchema,
    CreateOutputSchema,
    GetOutputsResponseSchema,
    OutputSchema,
    redacted_body,
)

from . import admin_actions

blp = Blueprint("outputs", __name__, url_prefix="/v2/output", description="Forwarding every record to a receiver.")


def _shown(output) -> dict:
    """The output with its backlog, for OutputSchema."""
    return manage.with_backlog(output, current_app.config["ANALYTICS_OUTPUT_BACKLOG"])


def _refused(exc: manage.Refused) -> ApiError:
    """The error of an output refused: a bad field, or a name already taken."""
    return ApiError(ErrorCode.INVALID_PARAMETER if exc.field else ErrorCode.OUTPUT_EXISTS, str(exc))


def _visible(output_id: int):
    """The output, if this key may see it (an endpoint-limited key: only outputs of its endpoints)."""
    output = models.delivery.outputs.get(output_id)
    limit = endpoint_limit()
    if output is None or (limit is not None and (output.endpoints is None or not set(output.endpoints) <= limit)):
        raise ApiError(ErrorCode.OUTPUT_NOT_FOUND, "No such output.")
    return output


@blp.route("", methods=["GET"])
@blp.response(200, GetOutputsResponseSchema)
@requires("admin")
def list_outputs():
    """Outputs, oldest first, each with its cursor, backlog and last error."""
    return {"outputs": [_shown(output) for output in models.delivery.outputs.list_outputs(endpoint_limit())]}


@blp.route("", methods=["POST"])
@blp.arguments(CreateOutputSchema)
@blp.response(201, OutputSchema)
@blp.alt_response(409, schema=ErrorResponseSchema, description="An output of that name exists.")
@requires("admin")
def create_output(body):
    """Create an output: every stored record of its endpoints is forwarded, in order."""
    check_endpoints(body.get("endpointIds") or [])  # (app.auth checks only DELETE bodies itself)
    with models.engine.database.write_transaction():
        try:
            output = manage.create(body, endpoint_limit())
        except manage.Refused as exc:
            raise _refused(exc) from None
        shown = _shown(output)
        admin_actions.record("output.create", OutputSchema().dump(shown), output.endpoints, redact=redacted_body)
    delivery.look_now()
    return shown


@blp.route("/<int:outputId>", methods=["GET"])
@blp.response(200, OutputSchema)
@blp.alt_response(404, schema=ErrorResponseSchema, description="No such output.")
@requires("admin")
def get_output(outputId):
    """One output, with its cursor, backlog and last error."""
    return _shown(_visible(outputId))


@blp.route("/<int:outputId>", methods=["PATCH"])
@blp.arguments(ChangeOutputSchema)
@blp.response(200, OutputSchema)
@blp.alt_response(404, schema=ErrorResponseSchema, description="No such output.")
@blp.alt_response(409, schema=ErrorResponseSchema, description="An output of that name exists.")
@requires("admin")
def change_output(body, outputId):
    """Pause or resume an output, or change its settings; it goes on from its cursor."""
    check_endpoints(body.get("endpointIds") or [])
    with models.engine.database.write_transaction():
        output = _visible(outputId)
        schema = CreateOutputSchema()
        try:
            data = schema.load(manage.merged(output, body))
        except ma.ValidationError as exc:
            raise validation_error(exc, schema) from None
        try:
            output = manage.change(output, data, endpoint_limit())
        except manage.Refused as exc:
            raise _refused(exc) from None
        shown = _shown(output)
        action = {True: "output.pause", False: "output.resume"}.get(body["paused"]) if set(body) == {"paused"} else None
        admin_actions.record(
            action or "output.change", OutputSchema().dump(shown), output.endpoints, redact=redacted_body
        )
    delivery.look_now()
    return shown


@blp.route("/<int:outputId>", methods=["DELETE"])
@blp.response(200, OutputSchema)
@blp.alt_response(404, schema=ErrorResponseSchema, description="No such output.")
@requires("admin")
def delete_output(outputId):
    """Delete an output; its delivery stops within seconds."""
    with models.engine.database.write_transaction():
        output = _visible(outputId)
        shown = _shown(output)
        models.delivery.outputs.delete(output.id)
        admin_actions.record("output.delete", OutputSchema().dump(shown), output.endpoints)
    return shown
