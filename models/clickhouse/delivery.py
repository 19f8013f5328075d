"""What alerts and outputs read of the records in ClickHouse, as models.delivery.alerts and
models.delivery.outputs read them in the SQL store: records after a number, counts per client,
endpoints' last activity, the domains a new rule already knows, an output's backlog."""

from models.clickhouse import activity, numbers
from models.clickhouse.clients import endpoint_last_activity
from models.delivery.alerts import SeenRecord
from models.delivery.outputs import filters_of
from models.engine.database import query, write_transaction
from models.engine.sql import placeholders


def endpoint_activity(connection, names: list) -> dict[str, int | None]:
    """Each named endpoint's last activity (ms; None: no record yet, or never seen)."""
    ids = dict(query(f"SELECT id, name FROM endpoint WHERE name IN ({placeholders(len(names))})", names).fetchall())
    last = endpoint_last_activity(connection, ids)
    return {name: None for name in names} | {name: last[ident] for ident, name in ids.items()}


def _scope(names: list, clients: list | None) -> tuple[str, dict]:
    condition, params = "endpoint IN {endpoints:Array(String)}", {"endpoints": list(names)}
    if clients:
        condition += " AND client IN {client_ids:Array(String)}"
        params["client_ids"] = list(clients)
    return condition, params


def alert_records_after(connection, names: list, clients: list | None, after_id: int, limit: int):
    """Records numbered after `after_id` on the named endpoints (and clients), lowest first,
    among the next `limit` numbers stored, as SeenRecords; and the number to go on from (the
    last read; `after_id` when none)."""
    records = f"{connection.target.database}.records"
    upto = connection.rows(
        f"SELECT max(id), count() FROM (SELECT id FROM {records} WHERE id > {{after:UInt64}} "
        "AND id <= {top:UInt64} ORDER BY id LIMIT {most:UInt64})",
        {"after": after_id, "top": numbers.top(), "most": limit},
    )[0]
    if not upto[1]:
        return [], after_id
    condition, params = _scope(names, clients)
    rows = connection.rows(
        f"SELECT id, toUnixTimestamp64Milli(ts), endpoint, client, question, registrable_domain FROM {records} "
        f"WHERE id > {{after:UInt64}} AND id <= {{upto:UInt64}} AND {condition} ORDER BY id",
        {**params, "after": after_id, "upto": upto[0]},
    )
    return [SeenRecord._make(row) for row in rows], upto[0]


def client_counts(connection, names: list, clients: list | None, start_ms: int, end_ms: int) -> list[tuple]:
    """Per client of the named endpoints (and clients) with records in [start_ms, end_ms]:
    (endpoint, client id, queries, NXDOMAIN answers, blocked queries)."""
    condition, params = _scope(names, clients)
    return connection.rows(
        "SELECT endpoint, client, count(), countIf(status = 'NXDOMAIN'), countIf(action = 0) "
        f"FROM {connection.target.database}.records WHERE ts >= fromUnixTimestamp64Milli({{start:Int64}}) "
        f"AND ts <= fromUnixTimestamp64Milli({{end:Int64}}) AND {condition} GROUP BY endpoint, client",
        {**params, "start": start_ms, "end": end_ms},
    )


def seed_domains(connection, rule_id: int, names: list, since_ms: int) -> None:
    """Remember the registrable domains asked on the named endpoints since `since_ms` as known to
    the new-domain rule `rule_id` (subjects "endpoint/domain"), from the names' sightings kept
    past the records' horizon (names_seen)."""
    seen = connection.rows(
        "SELECT endpoint, registrable_domain, toUnixTimestamp64Milli(max(last)) AS newest "
        f"FROM {connection.target.database}.names_seen WHERE endpoint IN {{endpoints:Array(String)}} "
        "AND registrable_domain != '' GROUP BY endpoint, registrable_domain HAVING newest >= {since:Int64}",
        {"endpoints": list(names), "since": since_ms},
    )
    with write_transaction():
        for endpoint, domain, newest in seen:
            query(
                "INSERT INTO alert_mark (rule, subject, ts) VALUES (?, ?, ?) ON CONFLICT (rule, subject) DO NOTHING",
                [rule_id, f"{endpoint}/{domain}", newest],
            )


def newest_id() -> int:
    """The number an output that starts "now" starts after."""
    return numbers.top()


def pending(connection, output, limit: int) -> tuple[list, int]:
    """The output's next records after its cursor, lowest number first, and the number its
    cursor may move to once they are accepted (past other endpoints' records too)."""
    return activity.records_after(connection, filters_of(output), output.cursor, limit=limit)


def backlog(connection, output, at_most: int) -> int:
    """How many of the output's records are stored after its cursor, counted up to `at_most`."""
    where, params = activity.condition(filters_of(output))
    return connection.rows(
        f"SELECT count() FROM (SELECT 1 FROM {connection.target.database}.records WHERE id > {{cursor:UInt64}} "
        f"AND id <= {{top:UInt64}} AND {where} LIMIT {{most:UInt64}})",
        {**params, "cursor": output.cursor, "top": numbers.top(), "most": at_most},
    )[0][0]


def skip_point(connection, output, keep: int) -> tuple[int, int] | None:
    """Where the cursor would go for only the output's newest `keep` records to remain, and how
    many records it would pass; None when no more than `keep` wait."""
    where, params = activity.condition(filters_of(output))
    records = f"{connection.target.database}.records"
    scope = {**params, "cursor": output.cursor, "top": numbers.top()}
    found = connection.rows(
        f"SELECT id FROM {records} WHERE id > {{cursor:UInt64}} AND id <= {{top:UInt64}} AND {where} "
        "ORDER BY id DESC LIMIT 1 OFFSET {keep:UInt64}",
        {**scope, "keep": keep},
    )
    if not found:
        return None
    skipped = connection.rows(
        f"SELECT count() FROM {records} WHERE id > {{cursor:UInt64}} AND id <= {{upto:UInt64}} AND {where}",
        {**scope, "upto": found[0][0]},
    )[0][0]
    return found[0][0], skipped
