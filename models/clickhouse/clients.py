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
    last = dict(
        connection.rows(
            f"SELECT endpoint, toUnixTimestamp64Milli(max(ts)) FROM {table} "
            "WHERE endpoint IN {endpoints:Array(String)} GROUP BY endpoint",
            {"endpoints": endpoints},
        )
    )
    marks = {}
    ids = list(names)
    for part in chunks(ids, 500):
        marks.update(query(f"SELECT id, lost_mark FROM endpoint WHERE id IN ({placeholders(len(part))})", part))
    activity = {}
    for ident, name in names.items():
        times = [t for t in (marks.get(ident), last.get(name)) if t is not None]
        activity[name] = max(times) if times else None
    return activity, entries
