"""The statistics' counts in ClickHouse (docs/clickhouse.md, "The tables" and "Deletions,
rewrites, retention"): per day, field, endpoint and value, the SQL store's daily rollups
(models/statistics/rollups.py), so that the same windows read the same whole days from them and
their edges from the records, and the counts outlive the records as the SQL store's do; and per
hour or quarter hour its shorter ones per endpoint, which go with the records (dims.SHORT).

Filled by a materialised view at every insert into the records; a deletion takes its counts
away as negative rows (SummingMergeTree adds them up, and drops what sums to nothing in merges),
and what a deletion forgets past the records' horizon goes by a lightweight DELETE."""

import dataclasses

from catalogue import FIELDS, FIELDS_BY_SQL
from models.clickhouse import tables
from models.clickhouse.activity import condition
from models.clickhouse.dims import (
    ANONYMOUS,
    COLUMNS,
    COUNTED,
    DAY_MS,
    WITH_RECORDS,
    counted,
    day_text,
    field,
    text,
    value_text,
)
from models.records.domains import registrable_domain
from models.records.filters import Filters
from models.schema import settings
from models.statistics import rollups

# Before this day (ms, in ANALYTICS_DATABASE's settings) the statistics were expired.
_MARK = "clickhouse_statistics_from"
# The widest days a Date32 holds: a window open at one end.
_FIRST_DAY, _LAST_DAY = "1900-01-01", "2299-12-31"


def _table(connection) -> str:
    return f"{connection.target.database}.daily_counts"


def _records(connection) -> str:
    return f"{connection.target.database}.records"


# Reading


def statistics_from() -> int | None:
    """The time (ms) before which the statistics were expired; None if they never were."""
    mark = settings.read(_MARK)
    return int(mark) if mark is not None else None


def _counts_dims(filters: Filters, interval_ms: int | None, column: str | None) -> list:
    """The dims of the counts that answer whole periods of this statistic, longest first, as
    the SQL store chooses its rollups (models.statistics.statistics._usable_rollups) among
    those counted here; none: counted from the records alone."""
    if filters.search:
        return []
    columns = {sql for sql, values in filters.values.items() if values} | ({column} if column else set())
    columns = {FIELDS_BY_SQL[sql].derived_from or sql for sql in columns}
    bound = "endpoint" in columns or filters.endpoint_limit is not None
    # (COUNTED: the SQL store's daily dims before a client's names a day, which answer only
    # where none of them does)
    return rollups.usable(columns - {"endpoint"}, bound, interval_ms, COUNTED)


def _column_in(dim, column: str) -> str:
    """The counts column holding a record column's value in `dim`'s rows."""
    if column == "endpoint":
        return "endpoint"
    if FIELDS_BY_SQL[column].derived_from:
        return "domain"
    return "value" if column == dim.columns[0] else "second"


