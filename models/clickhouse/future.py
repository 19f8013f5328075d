"""Records stamped in the future (stored before the future tolerance was lowered: `flask --app
wsgi records future`), found and deleted as models.clients.deletion finds and deletes them in
the SQL store."""

from models.clickhouse import unstored
from models.engine.database import query

_AFTER = "ts > fromUnixTimestamp64Milli({after:Int64})"


def future_records(connection, after_ms: int) -> list[tuple[str, int, int, int]]:
    """(endpoint, records, oldest, newest timestamp) of the records stamped after `after_ms`, by
    endpoint name."""
    rows = connection.rows(
        "SELECT endpoint, count(), toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)) "
        f"FROM {connection.target.database}.records WHERE {_AFTER} GROUP BY endpoint ORDER BY endpoint",
        {"after": after_ms},
    )
    return [tuple(row) for row in rows]


def delete_future(connection, after_ms: int) -> int:
    """Delete the records stamped after `after_ms`; how many. Inside the caller's write
    transaction. Their time is no one's activity: a lost mark past it is cleared, and they are
    erased as if never stored (unstored.erase)."""
    query("UPDATE endpoint SET lost_mark = NULL WHERE lost_mark > ?", [after_ms])
    return unstored.erase(connection, _AFTER, {"after": after_ms})
