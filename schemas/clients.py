"""The Clients group on the wire."""

import marshmallow as ma
from marshmallow import fields

from .datetimes import format_ms
from .fields import IP, BaseSchema, Boolean, Datetime, DatetimeInput, Integer
from .records import ClientOsSchema

MAX_IDS = 1000


class ClientQuerySchema(BaseSchema):
    endpointId = fields.String(validate=ma.validate.Length(min=1, max=256))
    clientId = fields.List(
        fields.String(validate=ma.validate.Length(min=1, max=256)),
        data_key="clientId[]",
        validate=ma.validate.Length(max=MAX_IDS),
    )


class ClientActivitySchema(BaseSchema):
    """A client entry."""

    lastActivityTime = Datetime(
        required=True, allow_none=True, metadata={"description": "null when it has no records."}
    )
    alias = fields.String(required=True)
    host = fields.String(required=True)
    mac = fields.String(required=True)
    ip = IP(required=True)
    os = fields.Nested(ClientOsSchema, required=True)
    vendor = fields.String(required=True)
    logged = Boolean(
        required=True,
        metadata={
            "description": "false: marked not logged (PUT /v2/client/logging/{endpointId}/{clientId}): none of "
            "its queries is stored as a record."
        },
    )


class EndpointActivitySchema(BaseSchema):
    lastActivityTime = Datetime(
        required=True,
        allow_none=True,
        metadata={"description": "null only while every client of it was marked before its first record."},
    )
    clients = fields.Dict(keys=fields.String(), values=fields.Nested(ClientActivitySchema))


class GetClientResponseSchema(BaseSchema):
    items = fields.Dict(keys=fields.String(), values=fields.Nested(EndpointActivitySchema))


class DeleteClientRequestSchema(BaseSchema):
    endpointIds = fields.List(
        fields.String(validate=ma.validate.Length(min=1, max=256)),
        validate=ma.validate.Length(max=MAX_IDS),
    )
    clientIds = fields.List(
        fields.String(validate=ma.validate.Length(min=1, max=256)),
        validate=ma.validate.Length(max=MAX_IDS),
    )
    endTime = DatetimeInput(metadata={"description": "Defaults to the time of the request."})


class ClientRefSchema(BaseSchema):
    endpointId = fields.String(required=True)
    clientId = fields.String(required=True)


class DeleteClientResponseSchema(BaseSchema):
    deletedCount = Integer(required=True)
    deletedClients = fields.List(fields.Nested(ClientRefSchema), required=True)


class LoggingRequestSchema(BaseSchema):
    logged = Boolean(
        required=True,
        metadata={
            "description": "false: delete the client's records and keep none of its queries from now on; "
            "true: log them again."
        },
    )


class AliasRequestSchema(BaseSchema):
    alias = fields.String(required=True, validate=ma.validate.Length(min=1, max=64))


def client_activity(row) -> dict:
    """A ClientActivity from a store row (models.ClientRow), ready for JSON."""
    last = row.last_ts
    return {
        "lastActivityTime": None if last is None else format_ms(last),
        "alias": row.alias,
        "host": row.host,
        "mac": row.mac,
        "ip": row.ip,
        "vendor": row.vendor,
        "os": {"type": row.os_type, "arch": row.os_arch, "version": row.os_version},
        "logged": not row.unlogged,
    }


def client_items(endpoints: dict, rows) -> dict:
    """GetClientResponse from models.list_clients: {"items": {endpoint: EndpointActivity}}.
    Built by hand rather than dumped: thousands of clients are listed at once."""
    items = {
        name: {"lastActivityTime": None if last is None else format_ms(last), "clients": {}}
        for name, last in endpoints.items()
    }
    for row in rows:
        items[row.endpoint]["clients"][row.client_id] = client_activity(row)
    return {"items": items}
