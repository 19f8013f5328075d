"""GET /metrics: the service's figures in the Prometheus text format, summed over every worker
(the counters are app/metrics.py's; the store's figures are read at scrape time)."""

import os

from flask import Blueprint, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

import models.ingest.losses
from app import metrics as counters
from app.auth import endpoint_limit, requires
from app.errors import ApiError, ErrorCode
from app.strict import takes_no_query
from models.runtime.clock import now_ms
from models.stores.bound import records

blp = Blueprint("metrics", __name__)


@blp.get("/metrics")
@takes_no_query
@requires("metrics")
def metrics():
    """Every metric, in the Prometheus text format."""
    if endpoint_limit() is not None:
        raise ApiError(ErrorCode.FORBIDDEN_ENDPOINT, "Metrics cover every endpoint: use a key with no endpoint limit.")
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        counted = CollectorRegistry()
        MultiProcessCollector(counted)
    else:
        counted = counters.LOCAL
    store = CollectorRegistry()
    store.register(_StoreFigures())
    return Response(generate_latest(counted) + generate_latest(store), content_type=CONTENT_TYPE_LATEST)


class _StoreFigures:
    """Figures read from the store at scrape time, so that every worker answers alike."""

    def collect(self):
        database, wal = records().database_sizes()
        yield GaugeMetricFamily("dns_analytics_database_size_bytes", "Size of the database on disk.", value=database)
        if wal is not None:
            yield GaugeMetricFamily("dns_analytics_wal_size_bytes", "Size of SQLite's write-ahead log.", value=wal)
        ages = GaugeMetricFamily(
            "dns_analytics_newest_record_age_seconds",
            "Seconds since the newest record of each endpoint (its last activity).",
            labels=["endpoint"],
        )
        names = dict(records().endpoints_by_age())
        labelled = set(counters.endpoint_labels(set(names)).values()) - {counters.OTHER}
        newest_by_label: dict[str, int] = {}
        for name, newest in names.items():
            label = name if name in labelled else counters.OTHER
            if newest is not None and newest > newest_by_label.get(label, -1):
                newest_by_label[label] = newest
        now = now_ms()
        for label, newest in newest_by_label.items():
            ages.add_metric([label], max(0, now - newest) / 1000)
        yield ages
        yield from _losses()
        yield GaugeMetricFamily(
            "dns_analytics_records_not_counted",
            "Records stored and not counted into the statistics yet (reads count them from the records).",
            value=records().not_counted(),
        )


def _losses() -> tuple[CounterMetricFamily, CounterMetricFamily]:
    """The records feeds lost, by endpoint (labelled as the other endpoint metrics) and place;
    and apart, the queries resolvers never answered, which the feeds report the same way."""
    lost = CounterMetricFamily(
        "dns_analytics_feed_lost_records",
        "Records the feeds lost before storing them, by place: "
        + "; ".join(f"{place}: {meaning}" for place, meaning in models.ingest.losses.LOSS_PLACES.items())
        + ".",
        labels=["endpoint", "place"],
    )
    unanswered = CounterMetricFamily(
        "dns_analytics_feed_unanswered_queries",
        "Queries the resolvers logged and never answered (no upstream, a time-out): no record lost, "
        "as the dnstap collector saw them.",
        labels=["endpoint"],
    )
    rows = models.ingest.losses.totals()
    labels = counters.endpoint_labels({endpoint for endpoint, _, _ in rows})
    summed: dict[tuple[str, str], int] = {}
    for endpoint, place, total in rows:
        key = (labels[endpoint], place)
        summed[key] = summed.get(key, 0) + total
    for (endpoint, place), total in summed.items():
        if place in models.ingest.losses.COUNTED_APART:
            unanswered.add_metric([endpoint], total)
        else:
            lost.add_metric([endpoint, place], total)
    return lost, unanswered