def parts(connection, filters: Filters, interval_ms=None, column=None, only=None) -> tuple[str, dict] | None:
    """(a SELECT of rows (b: bucket start or 0, v: value text of `column` or '', n), params)
    whose sums per (b, v) are the counts of the records the filters select (`only` those value
    texts, when given), as the SQL store counts them: the window's whole days from the counts
    table where a rollup of the SQL store's would answer, then the whole hours (or quarter
    hours) of what is left at its edges, then the records for the rest, and for windows no
    rollup answers; nothing before the statistics' expiry. None: the window holds nothing."""
    start, end = filters.start_ms, filters.end_ms
    if (expired := statistics_from()) is not None:
        start = expired if start is None else max(start, expired)
        if end is not None and start > end:
            return None
    selects, params = [], {"bucket_ms": interval_ms or 1, "wanted": list(only or [])}
    edges = [(start, end)]
    for k, dim in enumerate(_counts_dims(filters, interval_ms, column)):
        size, rest = dim.period_ms, []
        # Hours are counted from a time on in a store made before they were (tables.SHORT_FROM).
        mark = tables.short_counts_from(connection, field(dim)) if dim in WITH_RECORDS else 0
        for j, (edge_start, edge_end) in enumerate(edges):
            counted_from = edge_start
            if mark:
                counted_from = mark if edge_start is None else max(edge_start, mark)
            first = -(-counted_from // size) if counted_from is not None else None
            last = (edge_end + 1) // size - 1 if edge_end is not None else None
            if first is not None and last is not None and first > last:
                rest.append((edge_start, edge_end))
                continue
            named: dict = {}
            select = _from_counts(_table(connection), dim, filters, (first, last, interval_ms), column, only, named)
            selects.append(_renamed(select, named, f"d{k}_{j}_", params))
            if first is not None and (edge_start is None or edge_start < first * size):
                rest.append((edge_start, first * size - 1))
            if edge_end is not None and last is not None and (last + 1) * size <= edge_end:
                rest.append(((last + 1) * size, edge_end))
        edges = rest
    for i, (edge_start, edge_end) in enumerate(edges):
        where, named = condition(dataclasses.replace(filters, start_ms=edge_start, end_ms=edge_end), connection)
        where = _renamed(where, named, f"e{i}_", params)
        bucket = "intDiv(toUnixTimestamp64Milli(ts), {bucket_ms:Int64}) * {bucket_ms:Int64}" if interval_ms else "0"
        value = value_text(column) if column else "''"
        wanted = " AND v IN {wanted:Array(String)}" if only is not None else ""
        selects.append(
            f"SELECT toInt64({bucket}) AS b, {value} AS v, toInt64(count()) AS n FROM {_records(connection)} "
            f"WHERE {where}{wanted} GROUP BY b, v"
        )
    return " UNION ALL ".join(selects), params


def _renamed(sql: str, named: dict, prefix: str, params: dict) -> str:
    """`sql` with its parameters (`named`) renamed with `prefix`, added to `params`: each part
    of a statistic's statement names its own."""
    for name, value in named.items():
        sql = sql.replace(f"{{{name}:", f"{{{prefix}{name}:")
        params[prefix + name] = value
    return sql


def _from_counts(table, dim, filters: Filters, window, column, only, params) -> str:
    """The counts of `dim`'s periods `first` to `last` of `window` (numbered from 1970; None:
    open), in buckets of its interval (None: one)."""
    first, last, interval_ms = window
    size = dim.period_ms
    first_day = None if first is None else first * size // DAY_MS
    last_day = None if last is None else ((last + 1) * size - 1) // DAY_MS
    where = ["field = {field:String}", "day BETWEEN {first_day:Date32} AND {last_day:Date32}"]
    params.update(field=field(dim), first_day=_day(first_day, _FIRST_DAY), last_day=_day(last_day, _LAST_DAY))
    at = "toInt64(toInt32(day)) * 86400000" + ("" if size == DAY_MS else f" + period * {size}")
    if size != DAY_MS:  # a window's first and last days may be counted in part
        for name, bound, sign in (("first_at", first, ">="), ("last_at", last, "<=")):
            if bound is not None:
                where.append(f"{at} {sign} {{{name}:Int64}}")
                params[name] = bound * size
    if not dim.per_endpoint:
        where.append("endpoint = ''")
    for i, (sql, values) in enumerate(sorted(filters.values.items())):
        if values:
            where.append(f"{_column_in(dim, sql)} IN {{c{i}:Array(String)}}")
            params[f"c{i}"] = [text(sql, value) for value in values]
    if filters.endpoint_limit is not None:
        where.append("endpoint IN {c_allowed:Array(String)}")
        params["c_allowed"] = sorted(filters.endpoint_limit)
    value = _column_in(dim, column) if column else "''"
    if only is not None:
        where.append(f"{value} IN {{wanted:Array(String)}}")
    bucket = f"intDiv({at}, {{bucket_ms:Int64}}) * {{bucket_ms:Int64}}" if interval_ms else "0"
    return f"SELECT toInt64({bucket}) AS b, CAST({value} AS String) AS v, n FROM {table} WHERE {' AND '.join(where)}"


def _day(days: int | None, otherwise: str) -> str:
    if days is None:
        return otherwise
    return day_text(days)


def grouped(connection, filters: Filters, keys: str, interval_ms=None, column=None, only=None, tail="") -> list:
    """The rows of `SELECT {keys}, sum(n) AS n ... GROUP BY {keys}` over `parts`, those that
    count something, `tail` (ORDER BY, LIMIT with its params) after."""
    found = parts(connection, filters, interval_ms, column, only)
    if found is None:
        return []
    sql, params = found
    return connection.rows(f"SELECT {keys}, sum(n) AS n FROM ({sql}) GROUP BY {keys} HAVING n != 0 {tail}", params)


def statistics_start(connection) -> int | None:
    """The start (ms) of the oldest day any count still holds something for; None if none."""
    found = connection.rows(
        f"SELECT toInt32(day) AS first FROM {_table(connection)} GROUP BY day, field HAVING sum(n) != 0 "
        "ORDER BY first LIMIT 1"
    )
    return found[0][0] * DAY_MS if found else None


# Writing


def add_anonymous(connection, records: list[tuple]) -> list[tuple]:
    """Count the records of clients not logged (as models.ingest.ingestion.store_records takes
    them, not stored) in the counts that name no client, as models.statistics.anonymous does;
    the rows added, for take_back."""
    at = {f.sql: i for i, f in enumerate(FIELDS)}
    found: dict[tuple, int] = {}
    for values, _ in records:
        day, endpoint = values[at["ts"]] // DAY_MS, values[at["endpoint"]]
        for dim in ANONYMOUS:
            first = text(dim.columns[0], values[at[dim.columns[0]]]) if dim.columns else ""
            second = text(dim.columns[1], values[at[dim.columns[1]]]) if len(dim.columns) > 1 else ""
            domain = registrable_domain(values[at["question"]]) if "question" in dim.columns else ""
            key = (day, 0, field(dim), endpoint if dim.per_endpoint else "", first, second, domain)
            found[key] = found.get(key, 0) + 1
    rows = [(*key, n) for key, n in found.items()]
    connection.insert(_table(connection), COLUMNS, rows, days=("day",))
    return rows


def take_back(connection, rows: list[tuple]) -> None:
    """Count down what add_anonymous added as `rows`: the batch they came with failed."""
    connection.insert(_table(connection), COLUMNS, [(*row[:-1], -row[-1]) for row in rows], days=("day",))


_AFTER_DAY = ", ".join(COLUMNS[1:-1])


def add(connection, source: str, params: dict, token: str | None) -> None:
    """Add the counts `source` (a SELECT of dims.COLUMNS, with `params`) gives, stored once under
    `token` (None: a token of its own)."""
    rows = connection.rows(f"SELECT toInt32(day), {_AFTER_DAY}, n FROM ({source})", params)
    connection.insert(_table(connection), COLUMNS, rows, days=("day",), token=token)


def take_away(connection, where: str, params: dict, forgotten, token: str, dims=COUNTED) -> None:
    """Count down, in `dims`, the records of the records table that match `where` (with
    `params`), as negative rows stored once under `token` (a deletion run again after it was
    cut short counts down once), but the counts `forgotten` will take away whole
    (Forgotten: they go at once, whatever records they counted)."""
    spared = f" AND NOT ({forgotten.covers()})" if forgotten is not None else ""
    source = counted(_records(connection), where, dims)
    rows = connection.rows(
        f"SELECT toInt32(day), {_AFTER_DAY}, -n FROM ({source}) WHERE 1{spared}",
        {**params, **(forgotten.all_params if forgotten is not None else {})},
    )
    connection.insert(_table(connection), COLUMNS, rows, days=("day",), token=token)


@dataclasses.dataclass(frozen=True)
class Forgotten:
    """What a deletion takes out of the counts past the records' horizon, as
    models.statistics.rollups.forget: the days wholly up to `end_ms` (None: all) of `dims`,
    the rows `condition` (SQL on the counts, with `params`) selects."""

    dims: tuple
    end_ms: int | None
    condition: str
    params: dict

    def covers(self) -> str:
        days = "" if self.end_ms is None else " AND day < toDate32({forgotten_before:Date32})"
        return f"field IN {{forgotten_fields:Array(String)}}{days} AND ({self.condition})"

    @property
    def all_params(self) -> dict:
        found = {**self.params, "forgotten_fields": [field(dim) for dim in self.dims]}
        if self.end_ms is not None:
            found["forgotten_before"] = _day((self.end_ms + 1) // DAY_MS, _LAST_DAY)
        return found


def forget(connection, forgotten: Forgotten) -> None:
    """Delete the counts `forgotten` selects."""
    if forgotten.dims:
        changed = tables.changing(connection.target, "daily_counts")
        connection.command(f"DELETE FROM {changed} WHERE {forgotten.covers()}", forgotten.all_params)


def expire(connection, before_ms: int) -> int:
    """Forget the counts of the days before the one `before_ms` falls in, by dropping their
    partitions, and mark that reads count nothing before it (as rollups.expire); how many rows
    went. Call inside a write transaction (the mark)."""
    mark = before_ms // DAY_MS * DAY_MS
    settings.write(_MARK, str(mark))
    first = _day(mark // DAY_MS, _LAST_DAY)
    gone = connection.rows(
        f"SELECT count() FROM {_table(connection)} WHERE day < toDate32({{first:Date32}})", {"first": first}
    )[0][0]
    drop_partitions(connection, "daily_counts", "toDate32(partition) < toDate32({first:Date32})", {"first": first})
    return gone


def drop_partitions(connection, table: str, which: str, params: dict) -> None:
    """Drop the partitions of `table` (one a day) that `which` (SQL on system.parts' `partition`,
    the day's text) selects: the whole days go at once, with no mutation."""
    found = connection.rows(
        f"SELECT DISTINCT partition_id FROM {tables.parts(connection.target)} WHERE database = {{database:String}} "
        f"AND table = {{table:String}} AND active AND {which}",
        {**params, "database": connection.target.database, "table": tables.local(connection.target, table)},
    )
    for (partition,) in found:
        assert partition.isalnum(), partition  # an id ClickHouse made of the day: nothing to quote
        connection.command(f"ALTER TABLE {tables.changing(connection.target, table)} DROP PARTITION ID '{partition}'")
