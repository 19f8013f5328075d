"""Client entries with their last activity from ClickHouse: the entries (aliases, metadata) are
the SQL database's, the times of their newest records ClickHouse's `last_activity`."""

from models.clickhouse import deletion
from models.clients.clients import clear_metadata, client_entries, mark_logged
from models.engine.database import query, snapshot, write_transaction
from models.engine.sql import chunks, placeholders
from models.privacy import privacy


@snapshot()
def list_clients(connection, endpoint: str | None = None, client_ids=None, endpoint_limit=None):
    """As models.clients.clients.list_clients: ({endpoint name: ms or None}, [ClientRow]), a
    client's last activity its newest stored record, an endpoint's the newest of all its records
    and of its lost-record mark."""
    names, entries = client_entries(endpoint, client_ids, endpoint_limit)
    if not entries:
        return {}, []
    table = f"{connection.target.database}.last_activity"
    endpoints = sorted(set(names.values()))
    # The clients are named only when the request names them: sending every client of a large
    # install as a parameter cost more than reading the endpoints' rows whole (BENCHMARKS.md).
    where, params = "endpoint IN {endpoints:Array(String)}", {"endpoints": endpoints}
    if client_ids is not None:
        where += " AND client IN {client_ids:Array(String)}"
        params["client_ids"] = sorted({entry.client_id for entry in entries})
    newest = {
        (name, client): ts
        for name, client, ts in connection.rows(
            f"SELECT endpoint, client, toUnixTimestamp64Milli(max(ts)) FROM {table} WHERE {where} "
            "GROUP BY endpoint, client",
            params,
        )
    }
    entries = [entry._replace(last_ts=newest.get((entry.endpoint, entry.client_id))) for entry in entries]
    last = endpoint_last_activity(connection, names)
    activity = {name: last[ident] for ident, name in names.items()}
    return activity, entries


def endpoint_last_activity(connection, names: dict[int, str]) -> dict[int, int | None]:
    """max(newest stored record, lost mark) per endpoint id, of endpoints {id: name}."""
    if not names:
        return {}
    newest = dict(
        connection.rows(
            f"SELECT endpoint, toUnixTimestamp64Milli(max(ts)) FROM {connection.target.database}.last_activity "
            "WHERE endpoint IN {endpoints:Array(String)} GROUP BY endpoint",
            {"endpoints": sorted(set(names.values()))},
        )
    )
    marks = {}
    for part in chunks(list(names), 500):
        marks.update(query(f"SELECT id, lost_mark FROM endpoint WHERE id IN ({placeholders(len(part))})", part))
    found = {}
    for ident, name in names.items():
        times = [t for t in (marks.get(ident), newest.get(name)) if t is not None]
        found[ident] = max(times) if times else None
    return found


def set_logged(connection, endpoint: str, client_id: str, logged: bool) -> tuple:
    """As models.clients.clients.set_logged: (the entry, made with its endpoint when the client
    has not been seen yet; how many stored records went). Marked not logged, its records go
    (their counts left in the statistics that name no client, or, where the endpoint's privacy
    counts no such client, in none) and its entry's metadata (but the alias). The mark commits
    first, so that a batch stored meanwhile stores none of its records."""
    with write_transaction():
        endpoint_id = mark_logged(endpoint, client_id, logged)
    deleted = 0
    if not logged:
        if privacy.effective(privacy.settings(), endpoint)["unlogged_clients"] == privacy.COUNTED:
            deleted = deletion.delete_to_anonymous(connection, endpoint, client_id)
        else:
            deleted = deletion.delete_records(connection, [endpoint], [client_id])
        with write_transaction():
            clear_metadata(endpoint_id, client_id)
    _, entries = list_clients(connection, endpoint, [client_id])
    return entries[0], deleted
