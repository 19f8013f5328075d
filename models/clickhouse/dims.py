"""What the statistics' counts in ClickHouse count (models/clickhouse/counts.py): the SQL
store's daily rollups, one `field` each, and how a record's values are named in them."""

import datetime

from catalogue import BOOLEAN, FIELDS_BY_SQL, INTEGER, NUMBER
from models.statistics import rollups

DAY_MS = rollups.DAY_MS
# The SQL store's daily statistics, one field each (its longer blocks are sums of these days:
# ClickHouse adds up a month of days at scan speed).
DIMS = tuple(dim for dim in rollups.STATISTICS if dim.period_ms == DAY_MS)
# What a client not logged leaves (models/statistics/anonymous.py): the counts that name no client.
ANONYMOUS = tuple(dim for dim in DIMS if "client" not in dim.columns)
COLUMNS = ("day", "field", "endpoint", "value", "second", "domain", "n")


def day_text(days: int) -> str:
    """A day (since 1970) as its date, as a Date32 parameter and the messages name it."""
    return (datetime.date(1970, 1, 1) + datetime.timedelta(days=days)).isoformat()


def field(dim) -> str:
    """The name a dim's rows carry in `field`: its columns ("" for plain counts)."""
    return "+".join(dim.columns)


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
    """The (field, endpoint, value, second, domain) one record adds to `dim`."""
    endpoint = "CAST(endpoint AS String)" if dim.per_endpoint else "''"
    first = value_text(dim.columns[0]) if dim.columns else "''"
    second = value_text(dim.columns[1]) if len(dim.columns) > 1 else "''"
    domain = "CAST(registrable_domain AS String)" if "question" in dim.columns else "''"
    return f"tuple('{field(dim)}', {endpoint}, {first}, {second}, {domain})"


def counted(records: str, where: str = "", dims=DIMS) -> str:
    """A SELECT of the counts (COLUMNS, `day` a Date32) of the records of `records` that match
    `where` (SQL; "" all), in `dims`."""
    # The entries made in a subquery: the outer names (endpoint, value...) would hide the
    # records' own columns from them.
    entries = f"[{', '.join(_entry(dim) for dim in dims)}]"
    return (
        "SELECT on_day AS day, tupleElement(d, 1) AS field, tupleElement(d, 2) AS endpoint, "
        "tupleElement(d, 3) AS value, tupleElement(d, 4) AS second, tupleElement(d, 5) AS domain, "
        f"toInt64(count()) AS n FROM (SELECT toDate32(ts) AS on_day, {entries} AS entries FROM {records}"
        + (f" WHERE {where}" if where else "")
        + " ) ARRAY JOIN entries AS d GROUP BY day, field, endpoint, value, second, domain"
    )
