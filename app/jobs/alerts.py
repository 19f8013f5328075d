"""The alerts job: every ANALYTICS_ALERT_INTERVAL seconds the worker holding its lease judges
each rule on what was stored since its last look (the rule's cursor and marks are in the store,
so no worker's memory matters and two never fire twice), records firings, then delivers the
firings due, retrying failures with backoff. Ingest never waits for it."""

import logging
import time

from flask import current_app

import models.delivery.alerts
import models.engine.database
import models.runtime.config
import models.stores.bound
from app import metrics
from models.records.filters import Filters
from models.runtime.clock import now_ms
from schemas.alerts import alert_json, on_wire

from .alert_destinations import DeliveryError, send

JOB = "alerts"
RUN_SECONDS = 60  # a run stops starting work after this long; the next run goes on
BATCH = 5_000  # records (or client entries) judged per transaction
DELIVERIES = 100  # deliveries tried per run at most
MAX_ATTEMPTS = 8
FIRST_RETRY_MS = 30_000
LAST_RETRY_MS = 3_600_000
MINUTE_MS = 60_000
DAY_MS = 86_400_000

log = logging.getLogger(__name__)


def run_alerts(actor: dict | None = None, now: int | None = None, seconds: float = RUN_SECONDS) -> int:
    """Judge every rule, deliver what is due, expire the history past the records' retention;
    the firings made. Needs an app context and a connection."""
    now = now_ms() if now is None else now
    stop = time.monotonic() + seconds
    fired = 0
    for rule in models.delivery.alerts.list_rules():
        try:
            fired += judge_rule(rule, now, lambda: time.monotonic() > stop)
        except Exception:
            log.exception("alerts: rule %d (%s) could not be judged; trying again next run", rule.id, rule.kind)
        # When a rule last fired matters for its cooldown only, but for a silence for as long as it
        # lasts (those subjects are endpoints: few).
        before = now - rule.cooldown * 1000
        if rule.kind != "feed-silent" and models.delivery.alerts.has_told_before(rule.id, before):
            with models.engine.database.write_transaction():
                models.delivery.alerts.forget_told(rule.id, before)
    deliver(now, lambda: time.monotonic() > stop)
    # The history holds names and clients from the records: it is kept no longer than they are.
    horizon = models.runtime.config.horizon_ms(current_app.config, now)
    if horizon is not None and models.delivery.alerts.has_older(horizon):
        with models.engine.database.write_transaction():
            models.delivery.alerts.expire(horizon)
    if fired:
        log.info("alerts: %d alerts fired", fired)
    return fired


def forget_clients(clients) -> int:
    """Delete every alert naming one of `clients` ((endpoint, client id) pairs) as its detail's
    clientId, as the kinds here write it: a client deleted, or marked not logged, leaves nothing
    of its own in the history (call in the transaction that deletes it)."""
    return models.delivery.alerts.forget_clients(clients, "clientId")


def judge_rule(rule, now: int, stopped=lambda: False) -> int:
    """Judge one rule (as read from the store) at `now`; the firings made. Safe also when two
    processes judge the same rule at once: the rows past a cursor fire only for the process that
    moves the cursor, and a lasting condition's last firing is read under the write lock."""
    return _JUDGES[rule.kind](rule, now, stopped)


def _fire(rule, endpoint: str, subject: str, message: str, detail: dict, now: int, last_condition=None) -> bool:
    """Fire unless the rule fired for `subject` within its cooldown (or, for a condition that
    lasts, since it began: `last_condition` is when it last was not true)."""
    previous = models.delivery.alerts.last_fired(rule.id, subject)
    if previous is not None:
        if now - previous < rule.cooldown * 1000:
            return False
        if last_condition is not None and last_condition <= previous:
            return False  # the same condition, already told
    if models.delivery.alerts.fire(rule, endpoint, subject, message, detail, now) is None:
        return False
    metrics.count_alert(rule.kind)
    return True


def _feed_silent(rule, now: int, stopped) -> int:
    minutes = rule.settings["silentMinutes"]
    fired = 0
    for endpoint, last in models.stores.bound.records().endpoint_activity(rule.endpoints).items():
        since = rule.created if last is None else last  # never fed: silent since the rule began
        if now - since < minutes * MINUTE_MS:
            continue
        told = models.delivery.alerts.last_fired(rule.id, endpoint)
        if told is not None and (last or 0) <= told:
            continue  # a silence already told (the usual case while it lasts): no write lock taken
        detail = {"lastActivity": on_wire(last), "silentMinutes": minutes}
        message = f"Endpoint {endpoint} sent no record for {(now - since) // MINUTE_MS} minutes"
        with models.engine.database.write_transaction():
            fired += _fire(rule, endpoint, endpoint, message, detail, now, last_condition=last or 0)
    return fired


