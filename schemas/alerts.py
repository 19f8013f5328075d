"""The Alerts group on the wire: alert rules (their kinds' own fields beside the common ones)
and the history of firings with their deliveries."""

import marshmallow as ma
from marshmallow import fields

from models.delivery.alerts import DELIVERED, FAILED, KINDS, PENDING, RETRYING
from models.records.filters import compile_pattern

from .activity_log import MAX_PAGE_SIZE, PaginationDataSchema
from .datetimes import format_ms
from .fields import BaseSchema, Datetime, Float, Integer
from .filters import WindowSchema

WATCH_MATCHES = ("exact", "suffix", "pattern")
METRICS = ("nxdomain", "blocked", "rate")
# Each kind's own fields, with their defaults (None: required for the kind).
KIND_FIELDS = {
    "feed-silent": {"silentMinutes": None},
    "new-client": {},
    "new-domain": {"days": 30, "allowlist": []},
    "watched-domain": {"watch": None},
    "client-share": {
        "metric": None,
        "threshold": None,
        "windowMinutes": 10,
        "minQueries": 20,
        "baselineDays": 0,
        "baselineFactor": 3.0,
    },
}
_OWN_FIELDS = sorted({name for own in KIND_FIELDS.values() for name in own})
_NAME = ma.validate.Length(min=1, max=256)


def on_wire(ms: int | None) -> str | None:
    return None if ms is None else format_ms(ms)


class WatchSchema(BaseSchema):
    match = fields.String(required=True, validate=ma.validate.OneOf(WATCH_MATCHES))
    value = fields.String(
        required=True,
        validate=_NAME,
        metadata={"description": "A name (exact: that name; suffix: it and every name under it) or an RE2 pattern."},
    )

    @ma.validates_schema
    def _pattern_runs(self, data, **kwargs):
        if data.get("match") == "pattern":
            try:
                compile_pattern(data["value"])
            except ValueError as error:
                raise ma.ValidationError(str(error), "value") from None


class AlertRuleSchema(BaseSchema):
    """A rule as it is created (POST) or changed (PATCH: any of the fields but kind)."""

    kind = fields.String(required=True, validate=ma.validate.OneOf(KINDS))
    endpointIds = fields.List(fields.String(validate=_NAME), required=True, validate=ma.validate.Length(min=1, max=100))
    clientIds = fields.List(
        fields.String(validate=_NAME),
        allow_none=True,
        validate=ma.validate.Length(max=1000),
        metadata={"description": "Only these clients (null or absent: every client)."},
    )
    destinations = fields.List(
        fields.String(validate=ma.validate.Length(min=1, max=2048)),
        required=True,
        validate=ma.validate.Length(min=1, max=20),
        metadata={"description": "http(s) URLs (a signed webhook each) and notification URLs (apprise)."},
    )
    cooldown = Integer(
        load_default=3600,
        validate=ma.validate.Range(min=0, max=30 * 86400),
        metadata={"description": "Seconds after a firing in which the same condition does not fire again."},
    )
    silentMinutes = Integer(validate=ma.validate.Range(min=1, max=43_200), metadata={"description": "feed-silent"})
    days = Integer(validate=ma.validate.Range(min=1, max=400), metadata={"description": "new-domain"})
    allowlist = fields.List(
        fields.String(validate=_NAME), validate=ma.validate.Length(max=1000), metadata={"description": "new-domain"}
    )
    watch = fields.List(
        fields.Nested(WatchSchema),
        validate=ma.validate.Length(min=1, max=1000),
        metadata={"description": "watched-domain"},
    )
    metric = fields.String(validate=ma.validate.OneOf(METRICS), metadata={"description": "client-share"})
    threshold = Float(
        validate=ma.validate.Range(min=0, min_inclusive=False, max=1e9),
        metadata={
            "exclusiveMinimum": True,
            "description": "client-share: a share (0 to 1) or queries a minute (rate).",
        },
    )
    windowMinutes = Integer(validate=ma.validate.Range(min=1, max=1440), metadata={"description": "client-share"})
    baselineDays = Integer(
        validate=ma.validate.Range(min=0, max=30),
        metadata={"description": "client-share, rate: also far above the client's own rate over these days (0: off)."},
    )
    baselineFactor = Float(
        validate=ma.validate.Range(min=1, min_inclusive=False, max=1e6),
        metadata={
            "exclusiveMinimum": True,
            "description": "client-share: how many times its baseline rate (default 3).",
        },
    )
    minQueries = Integer(validate=ma.validate.Range(min=1, max=1_000_000), metadata={"description": "client-share"})


