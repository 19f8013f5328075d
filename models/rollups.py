"""Rollups: record counts per (column, day, endpoint, value), per (hour, endpoint) and, for a
few columns, per (column, hour, endpoint, value), kept exactly in step with the records, so
that statistics over long windows read thousands of rollup rows instead of millions of records.

Every change to the records updates them in the same transaction: ingestion adds the counts of
the rows it inserts (`count`, `resolved`, `add`), deletion (API, client deletion, retention)
subtracts those of the rows it removes (`apply`); both count with the same code (`count`). A
query may use them only for whole periods and only when its filters are on the endpoint alone
(see Filters.endpoint_only); the parts of its window that cover part of a period are counted
from the records (see statistics._grouped).
"""

from collections import Counter

from catalogue import DAY, ENDPOINT, FIELDS, HOUR

from .database import query, query_many

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
QUARTER_MS = 900_000
# Rollups keep no NULLs (they are part of the key): an unknown value is stored as this.
NULL_VALUE = -(2**62)
# The columns counted per day and value, by position: a rollup row's `dim`. The catalogue
# says which; `question` is not among them: with tens of thousands of names a day its rollup
# would be nearly as big as the records and cost a third of ingestion's time.
DIMS = tuple(field for field in FIELDS if DAY in field.rollups)
DIM_OF = {field.sql: i for i, field in enumerate(DIMS)}
# Plain counts per hour and endpoint, and per quarter hour and endpoint (value always 0): time
# series of every length read these (a day's default buckets are quarter hours). Cheap to keep:
# at most 96 rows a day per endpoint.
HOURLY = len(DIMS)
QUARTERLY = HOURLY + 1
# Columns also counted per hour and value, so that their time series and their counts over
# windows that start or end mid-day (the last 24 hours) read rollups too: in the catalogue,
# `action` (a handful of values, the usual chart) and the client ("who asked most today").
# A row per (hour, endpoint, value) adds up: at 10M records the client rows add ~3 bytes per
# record.
HOURLY_FIELDS = tuple(field for field in FIELDS if HOUR in field.rollups)
HOURLY_DIM_OF = {field.sql: QUARTERLY + 1 + i for i, field in enumerate(HOURLY_FIELDS)}
PERIOD_MS = {
    **{dim: DAY_MS for dim in range(len(DIMS))},
    HOURLY: HOUR_MS,
    QUARTERLY: QUARTER_MS,
    **{dim: HOUR_MS for dim in HOURLY_DIM_OF.values()},
}
# What the rows mean: a database whose rollups were counted under another layout has them
# counted anew at start-up (see tables.create_schema).
LAYOUT = ";".join(
    [f"{dim}:{field.sql}:day" for dim, field in enumerate(DIMS)]
    + [f"{HOURLY}:hour", f"{QUARTERLY}:quarter"]
    + [f"{dim}:{sql}:hour" for sql, dim in HOURLY_DIM_OF.items()]
)


_UPSERT = (
    "INSERT INTO rollup (dim, period, endpoint, value, n) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n"
)


def levels(column: str | None) -> list[tuple[int, int]]:
    """The rollups that count records by the record column `column` (None: plain counts), as
    (dim, period length), longest periods first."""
    if column is None:
        # The endpoint's daily rollup counts every record once a day, like a plain count.
        return [(DIM_OF["endpoint"], DAY_MS), (HOURLY, HOUR_MS), (QUARTERLY, QUARTER_MS)]
    found = [(DIM_OF[column], DAY_MS)] if column in DIM_OF else []
    if column in HOURLY_DIM_OF:
        found.append((HOURLY_DIM_OF[column], HOUR_MS))
    return found