def _new_client(rule, now: int, stopped) -> int:
    fired = 0
    while not stopped():
        rows = models.delivery.alerts.new_clients(rule.endpoints, rule.cursor, BATCH)
        if not rows:
            break
        with models.engine.database.write_transaction():
            if not models.delivery.alerts.advance(rule.id, rule.cursor, rows[-1][0]):
                break
            for _, endpoint, client, host, ip, mac in rows:
                if rule.client_ids and client not in rule.client_ids:
                    continue
                detail = {"clientId": client, "host": host or None, "ip": ip or None, "mac": mac or None}
                message = f"New client {client} on endpoint {endpoint}" + (f" ({host})" if host else "")
                fired += _fire(rule, endpoint, f"{endpoint}/{client}", message, detail, now)
        rule = rule._replace(cursor=rows[-1][0])
    return fired


def _allowed(domain: str, allowlist) -> bool:
    return any(domain == allowed or domain.endswith("." + allowed) for allowed in allowlist)


def _judge_records(judge):
    """A kind that judges the records stored since the rule's cursor, a batch at a time:
    `judge(rule, records, now)` fires and returns how many, in the batch's transaction."""

    def run(rule, now: int, stopped) -> int:
        fired = 0
        while not stopped():
            records, upto = models.stores.bound.records().alert_records_after(
                rule.endpoints, rule.client_ids, rule.cursor, BATCH
            )
            if upto == rule.cursor:
                break
            with models.engine.database.write_transaction():
                if not models.delivery.alerts.advance(rule.id, rule.cursor, upto):
                    break
                fired += judge(rule, records, now)
            rule = rule._replace(cursor=upto)
        return fired

    return run


@_judge_records
def _new_domain(rule, records, now: int) -> int:
    days, allowlist = rule.settings["days"], rule.settings.get("allowlist", [])
    first, last = {}, {}
    for record in records:
        if record.domain:
            key = f"{record.endpoint}/{record.domain}"
            first.setdefault(key, record)
            last[key] = max(last.get(key, 0), record.ts)
    known = models.delivery.alerts.marks(rule.id, first)
    fired = 0
    for key, record in first.items():
        seen = known.get(key)
        if (seen is None or record.ts - seen > days * DAY_MS) and not _allowed(record.domain, allowlist):
            detail = {
                "domain": record.domain,
                "question": record.question,
                "clientId": record.client,
                "timestamp": on_wire(record.ts),
                "lastSeen": on_wire(seen),
                "days": days,
            }
            message = f"New domain {record.domain} on endpoint {record.endpoint} (asked by {record.client})"
            fired += _fire(rule, record.endpoint, key, message, detail, now)
    models.delivery.alerts.set_marks(rule.id, last)
    models.delivery.alerts.forget_marks(rule.id, now - days * DAY_MS)  # older ones would be new again anyway
    return fired


def watch_matchers(watch: list) -> list:
    """(entry, test of a name) for each watched entry of a watched-domain rule."""
    from models.records.filters import compile_pattern

    def matcher(entry):
        value = entry["value"].lower().rstrip(".")
        if entry["match"] == "exact":
            return lambda name: name == value
        if entry["match"] == "suffix":
            return lambda name: name == value or name.endswith("." + value)
        pattern = compile_pattern(entry["value"])
        return lambda name: pattern.search(name) is not None

    return [(entry, matcher(entry)) for entry in watch]


@_judge_records
def _watched_domain(rule, records, now: int) -> int:
    matchers = watch_matchers(rule.settings["watch"])
    hits = {}
    for record in records:
        name = record.question.lower().rstrip(".")
        for entry, matches in matchers:
            if matches(name):
                key = f"{record.endpoint}/{entry['match']}:{entry['value']}"
                first, count = hits.get(key, (None, 0))
                hits[key] = (first or (record, entry), count + 1)
    fired = 0
    for key, ((record, entry), count) in hits.items():
        detail = {
            "watch": entry,
            "question": record.question,
            "clientId": record.client,
            "timestamp": on_wire(record.ts),
            "queries": count,
        }
        message = f"{record.client} asked for watched {record.question} on endpoint {record.endpoint}"
        fired += _fire(rule, record.endpoint, key, message, detail, now)
    return fired


