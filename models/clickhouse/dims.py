"""What the statistics' counts in ClickHouse count (models/clickhouse/counts.py): the SQL
store's daily rollups, and its hourly and quarter-hour ones, one `field` each, and
how a record's values are named in them."""

import datetime

from catalogue import BOOLEAN, FIELDS_BY_SQL, INTEGER, NUMBER
from models.statistics import rollups

DAY_MS = rollups.DAY_MS
# The SQL store's daily statistics, one field each (its longer blocks are sums of these days:
# ClickHouse adds up a month of days at scan speed).
DIMS = tuple(dim for dim in rollups.STATISTICS if dim.period_ms == DAY_MS)
# The SQL store's shorter periods, counted batch by batch (its 6-hour blocks are sums of hours:
# ClickHouse adds up a day of hours at scan speed): plain and by action per endpoint, the time
# series of a day or a month (the dashboard's charts), whose buckets are shorter than a day; by
# client per endpoint and by name with its action over all endpoints, the top lists and trends of
# the last 24 hours, whose whole hours read them instead of a day of records. Rows of a day's
# partition, `period` numbering the hour or quarter hour within it (0 for a day's own count):
# at 100M records over 30 days the days and the hours by endpoint and action took 0.27 B a
# record, the hours by client and by name 0.65 B more (BENCHMARKS.md, session 30).
SHORT = tuple(dim for dim in rollups.DIMS if dim.period_ms < DAY_MS and dim.built_from is None)
# Counts of ClickHouse's own, no rollup of the SQL store's: a client's names a day (and their
# domains), for a client's top lists over a month, which read the client's records of the month
# otherwise (every granule holds most clients: its bloom filter skips nothing). 1.45M rows a day
# at 100M records. The SQL store has nothing to answer them from past the records, so they go
# with the records as the hours do.
PAIRED = (rollups.Dim(-1, ("client", "question"), DAY_MS),)
# The counts that go with the records (retention takes them away), and that a store made before
# counts from a day on (tables.SHORT_FROM).
WITH_RECORDS = SHORT + PAIRED
COUNTED = DIMS + WITH_RECORDS
# What a client not logged leaves (models/statistics/anonymous.py): the daily counts that name no
# client (the SQL store keeps its shorter ones for the records stored).
ANONYMOUS = tuple(dim for dim in DIMS if "client" not in dim.columns)
COLUMNS = ("day", "period", "field", "endpoint", "value", "second", "domain", "n")


def day_text(days: int) -> str:
    """A day (since 1970) as its date, as a Date32 parameter and the messages name it."""
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat()


def field(dim) -> str:
    """The name a dim's rows carry in `field`: its columns ("" for plain counts), and for a
    period shorter than a day its minutes ("action/15m")."""
    named = "+".join(dim.columns)
    return named if dim.period_ms == DAY_MS else f"{named}/{dim.period_ms // 60_000}m"


def period(dim) -> str:
    """The SQL of a record's `period` in `dim`: which of the day's hours or quarter hours it is
    in (0 for a day's own count)."""
    if dim.period_ms == DAY_MS:
        return "toUInt8(0)"
    return f"toUInt8(intDiv(toHour(ts) * 60 + toMinute(ts), {dim.period_ms // 60_000}))"


def value_text(column: str) -> str:
    """The SQL of a record column's value as the statistics name it: text, "" for unknown,
    booleans "true" and "false", numbers in Python's str() form."""
    storage = FIELDS_BY_SQL[column].storage
    if storage == BOOLEAN:
        return f"if({column} IS NULL, '', if({column}, 'true', 'false'))"
    if storage in (INTEGER, NUMBER):
        return f"ifNull(toString({column}), '')"
    return f"CAST({column} AS String)"


def text(column: str, value) -> str:
    """A value of `column` (as a record or a filter holds it) as value_text names it."""
    if value is None:
        return ""
    storage = FIELDS_BY_SQL[column].storage
    if storage == BOOLEAN:
        return "true" if value else "false"
    if storage == INTEGER:
        return str(int(value))
    return str(value)


def _entry(dim) -> str:
    """The (period, field, endpoint, value, second, domain) one record adds to `dim`."""
    endpoint = "CAST(endpoint AS String)" if dim.per_endpoint else "''"
    first = value_text(dim.columns[0]) if dim.columns else "''"
    second = value_text(dim.columns[1]) if len(dim.columns) > 1 else "''"
    domain = "CAST(registrable_domain AS String)" if "question" in dim.columns else "''"
    return f"tuple({period(dim)}, '{field(dim)}', {endpoint}, {first}, {second}, {domain})"


def counted(records: str, where: str = "", dims=COUNTED) -> str:
    """A SELECT of the counts (COLUMNS, `day` a Date32) of the records of `records` that match
    `where` (SQL; "" all), in `dims`."""
    # The entries made in a subquery: the outer names (endpoint, value...) would hide the
    # records' own columns from them.
    entries = f"[{', '.join(_entry(dim) for dim in dims)}]"
    return (
        "SELECT on_day AS day, tupleElement(d, 1) AS period, tupleElement(d, 2) AS field, "
        "tupleElement(d, 3) AS endpoint, tupleElement(d, 4) AS value, tupleElement(d, 5) AS second, "
        f"tupleElement(d, 6) AS domain, toInt64(count()) AS n FROM (SELECT toDate32(ts) AS on_day, {entries} "
        f"AS entries FROM {records}"
        + (f" WHERE {where}" if where else "")
        + " ) ARRAY JOIN entries AS d GROUP BY day, period, field, endpoint, value, second, domain"
    )
