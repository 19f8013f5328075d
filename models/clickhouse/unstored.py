"""Records taken out as if they had never been stored: those a batch inserted whose transaction
then failed (ingestion.py), and those stamped in the future (future.delete_future). Unlike a
deletion, nothing of them stays: no lost mark, no last activity, no sighting of their names;
what ClickHouse's views had noted of them is taken away (their daily counts) or made again from
the records left."""

from models.clickhouse import counts, derived, tables


def erase(connection, where: str, params: dict) -> int:
    """Delete the records `where` (a condition with its `params`) selects, and make last
    activity and the names' sightings again for what they touched; how many went."""
    database = connection.target.database
    found = connection.rows(f"SELECT count() FROM {database}.records WHERE {where}", params)[0][0]
    if not found:
        return 0
    clients = [
        tuple(row)
        for row in connection.rows(f"SELECT DISTINCT endpoint, client FROM {database}.records WHERE {where}", params)
    ]
    erased = {
        (scope, question): first
        for scope, question, first in connection.rows(
            f"SELECT scope, question, toUnixTimestamp64Milli(min(ts)) FROM {database}.records "
            f"ARRAY JOIN [endpoint, ''] AS scope WHERE {where} GROUP BY scope, question",
            params,
        )
    }
    # Stored once under a token of what is erased: an erasure cut short and run again counts down once.
    newest = connection.rows(f"SELECT max(id) FROM {database}.records WHERE {where}", params)[0][0]
    token = f"unstored {where} {sorted(params.items())} {newest} {found}"
    counts.take_away(connection, where, params, None, token)
    connection.command(f"DELETE FROM {tables.changing(connection.target, 'records')} WHERE {where}", params)
    derived.last_activity_again(connection, derived.PAIRS, {"pairs": clients})
    _sightings_again(connection, erased)
    return found


def _sightings_again(connection, erased: dict[tuple[str, str], int]) -> None:
    """The sightings of the names erased (per endpoint, and over all of them: ''): a first
    sighting older than every erased record of the name stays (it may be of records retention
    took since); else the first is the oldest record left. The last is the newest record left
    (or the first). A name with neither is forgotten."""
    database = connection.target.database
    scoped = {"pairs": sorted(erased)}
    within = "(endpoint, question) IN {pairs:Array(Tuple(String, String))}"
    before = {
        (scope, question): (domain, first)
        for scope, question, domain, first in connection.rows(
            f"SELECT endpoint, question, any(registrable_domain), toUnixTimestamp64Milli(min(first)) "
            f"FROM {database}.names_seen WHERE {within} GROUP BY endpoint, question",
            scoped,
        )
    }
    left = {
        (scope, question): (domain, oldest, newest)
        for scope, question, domain, oldest, newest in connection.rows(
            "SELECT scope, question, any(registrable_domain), toUnixTimestamp64Milli(min(ts)), "
            f"toUnixTimestamp64Milli(max(ts)) FROM {database}.records ARRAY JOIN [endpoint, ''] AS scope "
            "WHERE (scope, question) IN {pairs:Array(Tuple(String, String))} GROUP BY scope, question",
            scoped,
        )
    }
    rows = []
    for pair, erased_first in sorted(erased.items()):
        domain, first = before.get(pair, (None, None))
        kept = first is not None and first < erased_first
        if pair in left:
            domain, oldest, newest = left[pair]
            first = first if kept else oldest
            rows.append((*pair, domain, first, max(first, newest)))
        elif kept:
            rows.append((*pair, domain, first, first))
    derived.replace(connection, "names_seen", within, scoped, derived.SIGHTING, rows=rows)


# What this module makes again, beside the records: every table a view fills from them.
assert {table.name for table in tables.TABLES if table.filled_by} == {"last_activity", "names_seen", "daily_counts"}, (
    "a table a view fills from the records is made again here when records are erased"
)