def count(columns: dict[str, list]) -> dict[tuple, int]:
    """Counts by rollup key of the rows given column by column (`columns` maps each record
    column name ("ts", "endpoint" and every DIMS column) to its values, one per row). The values
    may be anything hashable (ids, or the strings ingestion has before it has ids: see
    `resolved`)."""
    counts: dict[tuple, int] = {}
    # Counter counts in C; a Python loop over rows x columns cost ~12 us per record.
    days = [ts // DAY_MS for ts in columns["ts"]]
    endpoints = columns["endpoint"]
    for dim, column in enumerate(DIMS):
        for (day, endpoint, value), n in Counter(zip(days, endpoints, columns[column.sql], strict=True)).items():
            counts[(dim, day, endpoint, NULL_VALUE if value is None else value)] = n
    hours = [ts // HOUR_MS for ts in columns["ts"]]
    for (hour, endpoint), n in Counter(zip(hours, endpoints, strict=True)).items():
        counts[(HOURLY, hour, endpoint, 0)] = n
    quarters = [ts // QUARTER_MS for ts in columns["ts"]]
    for (quarter, endpoint), n in Counter(zip(quarters, endpoints, strict=True)).items():
        counts[(QUARTERLY, quarter, endpoint, 0)] = n
    for sql, dim in HOURLY_DIM_OF.items():
        values = columns[sql]
        for (hour, endpoint, value), n in Counter(zip(hours, endpoints, values, strict=True)).items():
            counts[(dim, hour, endpoint, NULL_VALUE if value is None else value)] = n
    return counts


def resolved(counts: dict[tuple, int], ids_by_storage: dict) -> dict[tuple, int]:
    """`counts` keyed by stored ids: endpoints and each dim's values mapped through the id maps
    of their storage (ENDPOINT, CLIENT, TERM; INTEGER values are stored as they are)."""
    endpoint_ids = ids_by_storage[ENDPOINT]
    maps = {dim: ids_by_storage.get(column.storage) for dim, column in enumerate(DIMS)}
    maps.update((HOURLY_DIM_OF[field.sql], ids_by_storage.get(field.storage)) for field in HOURLY_FIELDS)
    maps[HOURLY] = maps[QUARTERLY] = None
    resolved_counts: dict[tuple, int] = {}
    for (dim, period, endpoint, value), n in counts.items():
        ids = maps[dim]
        if ids is not None and value != NULL_VALUE:
            value = ids[value]
        key = (dim, period, endpoint_ids[endpoint], value)
        resolved_counts[key] = resolved_counts.get(key, 0) + n
    return resolved_counts


def add(counts: dict[tuple, int]):
    """Add counts (by stored ids) of rows being inserted."""
    _upsert(counts, 1)


def apply(condition: str, params: list, sign: int):
    """Add (sign 1) or subtract (sign -1) the counts of the stored records matching `condition`
    (SQL on the record table). Deletions call it before they delete, in their transaction; it
    also builds the rollups of a database that had none.

    The rows are read once and counted in Python: a GROUP BY per column over them cost several
    times more (seconds for a large client's deletion, all of it under the write lock)."""
    fields = tuple(dict.fromkeys(["ts", "endpoint", *(field.sql for field in DIMS + HOURLY_FIELDS)]))
    cursor = query(f"SELECT {', '.join(fields)} FROM record WHERE {condition}", params)
    counts: dict[tuple, int] = {}
    while rows := cursor.fetchmany(10_000):
        for key, n in count(dict(zip(fields, zip(*rows, strict=True), strict=True))).items():
            counts[key] = counts.get(key, 0) + n
    _upsert(counts, sign)
    if sign < 0 and counts:
        # Rows counted down to nothing go, so expired periods leave no trace behind.
        for dim in PERIOD_MS:
            periods = [key[1] for key in counts if key[0] == dim]
            query(
                "DELETE FROM rollup WHERE dim = ? AND period BETWEEN ? AND ? AND n = 0",
                [dim, min(periods), max(periods)],
            )


def _upsert(counts: dict, sign: int):
    query_many(_UPSERT, [(*key, sign * n) for key, n in counts.items()])
