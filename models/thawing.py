"""Reading frozen records (models/freezing.py) with the same SQL as records stored as rows.

The blocks a read may need are unpacked a run of hours at a time (at most about CHUNK_RECORDS
records) into a temporary table of the read's connection, `record_staging`, shaped as the
record table. A read then either runs its own statement on that table and merges the answers
(counts, sums, first and last times), or keeps the rows of it that match its condition in a
second temporary table, `record_thawed`, and reads the record table and that one together
(pages in time order). Either way only a chunk of unpacked records, and the rows matching,
are held at once.
"""

from . import blocks
from .blocks import COLUMNS, HOUR_MS, block_condition
from .database import db, insert_rows, query

STAGING = "record_staging"
THAWED = "record_thawed"
# A read unpacks a first run of about FIRST_RECORDS records, then runs twice as long each time,
# up to CHUNK_RECORDS: a page from the newest frozen hour unpacks little.
FIRST_RECORDS = 2_000
CHUNK_RECORDS = 50_000
_ALL = ", ".join(COLUMNS)
# The records of the window, stored as rows or thawed (the rows of record_thawed).
BOTH = f"(SELECT {_ALL} FROM record UNION ALL SELECT {_ALL} FROM {THAWED})"


def runs(endpoint_ids: list | None, start_ms: int | None, end_ms: int | None, descending: bool) -> list[tuple]:
    """(first hour, last hour) of each run of hours whose blocks may hold records of
    `endpoint_ids` (None: every endpoint) in [start_ms, end_ms], newest first if `descending`;
    a run holds at most CHUNK_RECORDS records unless one hour alone holds more."""
    condition, params = block_condition(endpoint_ids, start_ms, end_ms)
    order = "DESC" if descending else "ASC"
    hours = query(
        f"SELECT hour, SUM(n) FROM record_block WHERE {condition} GROUP BY hour ORDER BY hour {order}", params
    ).fetchall()
    found, run, held, size = [], None, 0, FIRST_RECORDS
    for hour, count in hours:
        if run is not None and held + count > size:
            found.append(run)
            run, held, size = None, 0, min(2 * size, CHUNK_RECORDS)
        run = (hour, hour) if run is None else (min(run[0], hour), max(run[1], hour))
        held += count
    if run is not None:
        found.append(run)
    return found


def stage(endpoint_ids: list | None, run: tuple) -> None:
    """Unpack the blocks of `endpoint_ids` (None: all) and the run's hours into record_staging
    (emptied first)."""
    _empty(STAGING)
    condition, params = block_condition(endpoint_ids, None, None)
    for (data,) in query(
        f"SELECT data FROM record_block WHERE {condition} AND hour >= ? AND hour <= ?", [*params, *run]
    ).fetchall():
        insert_rows(f"INSERT INTO {STAGING} ({_ALL})", len(COLUMNS), blocks.unpack(data))


def thaw_ids(after_id: int, upto_id: int, condition: str, params: list) -> bool:
    """Fill record_thawed with the frozen records of ids in (after_id, upto_id] matching
    `condition` (SQL on alias r); whether any block may hold such ids."""
    found = query("SELECT data FROM record_block WHERE last_id > ? AND first_id <= ?", [after_id, upto_id]).fetchall()
    if not found:
        return False
    start_thawed()
    _empty(STAGING)
    for (data,) in found:
        insert_rows(f"INSERT INTO {STAGING} ({_ALL})", len(COLUMNS), blocks.unpack(data))
    keep(f"r.id > ? AND r.id <= ? AND {condition}", [after_id, upto_id, *params])
    return True


def newest_id() -> int:
    """The highest id of a record stored, as a row or frozen (0: none)."""
    row = query(
        "SELECT MAX(id) FROM (SELECT MAX(id) AS id FROM record UNION ALL SELECT MAX(last_id) FROM record_block) t"
    ).fetchone()
    return row[0] or 0


def keep(condition: str, params: list) -> None:
    """Add the staged records matching `condition` (SQL on alias r) to record_thawed."""
    query(f"INSERT INTO {THAWED} ({_ALL}) SELECT {_ALL} FROM {STAGING} r WHERE {condition}", params)


COUNTS = "record_counts"


def start_counts() -> None:
    """Empty record_counts, the counts of frozen records a statistic read gathers."""
    query(f"CREATE TEMP TABLE IF NOT EXISTS {COUNTS} (part INTEGER, b BIGINT, v BIGINT, n BIGINT)")
    query(f"DELETE FROM {COUNTS}")


def count_into(part: int, endpoint_ids, start_ms, end_ms, select: str, params: list) -> bool:
    """Add to record_counts, as part `part`, the (b, v, n) rows `select` (a grouped count over
    record_staging, as alias r) gives for each run of the frozen records of the window; whether
    any block may hold some."""
    found = runs(endpoint_ids, start_ms, end_ms, False)
    for run in found:
        stage(endpoint_ids, run)
        query(f"INSERT INTO {COUNTS} (part, b, v, n) SELECT ?, b, v, n FROM ({select}) AS t", [part, *params])
    return bool(found)


def edge(endpoint_ids, start_ms, end_ms, condition: str, params: list, newest: bool):
    """The oldest (newest) ts among the frozen records of the window matching `condition`
    (SQL on alias r); None when none does. Runs are read from that end until one matches."""
    aggregate = "MAX(r.ts)" if newest else "MIN(r.ts)"
    for run in runs(endpoint_ids, start_ms, end_ms, newest):
        stage(endpoint_ids, run)
        found = query(f"SELECT {aggregate} FROM {STAGING} r WHERE {condition}", params).fetchone()[0]
        if found is not None:
            return found
    return None


def thaw_window(endpoint_ids, start_ms, end_ms, condition: str, params: list) -> bool:
    """Fill record_thawed with the frozen records of the window matching `condition`; whether
    any block may hold some (then read `BOTH`)."""
    found = runs(endpoint_ids, start_ms, end_ms, False)
    if found:
        start_thawed()
    for run in found:
        stage(endpoint_ids, run)
        keep(condition, params)
    return bool(found)


def start_thawed() -> None:
    _empty(THAWED)


def run_start_ms(run: tuple) -> int:
    return run[0] * HOUR_MS


def run_end_ms(run: tuple) -> int:
    """The last ms of the run's hours."""
    return (run[1] + 1) * HOUR_MS - 1


def _empty(table: str) -> None:
    query(db.obj.dialect.temp_like_record.format(table=table))
    query(f"DELETE FROM {table}")
