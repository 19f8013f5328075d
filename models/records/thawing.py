"""Reading frozen records (models/records/freezing.py) with the same SQL as records stored as rows.

The blocks a read may need are unpacked a run of hours at a time (at most about CHUNK_RECORDS
records) into a temporary table of the read's connection, `record_staging`, shaped as the
record table. A read then either runs its own statement on that table and merges the answers
(counts, sums, first and last times), or keeps the rows of it that match its condition in a
second temporary table, `record_thawed`, and reads the record table and that one together
(pages in time order). Either way only a chunk of unpacked records, and the rows matching,
are held at once.
"""

import bisect
import itertools
import json
import re
from collections import Counter
from operator import itemgetter

from models.engine.database import db, insert_rows, query, read_table, temp_table
from models.engine.sql import chunks, placeholders
from models.records import blocks
from models.records.blocks import COLUMNS, HOUR_MS, block_condition

STAGING = "record_staging"
_TS = COLUMNS.index("ts")
THAWED = "record_thawed"
# A read unpacks a first run of about FIRST_RECORDS records, then runs twice as long each time,
# up to CHUNK_RECORDS: a page from the newest frozen hour unpacks little.
FIRST_RECORDS = 2_000
CHUNK_RECORDS = 50_000
_ALL = ", ".join(COLUMNS)
# The records of the window, stored as rows or thawed (the rows of record_thawed); or as rows
# or staged (a read that takes the staged records as they are, without keeping some first).
BOTH = f"(SELECT {_ALL} FROM record UNION ALL SELECT {_ALL} FROM {THAWED})"
WITH_STAGED = f"(SELECT {_ALL} FROM record UNION ALL SELECT {_ALL} FROM {STAGING})"


def runs(
    endpoint_ids,
    start_ms,
    end_ms,
    descending: bool,
    hint: dict | None = None,
    largest: int = CHUNK_RECORDS,
    count: int | None = None,
) -> list[tuple]:
    """The runs `each_run` gives, as a list; `count`: the first runs only (the blocks past them
    are not read)."""
    return list(itertools.islice(each_run(endpoint_ids, start_ms, end_ms, descending, hint, largest), count))


def each_run(endpoint_ids, start_ms, end_ms, descending: bool, hint: dict | None = None, largest: int = CHUNK_RECORDS):
    """(first hour, last hour, block ids or None) of each run of the blocks that may hold
    records of `endpoint_ids` (None: every endpoint) in [start_ms, end_ms], newest first if
    `descending`; None: every such block of those hours. Runs grow from FIRST_RECORDS records to
    `largest` (an hour is never split). `hint`: {"client" or "question": ids}, one of which
    every record wanted holds: blocks holding none are left out (block_question for names,
    exactly; the client filters for clients). Lazy: a reader that stops early (a page filled)
    has not chosen the blocks past it."""
    if hint and not all(hint.values()):
        return  # a value looked for that no record holds
    if hint and "client" in hint:  # a client entry's records are all of its endpoint
        endpoint_ids = _endpoints_of(hint["client"], endpoint_ids)
    condition, params = block_condition(endpoint_ids, start_ms, end_ms)
    order = "DESC" if descending else "ASC"
    if hint:
        clients = blocks.Wanted(hint["client"]) if "client" in hint else None
        filters = "NULL" if clients is None else "client_filter"
        if "question" in hint:  # the blocks holding the names, exactly: no filter to test
            found = _holding_questions(filters, hint["question"], endpoint_ids, start_ms, end_ms, descending)
        else:
            found = query(
                f"SELECT hour, n, id, {filters} FROM record_block WHERE {condition} ORDER BY hour {order}", params
            )
        chosen = ((hour, n, ident) for hour, n, ident, held in found if clients is None or clients.may_be_in(held))
    else:
        chosen = query(
            f"SELECT hour, SUM(n), NULL FROM record_block WHERE {condition} GROUP BY hour ORDER BY hour {order}",
            params,
        )
    run, held, size = None, 0, min(FIRST_RECORDS, largest)
    for hour, n, ident in chosen:
        if run is not None and hour != run[-1] and held + n > size:
            yield _run(run, endpoint_ids, hint)
            run, held, size = None, 0, min(2 * size, largest)
        run = [ident, hour] if run is None else [*run, ident, hour]
        held += n
    if run is not None:
        yield _run(run, endpoint_ids, hint)


