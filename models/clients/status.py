"""What the store can say about itself for monitoring: its size on disk and each endpoint's
newest record. Read at scrape time, so the figures are as fresh as the scrape."""

import os

from models.clients.clients import endpoint_last_activity
from models.engine.database import db, is_sqlite, query


def database_sizes() -> tuple[int, int | None]:
    """(bytes of the database, bytes of SQLite's write-ahead log; None on PostgreSQL)."""
    if is_sqlite():
        path = db.obj.database
        return _file_size(path), _file_size(path + "-wal")
    # The tables and indexes of this store's schema, not the whole server's database.
    row = query(
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
    ).fetchone()
    return int(row[0]), None


def endpoints_by_age() -> list[tuple[str, int | None]]:
    """(name, newest timestamp in ms or None) of every endpoint, oldest endpoint first.

    The newest timestamp is the endpoint's last activity: its newest stored record, or the
    newest one it lost to deletion or retention if that is newer."""
    rows = query("SELECT id, name FROM endpoint ORDER BY id").fetchall()
    last = endpoint_last_activity([ident for ident, _ in rows])
    return [(name, last.get(ident)) for ident, name in rows]


def first_endpoints(limit: int) -> list[str]:
    """The names of the `limit` endpoints seen first (ids only grow, so this list only grows)."""
    return [name for (name,) in query("SELECT name FROM endpoint ORDER BY id LIMIT ?", [limit])]


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
