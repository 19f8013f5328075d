"""SqlStore: the records kept in ANALYTICS_DATABASE (SQLite or PostgreSQL), as rows and frozen
blocks. Each operation is the store's existing function, bound as it is: the logic stays in its
room (docs/record-store.md)."""

from models.clients import activity, clients, deletion, status
from models.delivery import alerts, outputs
from models.ingest import ingestion
from models.privacy import rewrites, unused_terms
from models.records import freezing, names
from models.statistics import counting, statistics
from models.stores.interface import RecordStore


class SqlStore(RecordStore):
    store_records = staticmethod(ingestion.store_records)

    def store_once(self, records: list[tuple], key: str, now_ms: int) -> int:
        return ingestion.store_once(records, key, now_ms)

    page_records = staticmethod(activity.page_records)
    iter_raw_batches = staticmethod(activity.iter_raw_batches)
    value_texts = staticmethod(names.value_texts)
    records_after = staticmethod(activity.records_after)
    committed_top = staticmethod(activity.committed_top)

    count = staticmethod(statistics.count)
    top = staticmethod(statistics.top)
    series = staticmethod(statistics.series)
    top_series = staticmethod(statistics.top_series)
    trend = staticmethod(statistics.trend)
    counts_of = staticmethod(statistics.counts_of)
    newly_seen = staticmethod(statistics.newly_seen)
    latency = staticmethod(statistics.latency)
    availability = staticmethod(statistics.availability)
    statistics_start = staticmethod(statistics.statistics_start)

    list_clients = staticmethod(clients.list_clients)
    set_logged = staticmethod(clients.set_logged)
    purge_records = staticmethod(clients.purge_records)
    delete_clients = staticmethod(clients.delete_clients)
    delete_records = staticmethod(deletion.delete_records)
    future_records = staticmethod(deletion.future_records)
    delete_future = staticmethod(deletion.delete_future)
    expire_statistics = staticmethod(deletion.expire_statistics)

    def limit_reads(self, seconds: float | None) -> None:
        pass  # its reads are ANALYTICS_DATABASE's, under models.engine.database.limit_queries

    database_sizes = staticmethod(status.database_sizes)
    endpoints_by_age = staticmethod(status.endpoints_by_age)
    first_endpoints = staticmethod(status.first_endpoints)

    def set_behind_limit(self, records: int) -> None:
        # A module setting: ingestion reads it at every batch (models/statistics/counting.py).
        counting.behind_limit = records

    configure = staticmethod(freezing.configure)

    def open(self) -> None:
        pass  # ANALYTICS_DATABASE, opened with the app's or the feed's database

    def close(self) -> None:
        pass  # ANALYTICS_DATABASE is the app's or the feed's, which close it

    waiting = staticmethod(counting.waiting)
    not_counted = staticmethod(counting.not_counted)
    catch_up_aside = staticmethod(counting.catch_up_aside)
    freeze_a_look = staticmethod(counting.freeze_a_look)

    change_privacy = staticmethod(rewrites.change)
    privacy_in_force = staticmethod(rewrites.in_force)
    plan_ages = staticmethod(rewrites.plan_ages)
    run_rewrites = staticmethod(rewrites.run)
    clean_unused_terms = staticmethod(unused_terms.clean)

    endpoint_activity = staticmethod(alerts.endpoint_activity)
    alert_records_after = staticmethod(alerts.records_after)
    client_counts = staticmethod(alerts.client_counts)
    seed_domains = staticmethod(alerts.seed_domains)

    newest_id = staticmethod(outputs.newest_id)
    pending = staticmethod(outputs.pending)
    backlog = staticmethod(outputs.backlog)
    skip_point = staticmethod(outputs.skip_point)