# The hours of blocks the first statement choosing blocks by name reads, from the window's
# newest (oldest) end; each next one reads twice as many. A common name is in most blocks: a
# page of it is filled from the first hours, whose block_question rows are all that is read.
FIRST_HOURS = 4


def _holding_questions(filters: str, questions, endpoint_ids, start_ms, end_ms, descending: bool):
    """(hour, n, id, `filters`) of the blocks of the window that hold one of the names
    `questions` (term ids), in hour order, by block_question (each name's rows of some hours are
    a range of its key; the blocks are then read by id, not the window's every block tested), in
    spans of hours from the window's end."""
    # The window's hours that have blocks (each bound read from the hour index alone).
    low = query("SELECT MIN(hour) FROM record_block").fetchone()[0]
    high = query("SELECT MAX(hour) FROM record_block").fetchone()[0]
    if low is None:
        return
    low = low if start_ms is None else max(low, start_ms // HOUR_MS)
    high = high if end_ms is None else min(high, end_ms // HOUR_MS)
    condition, params = block_condition(endpoint_ids, start_ms, end_ms)
    names = json.dumps(list(questions))
    rows = db.obj.dialect.json_array_rows("?", "m")
    select = (
        f"SELECT hour, n, id, {filters} FROM (SELECT DISTINCT q.block FROM block_question q WHERE q.question IN"
        f" (SELECT CAST(m.value AS BIGINT) FROM {rows}) AND q.hour >= ? AND q.hour <= ?) h"
        f" JOIN record_block ON id = h.block WHERE {condition} ORDER BY hour {'DESC' if descending else 'ASC'}"
    )
    span = FIRST_HOURS
    while low <= high:
        first, last = (max(low, high - span + 1), high) if descending else (low, min(high, low + span - 1))
        yield from query(select, [names, first, last, *params])
        low, high, span = (low, first - 1, 2 * span) if descending else (last + 1, high, 2 * span)


def newest_hour(endpoint_ids, start_ms, end_ms, descending: bool) -> int | None:
    """The newest (oldest if not `descending`) hour of a block that may hold records of the window."""
    condition, params = block_condition(endpoint_ids, start_ms, end_ms)
    return query(
        f"SELECT {'MAX' if descending else 'MIN'}(hour) FROM record_block WHERE {condition}", params
    ).fetchone()[0]


def _endpoints_of(entries, endpoint_ids) -> list:
    """Of `endpoint_ids` (None: all), the endpoints of the client entries `entries`."""
    found = set()
    for part in chunks(entries, 500):
        found.update(
            row[0]
            for row in query(f"SELECT DISTINCT endpoint FROM client WHERE id IN ({placeholders(len(part))})", part)
        )
    return sorted(found if endpoint_ids is None else found & set(endpoint_ids))


def _run(run: list, endpoint_ids, hint) -> tuple:
    """(first hour, last hour, what to unpack, the values a hint wants by column index) of
    [id, hour, id, hour, ...]: the block ids, or with no hint the endpoints whose blocks of
    those hours are all wanted."""
    hours = run[1::2]
    chosen = ("ids", tuple(run[0::2])) if hint else ("endpoints", endpoint_ids)
    wanted = {COLUMNS.index(column): set(values) for column, values in (hint or {}).items()}
    return min(hours), max(hours), chosen, wanted


def stage(run: tuple, only=None, earliest: tuple = ()) -> None:
    """Unpack the run's blocks into record_staging (emptied first): with a hint, only the
    records that hold its values (the others cannot be wanted); `only`: the column indexes to
    fill (the others NULL; None: all), see `named`. `earliest` (column names): only the
    earliest record of each combination of their values, for a statement taking the first
    times of groups those columns decide, under a condition they and ts decide."""
    _empty(STAGING)
    columns = range(len(COLUMNS)) if only is None else sorted(only)
    names = ", ".join(COLUMNS[i] for i in columns)
    rows = unpacked(run, only)
    if earliest:
        at = [columns.index(COLUMNS.index(name)) for name in earliest]
        rows = _earliest(rows, itemgetter(*at), columns.index(COLUMNS.index("ts")))
    insert_rows(f"INSERT INTO {STAGING} ({names})", len(columns), rows)


def _earliest(rows: list[tuple], key, ts_at: int) -> list[tuple]:
    """Of `rows`, the one of the smallest ts of each `key` (a busy client's names: a record a
    name, not hundreds, staged for SQL)."""
    first = {}
    for row in rows:
        held = first.get(found := key(row))
        if held is None or row[ts_at] < held[ts_at]:
            first[found] = row
    return list(first.values())


def named(*statements: str) -> frozenset | None:
    """The indexes of the record columns the statements name (as words, with or without an
    alias), and the NOT NULL ones (blocks.KEY: the staging table may demand them); None when a
    statement takes every column (a `*` other than COUNT's). A read that names only KEY
    columns inflates only their stream of each block."""
    text = " ".join(statements).replace("(*)", "")
    if "*" in text:
        return None
    words = set(_WORDS.findall(text.lower()))
    return blocks.KEY | {index for index, column in enumerate(COLUMNS) if column in words}


_WORDS = re.compile(r"[a-z_0-9]+")


def unpacked(run: tuple, only=None) -> list[tuple]:
    """The records of the run's blocks (rows of the columns `only`, None: all, in COLUMNS
    order; in no order): with a hint, only those that hold its values."""
    wanted = run[3] or None
    rows = []
    for data in _blobs(run):
        rows += blocks.unpack(data, wanted=wanted, only=only)
    return rows


def _blobs(run: tuple):
    """The data of each block of the run."""
    kind, chosen = run[2]
    if kind == "endpoints":
        condition, params = block_condition(chosen, None, None)
        parts = [(f"{condition} AND hour >= ? AND hour <= ?", [*params, run[0], run[1]])]
    else:
        ids = list(chosen)
        parts = [(f"id IN ({placeholders(len(part))})", part) for part in chunks(ids, 500)]
    for condition, params in parts:
        for (data,) in query(f"SELECT data FROM record_block WHERE {condition}", params).fetchall():
            yield data


def pieces(run: tuple, largest: int, low: int, high: int, descending: bool):
    """The records of the run's blocks with ts in [low, high], as (first ts, last ts, records)
    of spans of time that tile [low, high], newest first if `descending`, each holding about
    `largest` records at most (records of one ms are never split): the blocks are inflated
    once and a span's records built only when its turn comes, so an hour of tens of thousands
    of records is not held as rows at once. Records in no order within a span."""
    inflated = [(block, block.column(_TS)) for block in map(blocks.Inflated, _blobs(run))]
    if sum(low <= t <= high for _, times in inflated for t in times) <= largest:  # one span
        records = []
        for block, times in inflated:
            chosen = [i for i, t in enumerate(times) if low <= t <= high]
            if chosen:
                records += block.rows(range(len(COLUMNS)), None if len(chosen) == block.count else chosen)
        yield low, high, records
        return
    opened = []
    for block, times in inflated:
        order = sorted(range(block.count), key=times.__getitem__)
        opened.append((block, order, [times[i] for i in order]))
    stamps = sorted(t for _, _, times in opened for t in times if low <= t <= high)
    cuts = [low]  # each span's first ms
    for at in range(largest, len(stamps), largest):
        if stamps[at] > cuts[-1]:
            cuts.append(stamps[at])
    spans = [(first, last - 1) for first, last in zip(cuts, [*cuts[1:], high + 1], strict=True)]
    for first, last in reversed(spans) if descending else spans:
        records = []
        for block, order, times in opened:
            chosen = order[bisect.bisect_left(times, first) : bisect.bisect_right(times, last)]
            if chosen:
                records += block.rows(range(len(COLUMNS)), sorted(chosen))
        yield first, last, records


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
_COUNTED = f"{COUNTS} (part, b, v, n)"
_MAKE_COUNTS = f"CREATE TEMP TABLE IF NOT EXISTS {COUNTS} (part INTEGER, b BIGINT, v BIGINT, n BIGINT)"


def start_counts() -> None:
    """Empty record_counts, the counts of frozen records a statistic read gathers."""
    temp_table(_MAKE_COUNTS)
    query(f"DELETE FROM {COUNTS}")


def count_into(
    part: int, endpoint_ids, start_ms, end_ms, select: str, params: list, hint=None, earliest: tuple = ()
) -> bool:
    """Add to record_counts, as part `part`, the (b, v, n) rows `select` (a grouped count over
    record_staging, as alias r) gives for each run of the frozen records of the window; whether
    any block may hold some. `earliest`: as for `stage`."""
    counted = f"SELECT ?, CAST(b AS BIGINT), CAST(v AS BIGINT), n FROM ({select}) AS t"
    return collect(_COUNTED, endpoint_ids, start_ms, end_ms, counted, [part, *params], hint, earliest)


def tally_into(part: int, endpoint_ids, start_ms, end_ms, hint, column: int | None, interval_ms, values) -> bool:
    """Add to record_counts, as part `part`, the (b, v, n) counts of the frozen records of the
    window holding the hint's values, by bucket of `interval_ms` (None: one) and value of the
    column at index `column` (None: one), only its `values` (None: any); whether any block may
    hold some. Counted in Python, without staging: for filters naming endpoints and clients at
    most, which the blocks chosen and the hint's rows decide (a busy client's 100,000 records
    cost a count each, not a row of a temporary table)."""
    found = runs(endpoint_ids, start_ms, end_ms, False, hint)
    low = -(2**63) if start_ms is None else start_ms
    high = 2**63 if end_ms is None else end_ms
    only = {_TS} if column is None else {_TS, column}
    ts_at = sorted(only).index(_TS)
    value_at = None if column is None else sorted(only).index(column)
    kept = None if values is None else set(values)
    step = int(interval_ms) if interval_ms else None  # floored as statistics._bucket_sql floors
    counts = Counter()
    for run in found:
        for row in unpacked(run, only):
            ts = row[ts_at]
            if low <= ts <= high:
                value = None if value_at is None else row[value_at]
                if kept is None or value in kept:
                    counts[(ts - ts % step if step else None, value)] += 1
    insert_rows(f"INSERT INTO {_COUNTED}", 4, [(part, b, v, n) for (b, v), n in counts.items()])
    return bool(found)


def earliest_into(part: int, endpoint_ids, end_ms, entries: list, column: int) -> bool:
    """Add to record_counts, as part `part`, (b: first ts, v: value, n: 0) of each value of the
    column at index `column` among the frozen records of the client entries `entries` up to
    `end_ms` (None: all); whether any block may hold some. A block holds each client's records
    in time order: the first of each value is found at C speed, without a row a record."""
    found = runs(endpoint_ids, None, end_ms, False, {"client": entries})
    high = 2**63 if end_ms is None else end_ms
    first = {}
    for run in found:
        for data in _blobs(run):
            block = blocks.Inflated(data, {_TS, column, blocks.SORTED})
            for span in block.ranges(entries):
                times, values = block.values(_TS, [span]), block.values(column, [span])
                if times[-1] > high:  # in time order: keep those up to the end
                    kept = bisect.bisect_right(times, high)
                    times, values = times[:kept], values[:kept]
                # Read backwards, a dict keeps each value's first time in the span.
                for value, ts in dict(zip(reversed(values), reversed(times), strict=True)).items():
                    if ts < first.get(value, high + 1):
                        first[value] = ts
    insert_rows(f"INSERT INTO {_COUNTED}", 4, [(part, ts, v, 0) for v, ts in first.items()])
    return bool(found)


def collect(
    into: str, endpoint_ids, start_ms, end_ms, select: str, params: list, hint=None, earliest: tuple = ()
) -> bool:
    """Insert into `into` (a temporary table and its columns) the rows `select` (over
    record_staging, as alias r) gives for each run of the frozen records of the window; whether
    any block may hold some. Only a run of unpacked records is held at a time."""
    found = runs(endpoint_ids, start_ms, end_ms, False, hint)
    only = named(select)
    for run in found:
        stage(run, only, earliest)
        query(f"INSERT INTO {into} {select}", params)
    return bool(found)


def edge(endpoint_ids, start_ms, end_ms, condition: str, params: list, newest: bool, hint=None):
    """The oldest (newest) ts among the frozen records of the window matching `condition`
    (SQL on alias r); None when none does. Runs are read from that end until one matches."""
    aggregate = "MAX(r.ts)" if newest else "MIN(r.ts)"
    only = named(condition)
    for run in each_run(endpoint_ids, start_ms, end_ms, newest, hint):
        stage(run, only)
        found = query(f"SELECT {aggregate} FROM {STAGING} r WHERE {condition}", params).fetchone()[0]
        if found is not None:
            return found
    return None


def start_thawed() -> None:
    _empty(THAWED)


def run_start_ms(run: tuple) -> int:
    return run[0] * HOUR_MS


def run_end_ms(run: tuple) -> int:
    """The last ms of the run's hours."""
    return (run[1] + 1) * HOUR_MS - 1


def _empty(table: str) -> None:
    temp_table(db.obj.dialect.temp_like_record.format(table=table))
    query(f"DELETE FROM {table}")


def _make(table: str):
    return lambda dialect: dialect.temp_like_record.format(table=table)


for _table in (STAGING, THAWED):
    read_table(_make(_table))
read_table(lambda dialect: _MAKE_COUNTS)
