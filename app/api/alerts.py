"""The Alerts group: /v2/alert-rule (rules, admin scope, in the admin-action log) and /v2/alert
(the history of firings and their deliveries). The job that fires them is app/jobs/alerts.py."""

import secrets

import models.delivery.alerts
from app.auth import check_endpoints, endpoint_limit, requires
from app.errors import ApiError, ErrorCode
from app.extensions import Blueprint, prebuilt
from app.jobs.alert_destinations import problem
from models.engine.database import write_transaction
from models.runtime.clock import now_ms, request_now_ms
from models.stores.bound import records
from schemas.alerts import (
    AlertHistorySchema,
    AlertQuerySchema,
    AlertRuleListSchema,
    AlertRulePatchSchema,
    AlertRuleResponseSchema,
    AlertRuleSchema,
    history_json,
    kind_settings,
    rule_json,
)

from . import admin_actions

blp = Blueprint("alerts", __name__, url_prefix="/v2", description="Alert rules and the alerts they fired.")

DAY_MS = 86_400_000
# The common fields on the wire and their columns (the kinds' own fields go to `settings`).
_COLUMNS = {
    "endpointIds": "endpoints",
    "clientIds": "client_ids",
    "destinations": "destinations",
    "cooldown": "cooldown",
}


def _checked(kind: str, body: dict) -> dict:
    """The store's columns of a rule from a loaded body, or a 400 saying what is wrong."""
    settings, wrong = kind_settings(kind, body)
    if wrong:
        raise ApiError(ErrorCode.MISSING_FIELD if wrong.startswith("Missing") else ErrorCode.INVALID_PARAMETER, wrong)
    for index, url in enumerate(body.get("destinations", ())):
        if why := problem(url):
            raise ApiError(ErrorCode.INVALID_PARAMETER, f"Invalid 'destinations[{index}]': {why}.")
    return {column: body[name] for name, column in _COLUMNS.items() if name in body} | {"settings": settings}


def _remember_domains(rule):
    """A new-domain rule starts knowing the domains asked within its days (models.delivery.alerts.seed_domains)."""
    if rule.kind == "new-domain":
        records().seed_domains(rule.id, rule.endpoints, now_ms() - rule.settings["days"] * DAY_MS)


def _rule_or_404(rule_id: int):
    rule = models.delivery.alerts.get_rule(rule_id, endpoint_limit())
    if rule is None:
        raise ApiError(ErrorCode.NOT_FOUND, f"No alert rule {rule_id}.")
    return rule


@blp.route("/alert-rule", methods=["POST"])
@blp.arguments(AlertRuleSchema, location="json")
@blp.response(201, AlertRuleResponseSchema)
@requires("admin")
def create_rule(body):
    """Create an alert rule; the answer holds the webhook signing secret, shown this once."""
    check_endpoints(body["endpointIds"])
    columns = _checked(body["kind"], body)
    secret = secrets.token_urlsafe(32)
    with write_transaction():
        rule = models.delivery.alerts.create_rule(
            {"kind": body["kind"], "client_ids": None, **columns}, secret, now_ms()
        )
        _remember_domains(rule)
        answer = rule_json(rule)
        admin_actions.record("alert-rule.create", answer, named=rule.endpoints)
    return prebuilt(rule_json(rule, secret)), 201


@blp.route("/alert-rule", methods=["GET"])
@blp.response(200, AlertRuleListSchema)
@requires("admin")
def list_rules():
    """Every alert rule (those within the key's endpoint limit)."""
    return prebuilt({"items": [rule_json(rule) for rule in models.delivery.alerts.list_rules(endpoint_limit())]})


@blp.route("/alert-rule/<int:ruleId>", methods=["GET"])
@blp.response(200, AlertRuleResponseSchema)
@requires("admin")
def get_rule(ruleId):  # noqa: N803 (the API's name)
    """One alert rule."""
    return prebuilt(rule_json(_rule_or_404(ruleId)))


@blp.route("/alert-rule/<int:ruleId>", methods=["PATCH"])
@blp.arguments(AlertRulePatchSchema(partial=True), location="json")
@blp.response(200, AlertRuleResponseSchema)
@requires("admin")
def change_rule(body, ruleId):  # noqa: N803 (the API's name)
    """Change some fields of an alert rule (not its kind); its secret stays."""
    if not body:
        raise ApiError(ErrorCode.INVALID_PARAMETER, "The body sets no field.")
    with write_transaction():
        rule = _rule_or_404(ruleId)
        check_endpoints(body.get("endpointIds", ()))
        merged = {**rule.settings, **{name: value for name, value in body.items() if name not in _COLUMNS}}
        columns = _checked(rule.kind, {**merged, **{name: body[name] for name in _COLUMNS if name in body}})
        changed = models.delivery.alerts.update_rule(ruleId, columns, now_ms())
        if changed.settings != rule.settings or changed.endpoints != rule.endpoints:
            _remember_domains(changed)
        answer = rule_json(changed)
        admin_actions.record("alert-rule.change", answer, named=sorted({*rule.endpoints, *changed.endpoints}))
    return prebuilt(answer)


@blp.route("/alert-rule/<int:ruleId>", methods=["DELETE"])
@blp.response(200, AlertRuleResponseSchema)
@requires("admin")
def delete_rule(ruleId):  # noqa: N803 (the API's name)
    """Delete an alert rule (the answer is the rule as it was); its alerts stay in the history,
    deliveries not yet made are given up."""
    with write_transaction():
        rule = _rule_or_404(ruleId)
        models.delivery.alerts.delete_rule(ruleId)
        answer = rule_json(rule)
        admin_actions.record("alert-rule.delete", answer, named=rule.endpoints)
    return prebuilt(answer)


@blp.route("/alert", methods=["GET"])
@blp.arguments(AlertQuerySchema, location="query")
@blp.response(200, AlertHistorySchema)
@requires("admin")
def list_alerts(query):
    """The alerts fired in the window, newest first, each with its deliveries' states."""
    alerts = models.delivery.alerts.list_alerts(
        query["startTime"],
        query.get("endTime", request_now_ms()),
        rule_id=query.get("ruleId"),
        endpoint_limit=endpoint_limit(),
        page=query["page"],
        page_size=query["pageSize"],
    )
    meta = {"page": query["page"], "pageSize": query["pageSize"]}
    return prebuilt({"meta": meta, "alerts": [history_json(alert) for alert in alerts]})
