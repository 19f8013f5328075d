"""The statistics read from ClickHouse: counts, top lists, time series, trends, response times
and what the records span, the same answers as models.statistics.statistics gives over the same
records. The window's whole days from the counts table where the SQL store reads its daily
rollups (so past the records' horizon, and for the clients not logged, the answers are the
same), the rest from the records themselves, which ClickHouse aggregates at scan speed
(models/clickhouse/counts.py)."""

from models.clickhouse import counts, tables
from models.clickhouse.activity import condition
from models.clickhouse.dims import DAY_MS, PAIRED, day_text, field, value_text
from models.records.filters import Filters, allowed_endpoints
from models.statistics.statistics import LatencyRow


def _records(connection) -> str:
    return f"{connection.target.database}.records"


def count(connection, filters: Filters) -> int:
    """The number of records the filters select."""
    return sum(n for _, n in counts.grouped(connection, filters, "b"))


def top(connection, filters: Filters, column: str, limit: int, descending: bool = True) -> list[tuple[str, int]]:
    """The `limit` most (or least) frequent values of `column` as (text, count), ties by text
    ascending; "" stands for unknown."""
    order = "DESC" if descending else "ASC"
    rows = counts.grouped(connection, filters, "v", column=column, tail=f"ORDER BY n {order}, v ASC LIMIT {int(limit)}")
    return [(value, n) for value, n in rows]


def counts_of(connection, filters: Filters, column: str, values: list[str]) -> dict[str, int]:
    """Record counts of these values (texts) of `column` in the filters' window."""
    if not values:
        return {}
    return dict(counts.grouped(connection, filters, "v", column=column, only=list(values)))


def series(connection, filters: Filters, interval_ms: int) -> dict[int, int]:
    """Record counts per time bucket (the bucket's start, a multiple of interval_ms)."""
    return dict(counts.grouped(connection, filters, "b", interval_ms=interval_ms))


def top_series(connection, filters: Filters, interval_ms: int, column: str, limit: int) -> tuple[list[str], dict]:
    """The window's `limit` most frequent values of `column`, and their counts per time bucket:
    (values, {bucket start: {value: count}})."""
    values = [value for value, _ in top(connection, filters, column, limit)]
    if not values:
        return values, {}
    found: dict[int, dict[str, int]] = {}
    for start, value, n in counts.grouped(connection, filters, "b, v", interval_ms, column, values):
        found.setdefault(start, {})[value] = n
    return values, found