class AlertRulePatchSchema(AlertRuleSchema):
    class Meta:
        exclude = ("kind",)
        min_properties = 1  # a change sets a field


def kind_settings(kind: str, data: dict) -> tuple[dict | None, str | None]:
    """(the kind's own fields with their defaults, None), or (None, what is wrong)."""
    own = KIND_FIELDS[kind]
    stray = [name for name in _OWN_FIELDS if name in data and name not in own]
    if stray:
        return None, f"Invalid '{stray[0]}': not a field of kind {kind}."
    settings = {name: data.get(name, default) for name, default in own.items()}
    missing = [name for name, value in settings.items() if value is None]
    if missing:
        return None, f"Missing required field '{missing[0]}' (kind {kind})."
    if kind == "client-share" and settings["metric"] != "rate" and settings["threshold"] > 1:
        return None, "Invalid 'threshold': a share is at most 1."
    if kind == "client-share" and settings["metric"] != "rate" and settings["baselineDays"]:
        return None, "Invalid 'baselineDays': a baseline is for the rate metric."
    if kind == "new-domain":
        settings["allowlist"] = [name.lower().rstrip(".") for name in settings["allowlist"]]
    return settings, None


def rule_json(rule, secret: str | None = None) -> dict:
    answer = {
        "id": rule.id,
        "kind": rule.kind,
        "endpointIds": rule.endpoints,
        "clientIds": rule.client_ids,
        "destinations": rule.destinations,
        "cooldown": rule.cooldown,
        **rule.settings,
        "createdAt": format_ms(rule.created),
        "updatedAt": format_ms(rule.updated),
    }
    if secret is not None:
        answer["secret"] = secret
    return answer


class AlertRuleResponseSchema(AlertRuleSchema):
    id = Integer(required=True)
    clientIds = fields.List(fields.String(), required=True, allow_none=True)
    cooldown = Integer(required=True)
    createdAt = Datetime(required=True)
    updatedAt = Datetime(required=True)
    secret = fields.String(
        metadata={"description": "Only in the answer to POST: the key of the webhooks' HMAC-SHA256 signature."}
    )


class AlertRuleListSchema(BaseSchema):
    items = fields.List(fields.Nested(AlertRuleResponseSchema), required=True)


class AlertQuerySchema(WindowSchema):
    ruleId = Integer(validate=ma.validate.Range(min=1, max=2**62))
    page = Integer(load_default=0, validate=ma.validate.Range(min=0, max=10_000_000))
    pageSize = Integer(load_default=100, validate=ma.validate.Range(min=1, max=MAX_PAGE_SIZE))


def alert_json(alert) -> dict:
    """A firing as the history and the destinations get it (models.delivery.alerts.AlertRow or DueRow)."""
    return {
        "id": alert.id,
        "ruleId": alert.rule,
        "kind": alert.kind,
        "endpointId": alert.endpoint,
        "subject": alert.subject,
        "message": alert.message,
        "timestamp": format_ms(alert.ts),
        "detail": alert.detail,
    }


def history_json(alert) -> dict:
    return {
        **alert_json(alert),
        "deliveries": [
            {
                "destination": delivery.destination,
                "state": delivery.state,
                "attempts": delivery.attempts,
                "nextTry": on_wire(delivery.next_try),
                "error": delivery.error or None,
                "updatedAt": format_ms(delivery.updated),
            }
            for delivery in alert.deliveries
        ],
    }


class DeliverySchema(BaseSchema):
    destination = fields.String(required=True)
    state = fields.String(required=True, validate=ma.validate.OneOf((PENDING, RETRYING, DELIVERED, FAILED)))
    attempts = Integer(required=True)
    nextTry = Datetime(required=True, allow_none=True, metadata={"description": "When it is tried again (retrying)."})
    error = fields.String(required=True, allow_none=True, metadata={"description": "The last failure."})
    updatedAt = Datetime(required=True)


class AlertSchema(BaseSchema):
    id = Integer(required=True)
    ruleId = Integer(required=True)
    kind = fields.String(required=True)
    endpointId = fields.String(required=True)
    subject = fields.String(required=True, metadata={"description": "What fired: an endpoint, client or domain."})
    message = fields.String(required=True)
    timestamp = Datetime(required=True)
    detail = fields.Dict(required=True)
    deliveries = fields.List(fields.Nested(DeliverySchema), required=True)


class AlertHistorySchema(BaseSchema):
    meta = fields.Nested(PaginationDataSchema, required=True)
    alerts = fields.List(fields.Nested(AlertSchema), required=True)
