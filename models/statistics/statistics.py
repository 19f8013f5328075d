"""Aggregates over the records, computed in SQL: counts, counts per group, time buckets."""

import heapq
import itertools
from collections import namedtuple

from catalogue import BOOLEAN, CLIENT, FIELDS_BY_SQL, INTEGER, Field
from models.engine.database import query, snapshot
from models.engine.sql import placeholders
from models.records import thawing
from models.records.blocks import COLUMNS
from models.records.counted import COUNTED_SQL, waiting_records
from models.records.domains import TABLE as DOMAINS
from models.records.filters import Filters, Resolved, column_sql, derived_in, stored_ids
from models.records.names import BOOLEAN_TEXT, value_texts
from models.statistics import counting, first_seen, rollups


@snapshot()
def count(filters: Filters) -> int:
    """The number of records the filters select."""
    return sum(_grouped(Resolved(filters)).values())


@snapshot()
def top(filters: Filters, column: str, limit: int, descending: bool = True) -> list[tuple[str, int]]:
    """The `limit` most (or least) frequent values of the record column `column` as
    (text, count), ties by text ascending; "" stands for unknown."""
    return _ranked(Resolved(filters), FIELDS_BY_SQL[column], limit, descending)


@snapshot()
def series(filters: Filters, interval_ms: int) -> dict[int, int]:
    """Record counts per time bucket (the bucket's start, a multiple of interval_ms)."""
    return {start: n for (start, _), n in _grouped(Resolved(filters), interval_ms=interval_ms).items()}


@snapshot()
def stored_series(filters: Filters, interval_ms: int) -> dict[int, int]:
    """Counts per time bucket of the records stored (not those the statistics remember past
    the records' horizon)."""
    return {start: n for (start, _), n in _grouped(Resolved(filters), interval_ms=interval_ms, stored=True).items()}


@snapshot()
def top_series(filters: Filters, interval_ms: int, column: str, limit: int) -> tuple[list[str], dict]:
    """The window's `limit` most frequent values of `column`, and their counts per time bucket:
    (values, {bucket start: {value: count}})."""
    resolved = Resolved(filters)
    field = FIELDS_BY_SQL[column]
    values = [value for value, _ in _ranked(resolved, field, limit, True)]
    stored = _stored_values(field, values)
    if not stored:
        return values, {}
    grouped = _grouped(resolved, interval_ms=interval_ms, column=field, only=stored)
    names = _names(field, [value for _, value in grouped])
    result: dict[int, dict[str, int]] = {}
    for (start, value), n in grouped.items():
        per_value = result.setdefault(start, {})
        name = names.get(value, "")
        per_value[name] = per_value.get(name, 0) + n
    return values, result


