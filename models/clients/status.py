"""What the store can say about itself for monitoring: its size on disk and each endpoint's
newest record. Read at scrape time, so the figures are as fresh as the scrape."""

from models.clients.clients import endpoint_last_activity
from models.engine.database import db, query


def database_sizes() -> tuple[int, int | None]:
    """(bytes the store takes, bytes of its write-ahead log; None where the engine keeps none of
    its own, as PostgreSQL)."""
    return db.obj.dialect.sizes(query)


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
