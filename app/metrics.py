"""The service's counters for GET /metrics (app/api/metrics.py), summed over every worker.

Under gunicorn, gunicorn.conf.py points PROMETHEUS_MULTIPROC_DIR at a folder before the workers
start: each worker then writes its counts to files there (prometheus-client's multiprocess
mode) and a scrape, whichever worker answers it, reads them all. Without it (the Flask
development server, one process) the counts are this process's own.

Label values are bounded by design: never a label per domain, client or address. Endpoints are
created by any ingest key, so only the first ANALYTICS_METRICS_ENDPOINTS endpoints (in the order
the store first saw them) get a label of their own; the rest are counted as "other".
"""

import collections
import time
from operator import itemgetter

from flask import current_app, g, request
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

import models.stores.bound
from catalogue import FIELDS

OTHER = "other"
# The DNS response codes a status label may take (RFC 1035, 2136, 6891); anything else is "other".
RCODES = frozenset(
    "NOERROR FORMERR SERVFAIL NXDOMAIN NOTIMP REFUSED YXDOMAIN YXRRSET NXRRSET NOTAUTH NOTZONE BADVERS".split()
)
_AT = {field.name: i for i, field in enumerate(FIELDS)}

# The metrics this process counts; in multiprocess mode their values live in the shared folder.
LOCAL = CollectorRegistry()
QUERIES_STORED = Counter(
    "dns_analytics_queries_stored",
    "Records stored through POST /v2/ingest, by endpoint, action and DNS status.",
    ["endpoint", "action", "status"],
    registry=LOCAL,
)
INGEST_REQUESTS = Counter(
    "dns_analytics_ingest_requests",
    "POST /v2/ingest requests by result: accepted, or the ErrorResponse code of the rejection.",
    ["result"],
    registry=LOCAL,
)
INGEST_RECORDS = Counter("dns_analytics_ingest_records", "Records accepted by POST /v2/ingest.", registry=LOCAL)
INGEST_PAST_RETENTION = Counter(
    "dns_analytics_ingest_past_retention_records",
    "Accepted records already older than the retention horizon (the next retention run deletes them).",
    registry=LOCAL,
)
REQUEST_SECONDS = Histogram(
    "dns_analytics_request_duration_seconds",
    "Time to answer a request, by operation (for streams and CSV exports: until the answer starts).",
    ["operation"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=LOCAL,
)
STREAMS_OPEN = Gauge(
    "dns_analytics_realtime_streams_open",
    "Realtime streams open now.",
    multiprocess_mode="livesum",
    registry=LOCAL,
)
RETENTION_RUNS = Counter("dns_analytics_retention_runs", "Retention runs (when retention is on).", registry=LOCAL)
RETENTION_EXPIRED = Counter("dns_analytics_retention_expired_records", "Records deleted by retention.", registry=LOCAL)
# Outputs are few and made by admins: their names are bounded label values.
OUTPUT_RECORDS = Counter(
    "dns_analytics_output_records", "Records an output's receiver accepted, by output.", ["output"], registry=LOCAL
)
OUTPUT_FAILURES = Counter(
    "dns_analytics_output_failures",
    "Batches an output's receiver did not accept (sent again later).",
    ["output"],
    registry=LOCAL,
)
OUTPUT_SKIPPED = Counter(
    "dns_analytics_output_skipped_records",
    "Records an output skipped, never sent, because more than ANALYTICS_OUTPUT_BACKLOG were waiting.",
    ["output"],
    registry=LOCAL,
)

ALERTS_FIRED = Counter("dns_analytics_alerts_fired", "Alerts fired, by rule kind.", ["kind"], registry=LOCAL)
ALERT_DELIVERIES = Counter(
    "dns_analytics_alert_deliveries",
    "Attempts to deliver an alert, by result: delivered, retrying (failed, tried again later), failed (given up).",
    ["result"],
    registry=LOCAL,
)


def _labelled_endpoints() -> set:
    """The endpoints with a label of their own: the first ANALYTICS_METRICS_ENDPOINTS ever seen.

    Kept per app and process; once full it never changes (endpoint ids only grow), so the
    store is asked only while there are fewer endpoints than the limit and a new one shows up.
    """
    return current_app.extensions.setdefault("metrics_endpoints", set())


def endpoint_labels(names: set) -> dict:
    limit = current_app.config["ANALYTICS_METRICS_ENDPOINTS"]
    labelled = _labelled_endpoints()
    if len(labelled) < limit and not names <= labelled:
        labelled.update(models.stores.bound.records().first_endpoints(limit))
    return {name: name if name in labelled else OTHER for name in names}


def count_stored(records: list, past_retention: int):
    """Count a batch that POST /v2/ingest has just stored (records as
    models.ingest.ingestion.store_records takes them)."""
    endpoint_at, action_at, status_at = _AT["endpointId"], _AT["action"], _AT["statusCode"]
    # Counted by the raw values in C, then labelled once per distinct combination.
    raw = collections.Counter(map(itemgetter(endpoint_at, action_at, status_at), (values for values, _ in records)))
    labels = endpoint_labels({endpoint for endpoint, _, _ in raw})
    counts: dict[tuple, int] = {}
    for (endpoint, action, status), n in raw.items():
        status = status or ""
        key = (
            labels[endpoint],
            "unknown" if action is None else str(action),
            status if status in RCODES else ("unknown" if not status else OTHER),
        )
        counts[key] = counts.get(key, 0) + n
    for key, count in counts.items():
        QUERIES_STORED.labels(*key).inc(count)
    INGEST_RECORDS.inc(len(records))
    if past_retention:
        INGEST_PAST_RETENTION.inc(past_retention)


def count_retention(deleted: int):
    RETENTION_RUNS.inc()
    RETENTION_EXPIRED.inc(deleted)


def count_output_delivered(output: str, records: int):
    OUTPUT_RECORDS.labels(output).inc(records)


def count_output_failure(output: str):
    OUTPUT_FAILURES.labels(output).inc()


def count_output_skipped(output: str, records: int):
    OUTPUT_SKIPPED.labels(output).inc(records)


def count_alert(kind: str):
    ALERTS_FIRED.labels(kind=kind).inc()


def count_delivery(result: str):
    ALERT_DELIVERIES.labels(result=result).inc()


def stream_opened():
    STREAMS_OPEN.inc()


def stream_closed():
    STREAMS_OPEN.dec()


def init_app(app):
    app.before_request(_start_clock)
    app.after_request(_observe)


def _start_clock():
    g.metrics_started = time.perf_counter()


def _observe(response):
    started = g.pop("metrics_started", None)
    if started is None:
        return response
    rule = request.url_rule
    operation = f"{request.method} {rule.rule}" if rule is not None else "unmatched"
    REQUEST_SECONDS.labels(operation).observe(time.perf_counter() - started)
    if request.endpoint == "ingest.ingest" and request.method == "POST":
        if response.status_code == 200:
            INGEST_REQUESTS.labels("accepted").inc()
        else:
            body = response.get_json(silent=True) or {}
            INGEST_REQUESTS.labels(str(body.get("error", {}).get("code", response.status_code))).inc()
    return response
