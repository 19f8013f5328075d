"""Rollups: record counts per (column, day, endpoint, value), and per (hour, endpoint), kept
exactly in step with the records, so that statistics over long windows read thousands of
rollup rows instead of millions of records.

Every change to the records updates them in the same transaction: ingestion adds the counts of
the rows it inserts (`add_rows`), deletion (API, client deletion, retention) subtracts those of
the rows it removes (`apply`); both count with the same code (`_count`). A query may use them
only for whole periods (days, or hours for plain counts) and only when its filters are on the
endpoint alone (see Filters.endpoint_only); the parts of its window that cover part of a
period are counted from the records.
"""

from .columns import COLUMNS
from .database import query, query_many

DAY_MS = 86_400_000
# Rollups keep no NULLs (they are part of the key): an unknown value is stored as this.
NULL_VALUE = -(2**62)
# The rolled-up columns, by position: a rollup row's `dim`. Not the queried name: with tens of
# thousands of names a day its rollup would be nearly as big as the records and cost a third of
# ingestion's time, for little gain; questions are always counted from the records.
UNROLLED = ("question",)
DIMS = tuple(column for column in COLUMNS if column.groupable and column.name not in UNROLLED)
DIM_OF = {column.name: i for i, column in enumerate(DIMS)}
HOUR_MS = 3_600_000
# Plain counts per hour and endpoint (value always 0): time series of every length from an
# hour up read these. Cheap to keep: at most 24 rows a day per endpoint.
HOURLY = len(DIMS)
PERIOD_MS = {**{dim: DAY_MS for dim in range(len(DIMS))}, HOURLY: HOUR_MS}


_UPSERT = (
    "INSERT INTO rollup (dim, period, endpoint, value, n) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n"
)


def rolled_up(column_name: str) -> bool:
    return column_name in DIM_OF


def add_rows(rows, fields):
    """Add the counts of rows being inserted (tuples whose fields are named by `fields`),
    counted from the tuples ingestion has at hand anyway."""
    _upsert(_count(rows, fields, {}), 1)


def apply(condition: str, params: list, sign: int):
    """Add (sign 1) or subtract (sign -1) the counts of the stored records matching `condition`
    (SQL on the record table). Deletions call it before they delete, in their transaction; it
    also builds the rollups of a database that had none.

    The rows are read once and counted in Python: a GROUP BY per column over them cost several
    times more (seconds for a large client's deletion, all of it under the write lock)."""
    fields = ("ts", "endpoint", *(column.sql for column in DIMS))
    cursor = query(f"SELECT {', '.join(fields)} FROM record WHERE {condition}", params)
    counts: dict[tuple, int] = {}
    while rows := cursor.fetchmany(10_000):
        _count(rows, fields, counts)
    _upsert(counts, sign)
    if sign < 0 and counts:
        # Rows counted down to nothing go, so expired periods leave no trace behind.
        for dim in PERIOD_MS:
            periods = [key[1] for key in counts if key[0] == dim]
            query(
                "DELETE FROM rollup WHERE dim = ? AND period BETWEEN ? AND ? AND n = 0",
                [dim, min(periods), max(periods)],
            )


def _count(rows, fields, counts: dict) -> dict:
    """Count rows (tuples whose fields are named by `fields`) into `counts`, by rollup key."""
    at = {name: i for i, name in enumerate(fields)}
    ts_at, endpoint_at = at["ts"], at["endpoint"]
    columns = [(dim, at[column.sql]) for dim, column in enumerate(DIMS)]
    for row in rows:
        ts, endpoint = row[ts_at], row[endpoint_at]
        day = ts // DAY_MS
        for dim, i in columns:
            value = row[i]
            key = (dim, day, endpoint, NULL_VALUE if value is None else value)
            counts[key] = counts.get(key, 0) + 1
        key = (HOURLY, ts // HOUR_MS, endpoint, 0)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _upsert(counts: dict, sign: int):
    query_many(_UPSERT, [(*key, sign * n) for key, n in counts.items()])
