"""The record store: peewee models on SQLite (WAL) or PostgreSQL, and the queries the API needs."""

from .activity import ROW_FIELDS, iter_raw_batches, iter_records, newest_id, page_records, records_after
from .audit import list_actions, record_action, update_metadata
from .clients import client_names, delete_clients, get_client, list_clients, set_alias
from .database import bind, connection, db, is_sqlite, open_database, reclaim_space, write_transaction
from .filters import Filters
from .ingestion import store_records
from .jobs import claim, finish
from .keys import create_key, find_key, list_keys, revoke_key
from .records import delete_records
from .statistics import availability, buckets, buckets_by, count, count_by, top_values
from .tables import create_schema
from .terms import term_values
from .tokens import create_token, redeem_token

__all__ = [
    "ROW_FIELDS",
    "iter_raw_batches",
    "bind",
    "claim",
    "client_names",
    "create_key",
    "find_key",
    "finish",
    "list_actions",
    "list_keys",
    "is_sqlite",
    "reclaim_space",
    "record_action",
    "revoke_key",
    "update_metadata",
    "Filters",
    "availability",
    "buckets",
    "buckets_by",
    "count",
    "count_by",
    "term_values",
    "top_values",
    "create_token",
    "iter_records",
    "newest_id",
    "page_records",
    "records_after",
    "redeem_token",
    "connection",
    "create_schema",
    "db",
    "delete_clients",
    "delete_records",
    "get_client",
    "list_clients",
    "open_database",
    "set_alias",
    "store_records",
    "write_transaction",
]
