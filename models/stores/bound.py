"""The record store in use for this process: chosen from the settings and bound where the app
binds its database (app/__init__.py), then reached by `records()`."""

from models.stores.interface import RecordStore
from models.stores.sql import SqlStore

_store: RecordStore | None = None


def for_settings(settings) -> RecordStore:
    """The store the settings name. Always the SQL store until the ClickHouse one is whole
    (ANALYTICS_RECORD_STORE is refused before this: models/clickhouse/target.py)."""
    return SqlStore()


def bind(store: RecordStore) -> None:
    global _store
    _store = store


def records() -> RecordStore:
    if _store is None:
        raise RuntimeError("no record store is bound: the app binds one in create_app")
    return _store