@snapshot()
def trend(filters: Filters, baseline: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
    """The `limit` most frequent values of `column` in the filters' window, each with its count
    there and in the baseline's window: (value, count, baseline count)."""
    field = FIELDS_BY_SQL[column]
    found = _ranked(Resolved(filters), field, limit, True)
    # Only the values found are counted in the baseline: a top list's window has thousands more.
    before = _count_by(Resolved(baseline), field, _stored_values(field, [value for value, _ in found]))
    return [(value, n, before.get(value, 0)) for value, n in found]


@snapshot()
def counts_of(filters: Filters, column: str, values: list[str]) -> dict[str, int]:
    """Record counts of these values (texts) of `column` in the filters' window, read from the
    rollups for the periods they cover (a baseline over days costs rollup rows, not records)."""
    field = FIELDS_BY_SQL[column]
    return _count_by(Resolved(filters), field, _stored_values(field, values))


@snapshot()
def newly_seen(filters: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
    """The names (question or registrable domain) first seen in the window, newest first, ties
    by name: (name, first seen ms, records in the window matching the filters); see
    models.statistics.first_seen for where "first" is kept."""
    resolved = Resolved(filters)
    field = FIELDS_BY_SQL[column]
    found = first_seen.newly_seen(resolved, field, limit)
    if not found:
        return []
    counts = _count_by(resolved, field, [value for value, _ in found])
    names = _names(field, [value for value, _ in found])
    rows = [(names.get(value, ""), first) for value, first in found]
    return [(name, first, counts.get(name, 0)) for name, first in sorted(rows, key=lambda row: (-row[1], row[0]))]


def _top(counts: dict[str, int], limit: int, descending: bool) -> list[tuple[str, int]]:
    sign = -1 if descending else 1
    return sorted(counts.items(), key=lambda item: (sign * item[1], item[0]))[:limit]


def _ranked(resolved: Resolved, column: Field, limit: int, descending: bool) -> list[tuple[str, int]]:
    """The `limit` most (or least) frequent values of `column` as (text, count), ties by text.

    A top list of names ranks tens of thousands of them: only those that can make the list
    (counts up to the limit-th, and its ties) are named and sorted. That needs one stored
    value per text; a client id is stored once per endpoint, so clients are merged first."""
    if column.storage == CLIENT:
        return _top(_count_by(resolved, column), limit, descending)
    counts = {value: n for (_, value), n in _grouped(resolved, column=column).items()}
    if None in counts and column.storage not in (INTEGER, BOOLEAN):
        # An unknown value reads "", and so would a stored "": they are one value.
        for empty in stored_ids(column, [""]):
            counts[None] += counts.pop(empty, 0)
    if len(counts) > limit:
        pick = heapq.nlargest if descending else heapq.nsmallest
        edge = pick(limit, counts.values())[-1]
        counts = {v: n for v, n in counts.items() if (n >= edge if descending else n <= edge)}
    return _top(_merge(column, list(counts.items())), limit, descending)


def _count_by(resolved: Resolved, column: Field, only=None) -> dict[str, int]:
    """Record counts per value of `column` ("" for unknown), for every value present (`only`
    those stored values, when given)."""
    if only is not None and not only:
        return {}
    return _merge(column, [(value, n) for (_, value), n in _grouped(resolved, column=column, only=only).items()])


def _grouped(resolved: Resolved, interval_ms=None, column=None, only=None, stored=False) -> dict[tuple, int]:
    """Record counts by (bucket start or None, stored value of `column` or None), `only` those
    stored values when given.

    The window is split into the whole periods the rollups can answer and the rest: the
    longest periods first (days, or blocks of days), then whole hours of what is left at the
    edges (where the columns have hourly rollups), then the records for the part hours left.
    Rollups answer only when they hold every column filtered or grouped by, and only with
    buckets made of whole periods. Past the records' horizon the records are gone and the
    hourly rollups with them: a window there is counted in whole days. `stored`: count the
    records stored, not what the statistics remember (rollups that expire with them only)."""
    start, end = resolved.filters.start_ms, resolved.filters.end_ms
    thawing.start_counts()
    if not stored and (expired := rollups.statistics_from()) is not None:
        start = expired if start is None else max(start, expired)
        if end is not None and start > end:
            return {}
    selects = []  # (SQL, params) of each part; one statement sums them all
    window = parts = [(start, end)]
    derived = bool(column is not None and column.derived_from)
    if derived:  # counted by the source column's values, then summed per derived value
        column = FIELDS_BY_SQL[column.derived_from]
    built = rollups.built_through()
    for dim in _usable_rollups(resolved.filters, interval_ms, column):
        if stored and dim.statistics:
            continue
        period_ms = dim.period_ms
        rest = []
        for start, end in parts:
            first = -((-start) // period_ms) if start is not None else -(2**40)
            last = (end + 1) // period_ms - 1 if end is not None else 2**40
            if dim.id in built:  # its blocks not summed yet are read from the shorter periods
                last = min(last, built[dim.id] - 1)
            if first > last:
                rest.append((start, end))
                continue
            selects.append(_from_rollups(resolved, dim, first, last, interval_ms, column, only, derived))
            if start is not None and start <= first * period_ms - 1:
                rest.append((start, first * period_ms - 1))
            if end is not None and (last + 1) * period_ms <= end:
                rest.append(((last + 1) * period_ms, end))
        parts = rest
    selects = [select for select in selects if select is not None]
    if selects:
        # The rollups hold the records up to the counting mark; the part periods count those
        # from the records, and the records past the mark (the tail) are counted over the whole
        # window. The mark is read in the statement itself (one snapshot with the rollups); the
        # one read before it only tells the planner how short the tail is.
        selects += [_from_records(resolved, *part, interval_ms, column, only, derived, "counted") for part in parts]
        selects.append(_from_records(resolved, *window[0], interval_ms, column, only, derived, "waiting"))
    else:
        selects = [_from_records(resolved, *part, interval_ms, column, only, derived) for part in parts]
    if not selects:
        return {}
    # Summed in the engine: a top list's parts (blocks, days, hours, part hours) hold the same
    # tens of thousands of names each, and adding them up row by row in Python cost as much as
    # reading them.
    sql = (
        "SELECT b, v, CAST(SUM(n) AS BIGINT) AS n FROM ("
        + " UNION ALL ".join(sql for sql, _ in selects)
        + ") AS parts GROUP BY b, v"
    )
    if derived:
        # Mapped once per distinct source value, not per rollup row.
        sql = (
            f"SELECT g.b, d.domain, CAST(SUM(g.n) AS BIGINT) FROM ({sql}) AS g"
            f" LEFT JOIN {DOMAINS} d ON d.term = g.v GROUP BY g.b, d.domain"
        )
    rows = query(sql, [param for _, params in selects for param in params]).fetchall()
    return {(bucket, value): n for bucket, value, n in rows if n}


def _usable_rollups(filters: Filters, interval_ms, column) -> list[rollups.Dim]:
    """The rollups that can answer, longest periods first."""
    if filters.search:
        return []
    columns = {sql for sql, values in filters.values.items() if values}
    if column is not None:
        columns.add(column.sql)
    # A derived field is counted by its source column's rollups.
    columns = {FIELDS_BY_SQL[sql].derived_from or sql for sql in columns}
    endpoints_bound = "endpoint" in columns or filters.endpoint_limit is not None
    return rollups.usable(columns - {"endpoint"}, endpoints_bound, interval_ms)


# Numbers the parts of a statistic that count frozen records (thawing.COUNTS).
_PARTS = itertools.count(1)


def _from_records(resolved: Resolved, start_ms, end_ms, interval_ms, column, only, derived, counted=None):
    """(SELECT of (b: bucket, v: value, n: count) rows, params) counting the records of a part:
    all of them, or (`counted`) those the rollups hold ("counted") or not yet ("waiting")."""
    condition, params = resolved.where(start_ms, end_ms)
    nothing = "CAST(NULL AS BIGINT)"  # typed: PostgreSQL unites it with the counts of frozen records
    keys = [_bucket_sql(interval_ms) if interval_ms else nothing, f"r.{column.sql}" if column else nothing]
    if only is not None:
        condition, params = _only(condition, params, f"r.{column.sql}", only, derived)
    source, grouped = (
        "record r",
        f"SELECT {keys[0]} AS b, {keys[1]} AS v, COUNT(*) AS n FROM {{source}} WHERE {{condition}} GROUP BY 1, 2",
    )
    frozen = ""
    if counted != "waiting":  # frozen records are all counted: the part's window of them too
        part = next(_PARTS)
        window = (part, resolved.endpoint_ids(), start_ms, end_ms)
        # `derived`: the values `only` are of a field derived from the column (SQL maps them).
        if resolved.naming_only("endpoint", "client") and not derived and not (column and column.derived_from):
            at = None if column is None else COLUMNS.index(column.sql)
            found = thawing.tally_into(*window, resolved.hint(), at, interval_ms, only)
        else:
            staged = grouped.format(source=f"{thawing.STAGING} r", condition=condition)
            found = thawing.count_into(*window, staged, params, resolved.hint())
        if found:
            frozen = f" UNION ALL SELECT b, v, n FROM {thawing.COUNTS} WHERE part = {part}"
    if counted == "counted":
        # `+ 0`: not a range of ids to read by; the part's window is.
        condition = f"(r.id + 0) <= {COUNTED_SQL} AND {condition}"
    elif counted == "waiting":
        source, waiting, mark = waiting_records()
        condition, params = f"{waiting} AND {condition}", [*mark, *params]
    return grouped.format(source=source, condition=condition) + frozen, params


def _from_rollups(resolved: Resolved, dim, first, last, interval_ms, column, only, derived) -> tuple[str, list] | None:
    """(SELECT of (b, v, n) rows, params) of the rollup rows of periods first..last of `dim`;
    None when the filters select nothing."""
    condition, params = "dim = ? AND period BETWEEN ? AND ?", [dim.id, first, last]
    endpoints = resolved.endpoint_ids()
    if endpoints is not None:
        if not endpoints:
            return None
        condition += f" AND endpoint IN ({placeholders(len(endpoints))})"
        params += endpoints
    for sql, values in resolved.filters.values.items():
        if values and sql != "endpoint":
            stored = resolved.stored(sql)
            if not stored:
                return None
            if source := FIELDS_BY_SQL[sql].derived_from:
                condition += f" AND {derived_in(rollups.value_sql(dim, source), placeholders(len(stored)))}"
            else:
                condition += f" AND {rollups.value_sql(dim, sql)} IN ({placeholders(len(stored))})"
            params += stored
    value = rollups.value_sql(dim, column.sql) if column else "CAST(NULL AS BIGINT)"
    if only is not None:
        condition, params = _only(condition, params, value, only, derived)
    if interval_ms:
        i, start = int(interval_ms), f"(period * {int(dim.period_ms)})"
        bucket = f"({start} - ((({start}) % {i}) + {i}) % {i})"
    else:
        bucket = "CAST(NULL AS BIGINT)"
    return f"SELECT {bucket} AS b, {value} AS v, n FROM rollup WHERE {condition}", params


def _only(condition: str, params: list, target: str, only: list, derived=False) -> tuple[str, list]:
    """`condition` narrowed to the stored values `only` of the target (None: unknown); for a
    derived field, to the source values whose derived value is among them."""
    present = [v for v in only if v is not None]
    if derived:  # every source value has its derived one: none is unknown
        return f"{condition} AND {derived_in(target, placeholders(len(present)) or 'NULL')}", params + present
    parts = [f"{target} IN ({placeholders(len(present))})"] if present else []
    if None in only:
        parts.append(f"{target} IS NULL")
    return f"{condition} AND ({' OR '.join(parts)})", params + present


def _bucket_sql(interval_ms: int) -> str:
    # Floor to a multiple of the interval, also for times before 1970 (% truncates toward 0).
    i = int(interval_ms)
    return f"(r.ts - (((r.ts % {i}) + {i}) % {i}))"


def _merge(column: Field, rows) -> dict[str, int]:
    """Stored values -> API strings, summing values that map to the same string (a client id
    seen under several endpoints is one group)."""
    names = _names(column, [stored for stored, _ in rows])
    merged: dict[str, int] = {}
    for stored, n in rows:
        value = names.get(stored, "")
        merged[value] = merged.get(value, 0) + n
    return merged


def _names(column: Field, stored_values) -> dict:
    """The text of stored values of `column` (unknown values are absent: they read "")."""
    return value_texts(column.storage, [v for v in set(stored_values) if v is not None])


def _stored_values(column: Field, values: list[str]) -> list:
    """Stored values (ids or numbers; None for "") that read as `values`."""
    stored = [None] if "" in values else []
    wanted = [v for v in values if v != ""]
    if not wanted:
        return stored
    if column.storage == INTEGER:
        return stored + [int(v) for v in wanted]
    if column.storage == BOOLEAN:
        return stored + [BOOLEAN_TEXT.index(v) for v in wanted]
    return stored + stored_ids(column, wanted)


@snapshot()
def availability(filters: Filters) -> tuple[int | None, int | None, int]:
    """(oldest timestamp, newest timestamp, record count) of the records the filters allow."""
    resolved = Resolved(filters)
    condition, params = resolved.where()
    # MIN and MAX alone can each be answered from one end of an index; the count from rollups.
    oldest, newest = (
        query(f"SELECT {aggregate} FROM record r WHERE {condition}", params).fetchone()[0]
        for aggregate in ("MIN(r.ts)", "MAX(r.ts)")
    )
    window = (resolved.endpoint_ids(), filters.start_ms, filters.end_ms, condition, params)
    hint = resolved.hint()
    oldest, newest = (
        min((t for t in (oldest, thawing.edge(*window, newest=False, hint=hint)) if t is not None), default=None),
        max((t for t in (newest, thawing.edge(*window, newest=True, hint=hint)) if t is not None), default=None),
    )
    return oldest, newest, sum(_grouped(resolved, stored=True).values())


@snapshot()
def statistics_start() -> int | None:
    """The start (ms) of the oldest period the statistics still count; None if they count none."""
    return counting.oldest_statistic()


# A summary of response times: how many records have one, their mean, median, 95th percentile
# (nearest rank) and maximum, in milliseconds.
LatencyRow = namedtuple("LatencyRow", "value count mean p50 p95 max")


_PAIRS = "record_latency"


def latency(filters: Filters, column: str | None = None, limit: int = 1, descending: bool = True) -> list[LatencyRow]:
    """Response-time summaries of the records that have one: of them all (`column` None: one
    row, value None), or of the `limit` values of `column` with the most (or fewest) of them,
    ties by value. Percentiles need every time of the window: read from the records."""
    field = FIELDS_BY_SQL[column] if column else None
    group, join = "NULL", ""
    if field is not None and field.storage == CLIENT:  # one group per client id, whatever its endpoint
        group, join = "c.client_id", " JOIN client c ON c.id = r.client"
    elif field is not None:
        group = column_sql(field)
    # The frozen records' (group, time) pairs are gathered run by run into a table shaped by
    # the same SELECT, so that only they, not whole records, are held for the ranking. Its shape
    # follows the group's: made before the snapshot, which may not make one (models.engine.database).
    pairs = f"SELECT {group} AS g, r.response_time_ms AS ms FROM {{source}} r{join} WHERE {{where}}"
    query(f"DROP TABLE IF EXISTS {_PAIRS}")
    query(f"CREATE TEMP TABLE {_PAIRS} AS {pairs.format(source='record', where='1 = 0')}")
    with snapshot():
        return _latency(Resolved(filters), field, limit, descending, pairs)


def _latency(resolved: Resolved, field, limit: int, descending: bool, pairs: str) -> list[LatencyRow]:
    filters = resolved.filters
    condition, params = resolved.where()
    timed = f"{condition} AND r.response_time_ms IS NOT NULL"
    frozen = thawing.collect(
        f"{_PAIRS} (g, ms)",
        resolved.endpoint_ids(),
        filters.start_ms,
        filters.end_ms,
        pairs.format(source=thawing.STAGING, where=timed),
        params,
        resolved.hint(),
    )
    more = f" UNION ALL SELECT g, ms FROM {_PAIRS}" if frozen else ""
    rows = query(
        f"WITH t AS ({pairs.format(source='record', where=timed)}{more}),"
        " ranked AS (SELECT g, ms, ROW_NUMBER() OVER (PARTITION BY g ORDER BY ms) AS rn,"
        " COUNT(*) OVER (PARTITION BY g) AS n FROM t)"
        " SELECT g, MAX(n), AVG(ms), MAX(CASE WHEN rn = (n * 50 + 99) / 100 THEN ms END),"
        " MAX(CASE WHEN rn = (n * 95 + 99) / 100 THEN ms END), MAX(ms) FROM ranked GROUP BY g",
        params,
    ).fetchall()
    if field is None:
        return [LatencyRow(None, *rows[0][1:]) if rows else LatencyRow(None, 0, None, None, None, None)]
    names = {} if field.storage == CLIENT else _names(field, [row[0] for row in rows])
    found = [LatencyRow(row[0] if field.storage == CLIENT else names.get(row[0], ""), *row[1:]) for row in rows]
    sign = -1 if descending else 1
    return sorted(found, key=lambda row: (sign * row.count, row.value))[:limit]
