"""Daily rollups: record counts per (column, day, endpoint, value), kept exactly in step with
the records, so that statistics over long windows read thousands of rollup rows instead of
millions of records.

Every change to the records goes through `apply`, in the same transaction: ingestion adds the
counts of the rows it inserted, deletion (API, client deletion, retention) subtracts those of
the rows it removes. A query may use the rollups only for whole days and only when its filters
are on the endpoint alone (see Filters.endpoint_only); the parts of its window that cover part
of a day are counted from the records.
"""

from .columns import COLUMNS
from .database import db

DAY_MS = 86_400_000
# Rollups keep no NULLs (they are part of the key): an unknown value is stored as this.
NULL_VALUE = -(2**62)
# The rolled-up columns, by position: a rollup row's `dim`.
DIMS = tuple(column for column in COLUMNS if column.groupable)
DIM_OF = {column.name: i for i, column in enumerate(DIMS)}
# Any one column counts each record once: the endpoint's is used for plain counts.
COUNT_DIM = DIM_OF["endpointId"]

_DAY_SQL = f"((ts - (((ts % {DAY_MS}) + {DAY_MS}) % {DAY_MS})) / {DAY_MS})"


def apply(condition: str, params: list, sign: int):
    """Add (sign 1) or subtract (sign -1) the counts of the records matching `condition` (SQL
    on the record table). Call inside the transaction that inserts or deletes them, while
    they are there (after the insert, before the delete)."""
    for dim, column in enumerate(DIMS):
        db.execute_sql(
            "INSERT INTO rollup_day (dim, day, endpoint, value, n)"
            f" SELECT {dim}, {_DAY_SQL}, endpoint, COALESCE({column.sql}, {NULL_VALUE}), {int(sign)} * COUNT(*)"
            f" FROM record WHERE {condition} GROUP BY 2, 3, 4"
            " ON CONFLICT (dim, day, endpoint, value) DO UPDATE SET n = n + excluded.n",
            params,
        )
    if sign < 0:
        # Rows counted down to nothing go, so expired days leave no trace behind.
        days = f"SELECT MIN({_DAY_SQL}), MAX({_DAY_SQL}) FROM record WHERE {condition}"
        first, last = db.execute_sql(days, params).fetchone()
        if first is not None:
            for dim in range(len(DIMS)):
                db.execute_sql(
                    "DELETE FROM rollup_day WHERE dim = ? AND day BETWEEN ? AND ? AND n = 0", [dim, first, last]
                )
