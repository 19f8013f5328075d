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

from .columns import COLUMNS, COLUMNS_BY_NAME, ENDPOINT
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
QUARTER_MS = 900_000
# Plain counts per hour and endpoint, and per quarter hour and endpoint (value always 0): time
# series of every length read these (a day's default buckets are quarter hours). Cheap to keep:
# at most 96 rows a day per endpoint.
HOURLY = len(DIMS)
QUARTERLY = HOURLY + 1
# Columns also counted per hour and value, so that their time series and their counts over
# windows that start or end mid-day (the last 24 hours) read rollups too: `action` (a handful
# of values, the usual chart) and `clientId` ("who asked most today"). A row per (hour,
# endpoint, value) adds up: at 10M records the clientId rows add ~3 bytes per record.
HOURLY_COLUMNS = ("action", "clientId")
HOURLY_DIM_OF = {name: QUARTERLY + 1 + i for i, name in enumerate(HOURLY_COLUMNS)}
PERIOD_MS = {
    **{dim: DAY_MS for dim in range(len(DIMS))},
    HOURLY: HOUR_MS,
    QUARTERLY: QUARTER_MS,
    **{dim: HOUR_MS for dim in HOURLY_DIM_OF.values()},
}


_UPSERT = (
    "INSERT INTO rollup (dim, period, endpoint, value, n) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n"
)


def levels(column_name: str | None) -> list[tuple[int, int]]:
    """The rollups that count records by `column_name` (None: plain counts), as (dim, period
    length), longest periods first."""
    if column_name is None:
        # The endpoint's daily rollup counts every record once a day, like a plain count.
        return [(DIM_OF["endpointId"], DAY_MS), (HOURLY, HOUR_MS), (QUARTERLY, QUARTER_MS)]
    found = [(DIM_OF[column_name], DAY_MS)] if column_name in DIM_OF else []
    if column_name in HOURLY_DIM_OF:
        found.append((HOURLY_DIM_OF[column_name], HOUR_MS))
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
    for name, dim in HOURLY_DIM_OF.items():
        values = columns[COLUMNS_BY_NAME[name].sql]
        for (hour, endpoint, value), n in Counter(zip(hours, endpoints, values, strict=True)).items():
            counts[(dim, hour, endpoint, NULL_VALUE if value is None else value)] = n
    return counts


def resolved(counts: dict[tuple, int], ids_by_storage: dict) -> dict[tuple, int]:
    """`counts` keyed by stored ids: endpoints and each dim's values mapped through the id maps
    of their storage (ENDPOINT, CLIENT, TERM; INTEGER values are stored as they are)."""
    endpoint_ids = ids_by_storage[ENDPOINT]
    maps = {dim: ids_by_storage.get(column.storage) for dim, column in enumerate(DIMS)}
    maps.update((dim, ids_by_storage.get(COLUMNS_BY_NAME[name].storage)) for name, dim in HOURLY_DIM_OF.items())
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
    fields = ("ts", "endpoint", *(column.sql for column in DIMS))
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