def trend(connection, filters: Filters, baseline: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
    """The `limit` most frequent values of `column` in the filters' window, each with its count
    there and in the baseline's window."""
    found = top(connection, filters, column, limit)
    before = counts_of(connection, baseline, column, [value for value, _ in found])
    return [(value, n, before.get(value, 0)) for value, n in found]


def latency(connection, filters: Filters, column: str | None = None, limit: int = 1, descending: bool = True):
    """Response-time summaries (LatencyRow) of the records that have one: of them all (`column`
    None: one row, value None), or of the `limit` values of `column` with the most (or fewest)
    of them, ties by value. Percentiles by nearest rank, as the SQL store's."""
    where, params = condition(filters, connection)
    group = "NULL" if column is None else value_text(column)
    # Nearest rank: the ceil(n * p / 100)-th smallest, as arraySort and an index give it exactly.
    rows = connection.rows(
        f"SELECT {group} AS value, count() AS n, avg(response_time_ms), "
        "arraySort(groupArray(response_time_ms)) AS times, times[intDiv(n * 50 + 99, 100)], "
        f"times[intDiv(n * 95 + 99, 100)], max(response_time_ms) FROM {_records(connection)} "
        f"WHERE {where} AND response_time_ms IS NOT NULL GROUP BY value",
        params,
    )
    found = [LatencyRow(value, n, mean, p50, p95, most) for value, n, mean, _, p50, p95, most in rows]
    if column is None:
        return found or [LatencyRow(None, 0, None, None, None, None)]
    sign = -1 if descending else 1
    return sorted(found, key=lambda row: (sign * row.count, row.value))[:limit]


def availability(connection, filters: Filters) -> tuple[int | None, int | None, int]:
    """(oldest timestamp, newest timestamp, record count) of the records the filters allow."""
    where, params = condition(filters, connection)
    oldest, newest, n = connection.rows(
        "SELECT toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)), count() "
        f"FROM {_records(connection)} WHERE {where}",
        params,
    )[0]
    return (oldest, newest, n) if n else (None, None, 0)


def newly_seen(connection, filters: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
    """The names (`column` question or registrable_domain) first seen in the window, newest
    first, ties by name: (name, first seen ms, records in the window matching the filters). On
    the endpoints the filters allow (over all of them when they name none), from names_seen; for
    the clients they name, from those clients' records. A name a privacy setting dropped ('')
    is none."""
    start, end = filters.start_ms, filters.end_ms
    if filters.values.get("client") and (found := _clients_newly_seen(connection, filters, column, limit)) is not None:
        counts = counts_of(connection, filters, column, [name for name, _ in found])
        return [(name, first, counts.get(name, 0)) for name, first in found]
    if filters.values.get("client"):
        named = {sql: filters.values[sql] for sql in ("endpoint", "client") if sql in filters.values}
        scope = Filters(values=named, end_ms=end, endpoint_limit=filters.endpoint_limit)
        where, params = condition(scope)
        source = f"SELECT {column} AS name, min(ts) AS first FROM {_records(connection)} WHERE {where} GROUP BY name"
    else:
        allowed = allowed_endpoints(filters)
        if allowed is not None and not allowed:
            return []
        params = {"scopes": allowed if allowed is not None else [""]}
        source = (
            f"SELECT {column} AS name, min(first) AS first FROM {connection.target.database}.names_seen "
            "WHERE endpoint IN {scopes:Array(String)} GROUP BY name"
        )
    found = connection.rows(
        f"SELECT name, toUnixTimestamp64Milli(first) AS seen FROM ({source}) WHERE name != '' "
        "AND seen >= {start:Int64} AND seen <= {end:Int64} ORDER BY seen DESC, name ASC LIMIT {most:UInt64}",
        {**params, "start": start, "end": end, "most": limit},
    )
    if not found:
        return []
    counts = counts_of(connection, filters, column, [name for name, _ in found])
    return [(name, first, counts.get(name, 0)) for name, first in found]


def _clients_newly_seen(connection, filters: Filters, column: str, limit: int) -> list[tuple[str, int]] | None:
    """newly_seen's (name, first seen ms) for the clients the filters name, from the clients'
    names a day (dims.PAIRED): each name's first day with them; then the names whose first day
    is one of the window's newest such days (whole days, at least `limit` names) get their first
    times from those days' records alone (a client's whole history of records was read: 734 ms
    over 24 hours for the busiest client at 100M). None: a store counting them from a day on
    (tables.SHORT_FROM) reads the records."""
    dim = PAIRED[0]
    if tables.short_counts_from(connection, field(dim)):
        return None
    allowed = allowed_endpoints(filters)
    if allowed is not None and not allowed:
        return []
    start, end = filters.start_ms, filters.end_ms
    where = ["field = {field:String}", "value IN {whose:Array(String)}"]
    params = {"field": field(dim), "whose": [str(client) for client in filters.values["client"]]}
    if allowed is not None:
        where.append("endpoint IN {endpoints:Array(String)}")
        params["endpoints"] = sorted(allowed)
    params["first_day"] = day_text(start // DAY_MS) if start is not None else "1900-01-01"
    params["last_day"] = day_text(end // DAY_MS) if end is not None else "2299-12-31"
    name = "second" if column == "question" else "domain"
    firsts = connection.rows(
        f"SELECT name, toInt32(min(day)) AS first FROM (SELECT {name} AS name, day FROM "
        f"{connection.target.database}.daily_counts WHERE {' AND '.join(where)} GROUP BY name, day "
        "HAVING sum(n) > 0) WHERE name != '' GROUP BY name HAVING first BETWEEN toInt32(toDate32({first_day:String})) "
        "AND toInt32(toDate32({last_day:String})) ORDER BY first DESC",
        params,
    )
    # (the window's start not among the conditions: a name asked before it on its first day is
    # not new)
    scope = {sql: filters.values[sql] for sql in ("endpoint", "client") if sql in filters.values}
    where_records, named = condition(Filters(values=scope, end_ms=end, endpoint_limit=filters.endpoint_limit))
    wanted = limit
    while firsts:
        taken = firsts[:wanted]
        while len(taken) < len(firsts) and firsts[len(taken)][1] == taken[-1][1]:
            taken.append(firsts[len(taken)])
        found = connection.rows(
            f"SELECT {column} AS name, toUnixTimestamp64Milli(min(ts)) AS seen FROM "
            f"{connection.target.database}.records WHERE {where_records} "
            f"AND ts >= fromUnixTimestamp64Milli({{since:Int64}}) AND {column} IN {{candidates:Array(String)}} "
            "GROUP BY name HAVING seen >= {start:Int64} ORDER BY seen DESC, name ASC LIMIT {most:UInt64}",
            {
                **named,
                "since": taken[-1][1] * DAY_MS,
                "candidates": [value for value, _ in taken],
                "start": start if start is not None else -(2**62),
                "most": limit,
            },
        )
        # Fewer: some were first asked past the window's end (on its last day) or before its
        # start (on its first): the older days' names come next.
        if len(found) >= limit or len(taken) == len(firsts):
            return found
        wanted = len(taken) * 2
    return []


def statistics_start(connection) -> int | None:
    """The start (ms) of the oldest period the statistics still count; None if they count none."""
    return counts.statistics_start(connection)
