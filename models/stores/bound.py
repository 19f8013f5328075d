"""The record store in use for this process: chosen from the settings and bound where the app
binds its database (app/__init__.py), then reached by `records()`."""

from models.clickhouse.target import from_settings
from models.stores.clickhouse import ClickHouseStore
from models.stores.interface import RecordStore
from models.stores.sql import SqlStore

_store: RecordStore | None = None


def for_settings(settings) -> RecordStore:
    """The store the settings name: ClickHouse's when ANALYTICS_RECORD_STORE names one, else the
    SQL store (the records in ANALYTICS_DATABASE)."""
    target = from_settings(settings)
    return SqlStore() if target is None else ClickHouseStore(target)


def bind(store: RecordStore) -> None:
    global _store
    _store = store


def records() -> RecordStore:
    if _store is None:
        raise RuntimeError("no record store is bound: the app binds one in create_app")
    return _store
