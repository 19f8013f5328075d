"""What the ClickHouse store can say about itself for monitoring, as models.clients.status says it
of the SQL store: its size on disk, each endpoint's last activity."""

from models.clickhouse import tables
from models.clickhouse.clients import endpoint_last_activity
from models.clients import status
from models.engine.database import query


def database_sizes(connection) -> tuple[int, int | None]:
    """(bytes the store takes: the records' tables in ClickHouse and the SQL database beside
    them, bytes of the SQL database's write-ahead log or None)."""
    kept, log = status.database_sizes()
    parts = connection.rows(
        f"SELECT sum(bytes_on_disk) FROM {tables.parts(connection.target)} "
        "WHERE database = {database:String} AND active",
        {"database": connection.target.database},
    )
    return kept + int(parts[0][0] or 0), log


def endpoints_by_age(connection) -> list[tuple[str, int | None]]:
    """(name, last activity ms or None) of every endpoint, oldest endpoint first."""
    rows = query("SELECT id, name FROM endpoint ORDER BY id").fetchall()
    last = endpoint_last_activity(connection, dict(rows))
    return [(name, last.get(ident)) for ident, name in rows]
