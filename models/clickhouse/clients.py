"""Client entries with their last activity from ClickHouse: the entries (aliases, metadata) are
the SQL database's, the times of their newest records ClickHouse's `last_activity`."""

from models.clients.clients import client_entries
from models.engine.database import query, snapshot
from models.engine.sql import chunks, placeholders


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
    clients = sorted({entry.client_id for entry in entries})
    newest = {
        (name, client): ts
        for name, client, ts in connection.rows(
            f"SELECT endpoint, client, toUnixTimestamp64Milli(max(ts)) FROM {table} "
            "WHERE endpoint IN {endpoints:Array(String)} AND client IN {client_ids:Array(String)} "
            "GROUP BY endpoint, client",
            {"endpoints": endpoints, "client_ids": clients},
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
