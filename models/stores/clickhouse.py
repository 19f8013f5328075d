"""ClickHouseStore: the records kept in ClickHouse (docs/clickhouse.md), the small transactional
data beside them in ANALYTICS_DATABASE. Each operation is a function of models/clickhouse/ given
the store's connection first: the logic stays in that room."""

import threading
from functools import partial

from models.clickhouse import (
    activity,
    clients,
    connection,
    csv_export,
    deletion,
    delivery,
    future,
    ingestion,
    numbers,
    rewrites,
    statistics,
    status,
    tables,
)
from models.clickhouse.target import Target
from models.clients import status as sql_status
from models.ingest import ingestion as sql_ingestion
from models.stores.interface import RecordStore


def _on_connection(function):
    """A method calling `function` with the store's connection first."""

    def method(self, *args, **kwargs):
        return function(self.connection, *args, **kwargs)

    method.__name__ = function.__name__
    method.__doc__ = function.__doc__
    return method


class ClickHouseStore(RecordStore):
    # An insert costs ClickHouse some 40 ms of CPU whatever its size (parts written for the
    # records and each view): 96 us a record in batches of 500, 26 in batches of 5,000
    # (BENCHMARKS.md, "The collector into chDB").
    FEED_BATCH = 5_000

    def __init__(self, target: Target):
        self.target = target
        self._connection = None
        self._opening = threading.Lock()

    @property
    def connection(self) -> connection.Connection:
        """Opened at first use, not when the app is made: gunicorn's master makes the app before
        it forks its worker, and chDB's folder must be opened by the process that serves."""
        if self._connection is not None:
            return self._connection
        with self._opening:  # a worker's threads reach for it at once as it starts
            if self._connection is None:
                opened = connection.connect(self.target)
                tables.create(opened)
                self._connection = opened
            return self._connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    store_records = _on_connection(ingestion.store_records)

    def store_once(self, records, key, now_ms):
        return sql_ingestion.store_once(records, key, now_ms, store=partial(ingestion.store_records, self.connection))

    page_records = _on_connection(activity.page_records)
    iter_raw_batches = _on_connection(activity.iter_batches)
    csv_lines = _on_connection(csv_export.lines)

    def value_texts(self, storage, values):
        return activity.texts(storage, values)

    records_after = _on_connection(activity.records_after)

    def committed_top(self):
        return numbers.top()

    count = _on_connection(statistics.count)
    top = _on_connection(statistics.top)
    series = _on_connection(statistics.series)
    top_series = _on_connection(statistics.top_series)
    trend = _on_connection(statistics.trend)
    counts_of = _on_connection(statistics.counts_of)
    newly_seen = _on_connection(statistics.newly_seen)
    latency = _on_connection(statistics.latency)
    availability = _on_connection(statistics.availability)

    statistics_start = _on_connection(statistics.statistics_start)

    list_clients = _on_connection(clients.list_clients)

    set_logged = _on_connection(clients.set_logged)

    def purge_records(self, endpoints, client_ids, end_ms, endpoint_limit, batch_size, after_batch=None):
        # One mutation deletes the whole selection: it holds the writers' turn for no longer
        # than a batch would (deletion.py).
        return deletion.delete_records(
            self.connection, endpoints, client_ids, end_ms, endpoint_limit=endpoint_limit, after_batch=after_batch
        )

    delete_clients = _on_connection(deletion.delete_clients)
    delete_records = _on_connection(deletion.delete_records)
    future_records = _on_connection(future.future_records)
    delete_future = _on_connection(future.delete_future)
    expire_statistics = _on_connection(deletion.expire_statistics)

    def limit_reads(self, seconds):
        connection.limit_reads(seconds)

    database_sizes = _on_connection(status.database_sizes)
    endpoints_by_age = _on_connection(status.endpoints_by_age)

    def first_endpoints(self, limit):
        return sql_status.first_endpoints(limit)

    # Nothing waits to be counted or frozen: ClickHouse's views count a batch as it is inserted,
    # and its merges compact the parts by themselves.

    def set_behind_limit(self, records):
        pass

    def configure(self, config):
        pass

    def open(self):
        self.connection  # noqa: B018 (the property opens it)

    def waiting(self):
        return 0

    def not_counted(self):
        return 0

    def catch_up_aside(self):
        return 0

    def freeze_a_look(self, arrived):
        return 0

    change_privacy = _on_connection(rewrites.change_privacy)
    privacy_in_force = _on_connection(rewrites.privacy_in_force)
    plan_ages = _on_connection(rewrites.plan_ages)
    run_rewrites = _on_connection(rewrites.run_rewrites)
    clean_unused_terms = _on_connection(rewrites.clean_unused_terms)

    endpoint_activity = _on_connection(delivery.endpoint_activity)
    alert_records_after = _on_connection(delivery.alert_records_after)
    client_counts = _on_connection(delivery.client_counts)
    seed_domains = _on_connection(delivery.seed_domains)

    def newest_id(self):
        return delivery.newest_id()

    pending = _on_connection(delivery.pending)
    backlog = _on_connection(delivery.backlog)
    skip_point = _on_connection(delivery.skip_point)
