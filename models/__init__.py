"""The record store: peewee models on SQLite (WAL) or PostgreSQL, and the queries the API needs.

It speaks rows: named tuples with the store's column names. The wire (schemas/) makes JSON."""

from .activity import ROW_FIELDS, RecordRow, committed_top, iter_raw_batches, page_records, records_after
from .admin_actions import AdminActionRow, list_actions, record_action, update_metadata
from .clients import ClientRow, delete_clients, get_client, list_clients, set_alias
from .database import (
    bind,
    connection,
    db,
    is_sqlite,
    is_stopped_query,
    limit_queries,
    open_database,
    reclaim_space,
    write_transaction,
)
from .filters import SEARCH_MODES, Filters
from .ingestion import AlreadyStored, forget_batch_keys, store_once, store_records
from .jobs import claim, finish
from .keys import create_key, find_key, key_is_live, list_keys, revoke_key
from .names import BOOLEAN_TEXT, value_texts
from .records import delete_records, expire_statistics
from .statistics import LatencyRow, availability, count, latency, series, statistics_start, top, top_series, trend
from .status import database_sizes, endpoints_by_age, first_endpoints
from .tables import create_schema
from .tokens import token_secret, use_token

__all__ = [
    "BOOLEAN_TEXT",
    "ROW_FIELDS",
    "SEARCH_MODES",
    "AdminActionRow",
    "AlreadyStored",
    "ClientRow",
    "LatencyRow",
    "Filters",
    "RecordRow",
    "availability",
    "bind",
    "claim",
    "connection",
    "count",
    "create_key",
    "create_schema",
    "database_sizes",
    "db",
    "delete_clients",
    "delete_records",
    "endpoints_by_age",
    "expire_statistics",
    "find_key",
    "finish",
    "first_endpoints",
    "forget_batch_keys",
    "get_client",
    "is_sqlite",
    "is_stopped_query",
    "latency",
    "iter_raw_batches",
    "key_is_live",
    "limit_queries",
    "list_actions",
    "list_clients",
    "list_keys",
    "committed_top",
    "open_database",
    "page_records",
    "reclaim_space",
    "record_action",
    "records_after",
    "revoke_key",
    "series",
    "set_alias",
    "statistics_start",
    "store_once",
    "store_records",
    "token_secret",
    "top",
    "top_series",
    "trend",
    "update_metadata",
    "use_token",
    "value_texts",
    "write_transaction",
]