def _client_share(rule, now: int, stopped) -> int:
    settings = rule.settings
    metric, threshold, window = settings["metric"], settings["threshold"], settings["windowMinutes"]
    over = []
    for endpoint, client, total, nxdomain, blocked in models.stores.bound.records().client_counts(
        rule.endpoints, rule.client_ids, now - window * MINUTE_MS, now
    ):
        if metric == "rate":
            value = total / window
        elif total < settings["minQueries"]:
            continue
        else:
            value = (nxdomain if metric == "nxdomain" else blocked) / total
        if value > threshold:
            detail = {"clientId": client, "metric": metric, "value": round(value, 4), "threshold": threshold}
            detail |= {"windowMinutes": window, "queries": total, "nxdomain": nxdomain, "blocked": blocked}
            over.append((endpoint, client, value, detail))
    if settings.get("baselineDays"):
        over = _far_above_baseline(rule, over, now)
    fired = 0
    with models.engine.database.write_transaction():
        for endpoint, client, value, detail in over:
            shown = f"{value:.0%}" if metric != "rate" else f"{value:.3g} queries a minute"
            message = f"Client {client} on endpoint {endpoint}: {metric} {shown} over the last {window} minutes"
            if "baseline" in detail:
                message += f" ({detail['baseline']:.3g} a minute over the {settings['baselineDays']} days before)"
            fired += _fire(rule, endpoint, f"{endpoint}/{client}", message, detail, now)
    return fired


def _far_above_baseline(rule, over: list, now: int) -> list:
    """Of the clients over the threshold (rate), those also over baselineFactor times their own
    rate over the baselineDays before the window (a client without queries then has 0)."""
    days, factor = rule.settings["baselineDays"], rule.settings["baselineFactor"]
    end = now - rule.settings["windowMinutes"] * MINUTE_MS
    kept = []
    for endpoint in {endpoint for endpoint, *_ in over}:
        clients = [client for at, client, *_ in over if at == endpoint]
        window = Filters(values={"endpoint": [endpoint]}, start_ms=end - days * DAY_MS, end_ms=end - 1)
        before = models.stores.bound.records().counts_of(window, "client", clients)
        for at, client, value, detail in over:
            baseline = before.get(client, 0) / (days * 1440)
            if at == endpoint and value > factor * baseline:
                kept.append((at, client, value, detail | {"baseline": round(baseline, 4), "baselineFactor": factor}))
    return kept


_JUDGES = {
    "feed-silent": _feed_silent,
    "new-client": _new_client,
    "new-domain": _new_domain,
    "watched-domain": _watched_domain,
    "client-share": _client_share,
}


def retry_delay_ms(attempts: int) -> int:
    """After the `attempts`-th failure: 30 s, 1, 2, 4 ... minutes, at most an hour."""
    return min(FIRST_RETRY_MS << (attempts - 1), LAST_RETRY_MS)


def deliver(now: int, stopped=lambda: False) -> int:
    """Try the deliveries due at `now` (until `stopped`: a slow destination must not hold the
    lease past its time); how many went through."""
    delivered = 0
    for due in models.delivery.alerts.due_deliveries(now, DELIVERIES):
        if stopped():
            break
        alert = alert_json(due)
        attempts = due.attempts + 1
        try:
            send(due.destination, alert, f"DNS alert: {due.kind} on {due.endpoint}", due.secret)
        except DeliveryError as error:
            give_up = attempts >= MAX_ATTEMPTS
            state = models.delivery.alerts.FAILED if give_up else models.delivery.alerts.RETRYING
            next_try = None if give_up else now + retry_delay_ms(attempts)
            log.warning(
                "alerts: alert %d to a %s destination failed (%s)", due.id, due.destination.split(":")[0], error
            )
            with models.engine.database.write_transaction():
                models.delivery.alerts.delivery_tried(due.delivery, state, attempts, next_try, str(error)[:1000], now)
            metrics.count_delivery(state)
            continue
        with models.engine.database.write_transaction():
            models.delivery.alerts.delivery_tried(
                due.delivery, models.delivery.alerts.DELIVERED, attempts, None, "", now
            )
        metrics.count_delivery(models.delivery.alerts.DELIVERED)
        delivered += 1
    return delivered
