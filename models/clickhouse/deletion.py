"""Deleting records from ClickHouse, as models.clients.deletion does in the SQL store: the
endpoints' lost marks raised in the SQL database, the records gone by a lightweight DELETE, and
what is kept beside them (last activity, names first seen) made again for what was touched
(docs/clickhouse.md "Deletions").

Two writers' turns, as ClickHouse's DELETE commits by itself, outside the SQL database's
transaction: the lost marks are committed first (raised to records that are still there, they
change no last activity), then the records go; a deletion cut short between the two leaves the
marks raised and the records in place, and run again deletes them. The records chosen are those
numbered up to the counter when the first turn began: one stored in between is not the
deletion's."""

from models.clickhouse import numbers
from models.clients.clients import client_entries
from models.clients.deletion import raise_lost_marks
from models.engine.database import query, write_transaction
from models.engine.sql import chunks
from models.schema.endpoints import endpoint_ids


def delete_records(connection, endpoints=None, client_ids=None, end_ms=None, endpoint_limit=None, after_batch=None):
    """Delete the records of the selected clients (everyone's when neither filter is given) up
    to `end_ms` (inclusive; None: all) and raise their endpoints' lost marks to match; how many.
    `after_batch(deleted)` runs in the transaction that ends the deletion. ClickHouse deletes a
    whole selection in one mutation, which holds no batch being stored back for long."""
    return _delete(connection, endpoints, client_ids, end_ms, endpoint_limit, after_batch)


def delete_clients(connection, endpoints=None, client_ids=None, end_ms: int = 0, endpoint_limit=None):
    """Purge the selected clients' records up to `end_ms` and delete the entries left without
    records: (the deleted (endpoint, client_id), sorted; how many records went), as
    models.clients.clients.delete_clients. An entry that still has a record (newer than end_ms,
    or stored meanwhile) shows the client came back: it stays."""
    gone = []

    def without_records(_):
        selected = [(entry.endpoint, entry.client_id) for entry in _selected(endpoints, client_ids, endpoint_limit)]
        kept = {
            tuple(pair)
            for pair in connection.rows(
                f"SELECT DISTINCT endpoint, client FROM {connection.target.database}.last_activity "
                "WHERE (endpoint, client) IN {pairs:Array(Tuple(String, String))}",
                {"pairs": selected},
            )
        }
        gone.extend(sorted(pair for pair in selected if pair not in kept))
        for part in chunks(gone, 250):
            pairs = " OR ".join(["(e.name = ? AND c.client_id = ?)"] * len(part))
            query(
                "DELETE FROM client WHERE id IN"
                f" (SELECT c.id FROM client c JOIN endpoint e ON e.id = c.endpoint WHERE {pairs})",
                [value for pair in part for value in pair],
            )

    deleted = _delete(connection, endpoints, client_ids, end_ms, endpoint_limit, without_records)
    return gone, deleted


def _selected(endpoints, client_ids, endpoint_limit) -> list:
    """The client entries (ClientRow) a deletion selects, as client_selection does."""
    if not endpoints:
        return client_entries(None, client_ids, endpoint_limit)[1]
    return [entry for endpoint in endpoints for entry in client_entries(endpoint, client_ids, endpoint_limit)[1]]


def _delete(connection, endpoints, client_ids, end_ms, endpoint_limit, then=None) -> int:
    database = connection.target.database
    with write_transaction():
        where, params = ["id <= {top:UInt64}"], {"top": numbers.top()}
        if endpoints or client_ids or endpoint_limit is not None:
            where.append("(endpoint, client) IN {pairs:Array(Tuple(String, String))}")
            chosen = _selected(endpoints, client_ids, endpoint_limit)
            params["pairs"] = sorted({(entry.endpoint, entry.client_id) for entry in chosen})
        if end_ms is not None:
            where.append("ts <= fromUnixTimestamp64Milli({end:Int64})")
            params["end"] = end_ms
        condition = " AND ".join(where)
        marks = []
        if params.get("pairs", True):
            marks = connection.rows(
                f"SELECT endpoint, toUnixTimestamp64Milli(max(ts)), count() FROM {database}.records "
                f"WHERE {condition} GROUP BY endpoint",
                params,
            )
        if marks:
            ids = endpoint_ids([name for name, _, _ in marks])
            raise_lost_marks({ids[name]: newest for name, newest, _ in marks})
    with write_transaction():
        if marks:
            connection.command(f"DELETE FROM {database}.records WHERE {condition}", params)
            _last_activity_again(connection, [where[1]] if "pairs" in params else [], params)
        if not client_ids:  # a deletion of whole endpoints' records (or everyone's) forgets first times
            scope = None
            if endpoints or endpoint_limit is not None:
                names = set(endpoints or endpoint_limit)
                scope = sorted(names & set(endpoint_limit) if endpoints and endpoint_limit is not None else names)
            _names_seen_again(connection, scope, end_ms)
        deleted = sum(n for _, _, n in marks)
        if then is not None:
            then(deleted)
    return deleted


def _last_activity_again(connection, selection: list[str], params: dict) -> None:
    """The clients' last activity made again from their records left."""
    database = connection.target.database
    condition = " AND ".join(selection) or "1"
    connection.command(f"DELETE FROM {database}.last_activity WHERE {condition}", params)
    connection.command(
        f"INSERT INTO {database}.last_activity SELECT endpoint, client, max(ts) FROM {database}.records "
        f"WHERE {condition} GROUP BY endpoint, client",
        params,
    )


def _names_seen_again(connection, scope: list[str] | None, end_ms: int | None) -> None:
    """A deletion of whole endpoints' records (`scope`; None: everyone's) up to `end_ms` (None:
    all): the names they first saw up to then noted again from the records left, and over all
    endpoints ('') from what every endpoint still holds, as models.statistics.first_seen.forget."""
    database = connection.target.database
    seen = f"{database}.names_seen"
    params = {"end": end_ms if end_ms is not None else 2**62, "scope": scope or []}
    on = "endpoint IN {scope:Array(String)}" if scope is not None else "endpoint != ''"
    forgotten = (
        f"SELECT endpoint, question FROM {seen} WHERE {on} GROUP BY endpoint, question "
        "HAVING toUnixTimestamp64Milli(min(first)) <= {end:Int64}"
    )
    pairs = [tuple(row) for row in connection.rows(forgotten, params)]
    everywhere = (
        f"SELECT question FROM {seen} WHERE endpoint = '' GROUP BY question "
        "HAVING toUnixTimestamp64Milli(min(first)) <= {end:Int64}"
    )
    names = [row[0] for row in connection.rows(everywhere, params)]
    if pairs:
        connection.command(
            f"DELETE FROM {seen} WHERE (endpoint, question) IN {{pairs:Array(Tuple(String, String))}}",
            {"pairs": pairs},
        )
        connection.command(
            f"INSERT INTO {seen} SELECT endpoint, question, registrable_domain, min(ts), max(ts) "
            f"FROM {database}.records WHERE (endpoint, question) IN {{pairs:Array(Tuple(String, String))}} "
            "GROUP BY endpoint, question, registrable_domain",
            {"pairs": pairs},
        )
    if names:
        connection.command(
            f"DELETE FROM {seen} WHERE endpoint = '' AND question IN {{questions:Array(String)}}", {"questions": names}
        )
        connection.command(
            f"INSERT INTO {seen} SELECT '', question, registrable_domain, min(first), max(last) FROM {seen} "
            "WHERE endpoint != '' AND question IN {questions:Array(String)} GROUP BY question, registrable_domain",
            {"questions": names},
        )
