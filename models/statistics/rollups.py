"""Rollups: record counts per (dim, period, endpoint, value), so that statistics over long
windows read thousands of rollup rows instead of millions of records; together with the
records not counted yet, exactly the records' counts.

Records are counted a little after they are stored (models/statistics/counting.py: `add` the counts of
the records past a mark), and reads count the records past that mark from the records
themselves (see statistics._grouped).

A dim says what is counted (the record columns that make up `value`; none: plain counts),
per how long a period, and whether per endpoint or over all endpoints (`endpoint` 0). Every
change to the records updates the dims in the same transaction: counting adds the counts of
the rows stored (`count`, `add`), deletion subtracts those of the rows it removes (`apply`);
both count with the same code. A query may use a dim for the whole periods
of its window when the dim holds every column the query filters or groups by (see `usable`);
the rest of the window is counted from the records (see statistics._grouped).

Two horizons. Daily and longer dims are the statistics: they outlive the records, so records
expiring (retention) leave them as they are, and they expire by themselves at the statistics
horizon (`expire`). Hourly and shorter dims expire with the records, counted down exactly like
a deletion: they would be too many rows to keep for a year, and past the records' horizon a
window is answered in whole days.
"""

import json
from collections import Counter
from dataclasses import dataclass

from catalogue import DAY, ENDPOINT, FIELDS, FIELDS_BY_NAME, HOUR, INTEGER, QUARTER
from models.engine.database import insert_rows, query
from models.schema import settings

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
QUARTER_MS = 900_000
# Rollups keep no NULLs (they are part of the key): an unknown value is stored as this.
NULL_VALUE = -(2**62)
# A pair (first, second) is stored as first * PAIR + code(second): the second column is an
# integer of a few small values (-1..5), code 0 standing for unknown.
PAIR = 8


@dataclass(frozen=True)
class Dim:
    id: int
    columns: tuple[str, ...]  # record columns of `value`; (): plain counts (value 0)
    period_ms: int
    per_endpoint: bool = True
    # Summed from this shorter dim's rows (its id) once a period has closed, instead of counted
    # batch by batch (see `build`); None: counted batch by batch.
    built_from: int | None = None

    @property
    def statistics(self) -> bool:
        """Kept to the statistics horizon (else it expires with the records)."""
        return self.period_ms >= DAY_MS

    @property
    def description(self) -> str:
        scope = "" if self.per_endpoint else "@all"
        return f"{'+'.join(self.columns) or 'n'}/{self.period_ms // 60_000}m{scope}"


def _dims() -> tuple[Dim, ...]:
    """Every dim, in a fixed order (their ids): per endpoint, plain daily counts and the
    catalogue's daily columns (the endpoint is every per-endpoint row's own), plain hourly and quarter-hour
    counts (time series of every length; a day's default buckets are quarter hours; at most 96
    rows a day per endpoint), and the catalogue's hourly and quarter-hour columns (the client's
    per hour: "who asked most today"; the action's: the usual chart, whose default buckets
    over a day are quarter hours); then the columns counted over all endpoints
    (question with action: tens of thousands of names a day), which also have 16- and 4-day
    and 6-hour periods, so that a 30-day top list reads a few blocks instead of 30 days of
    names, and the last 24 hours a few quarter days instead of 24 hours (see BENCHMARKS.md)."""
    specs = []
    narrow = [field for field in FIELDS if field.rollups and field.rollup_endpoints and field.storage != ENDPOINT]
    specs += [((), DAY_MS, True)] + [((field.sql,), DAY_MS, True) for field in narrow if DAY in field.rollups]
    specs += [((), HOUR_MS, True), ((), QUARTER_MS, True)]
    specs += [((field.sql,), HOUR_MS, True) for field in narrow if HOUR in field.rollups]
    specs += [((field.sql,), QUARTER_MS, True) for field in narrow if QUARTER in field.rollups]
    # The blocks (16 and 4 days, 6 hours) are summed from the days and hours they are made of
    # once they close: counted batch by batch they were a third of every batch's rollup rows.
    sources = {16 * DAY_MS: DAY_MS, 4 * DAY_MS: DAY_MS, 6 * HOUR_MS: HOUR_MS}
    for field in FIELDS:
        if field.rollups and not field.rollup_endpoints:
            columns = (field.sql, FIELDS_BY_NAME[field.rollup_with].sql) if field.rollup_with else (field.sql,)
            periods = [DAY_MS] if DAY in field.rollups else []
            periods += [HOUR_MS] if HOUR in field.rollups else []
            for period_ms in [16 * DAY_MS, 4 * DAY_MS, DAY_MS, 6 * HOUR_MS, HOUR_MS]:
                source = sources.get(period_ms)
                if period_ms in periods or source in periods:
                    specs.append((columns, period_ms, False, (columns, source, False) if source else None))
    ids = {spec[:3]: i for i, spec in enumerate(specs)}
    return tuple(Dim(i, *spec[:3], ids[spec[3]] if len(spec) > 3 and spec[3] else None) for i, spec in enumerate(specs))


DIMS = _dims()
BUILT = tuple(dim for dim in DIMS if dim.built_from is not None)
_BY_ID = {dim.id: dim for dim in DIMS}
# A block is summed once the newest record stored is this far past its end, so that records
# arriving a little out of order still count in the days or hours it is summed from (those
# that come later are added to it as they come).
BUILD_GRACE_MS = HOUR_MS
STATISTICS = tuple(dim for dim in DIMS if dim.statistics)
WITH_RECORDS = tuple(dim for dim in DIMS if not dim.statistics)
# What the rows mean, dim by dim: rows of a dim whose meaning is new are counted anew at
# start-up, and rows of a dim that moved are renumbered (see models/migrations/run.py).
LAYOUT = ";".join(f"{dim.id}:{dim.description}" for dim in DIMS)
# The record columns each dim needs to count a row.
COLUMNS = tuple(dict.fromkeys(["ts", "endpoint", *(column for dim in DIMS for column in dim.columns)]))
for _dim in DIMS:
    if len(_dim.columns) == 2:
        assert FIELDS_BY_NAME[_dim.columns[1]].storage == INTEGER, "a pair's second column must be a small integer"

_MARK = "statistics_from"
# {dim description: the first period of it not summed yet} (see `build`).
_BUILT_THROUGH = "blocks_built_through"
_INSERT = "INSERT INTO rollup (dim, period, endpoint, value, n)"
_ADD = "ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n"


def usable(columns: set, endpoints_bound: bool, interval_ms: int | None, dims=None) -> list[Dim]:
    """The dims that can count records filtered or grouped by the record columns `columns`
    (besides the endpoint), longest periods first, one per period (the first of `dims` that
    qualifies; None: these, DIMS). `endpoints_bound`: the query
    filters or groups by endpoint, which only per-endpoint dims know. A dim qualifies when it
    holds every one of `columns` and is keyed by one of them first (a plain count reads a plain
    dim, not the biggest one), and when its periods make whole buckets of `interval_ms`."""
    found: dict[int, Dim] = {}
    for dim in DIMS if dims is None else dims:
        keyed = dim.columns
        if not set(columns) <= set(keyed) or (keyed and keyed[0] not in columns):
            continue
        if (endpoints_bound and not dim.per_endpoint) or (interval_ms and interval_ms % dim.period_ms):
            continue
        found.setdefault(dim.period_ms, dim)
    return sorted(found.values(), key=lambda dim: -dim.period_ms)


def value_sql(dim: Dim, column: str) -> str:
    """SQL reading the record column `column` out of a rollup row of `dim` (NULL: unknown)."""
    if column == "endpoint":
        return "endpoint"
    # NULLIF rather than CASE: a top list decodes hundreds of thousands of rows, and CASE cost
    # a third of the statement's time.
    if len(dim.columns) == 1:
        return f"NULLIF(value, {NULL_VALUE})"
    if column == dim.columns[0]:
        return f"NULLIF(value / {PAIR}, 0)"
    return f"(NULLIF(value % {PAIR}, 0) - 2)"


def count(columns: dict[str, list], dims=None) -> dict[tuple, int]:
    """Counts by rollup key, as stored, of the rows given column by column (`columns` maps each
    record column name ("ts", "endpoint" and every dim's columns) to its values, one per row, as
    stored: ids, and None for unknown). Counted for `dims` (None: every dim)."""
    counts: dict[tuple, int] = {}
    # Counter counts in C, and each column is encoded once for every dim that keys by it: a
    # Python loop over rows x columns cost ~12 us per record, decoding keys one by one ~4.
    stamps = columns["ts"]
    endpoints = columns["endpoint"]
    everywhere = [0] * len(stamps)
    periods: dict[int, list] = {}
    encoded: dict[tuple, list] = {}
    built = built_through(write=True) if BUILT else {}
    for dim in DIMS if dims is None else dims:
        if dim.period_ms not in periods:
            periods[dim.period_ms] = [ts // dim.period_ms for ts in stamps]
        if dim.columns not in encoded:
            encoded[dim.columns] = _encoded(columns, dim.columns, everywhere)
        scope = endpoints if dim.per_endpoint else everywhere
        ident = dim.id
        mark = built.get(ident)
        if mark is not None and min(periods[dim.period_ms], default=mark) >= mark:
            continue  # every period of it here is summed when it closes
        found = Counter(zip(periods[dim.period_ms], scope, encoded[dim.columns], strict=True))
        if mark is None:
            for (period, endpoint, value), n in found.items():
                counts[(ident, period, endpoint, value)] = n
            continue
        # Only the periods summed already: the others are summed when they close.
        for (period, endpoint, value), n in found.items():
            if period < mark:
                counts[(ident, period, endpoint, value)] = n
    return counts


def _encoded(columns: dict[str, list], keyed: tuple, everywhere: list) -> list:
    """A dim's `value` for each row: unknown as NULL_VALUE, a pair as first * PAIR + code(second),
    code 0 standing for unknown; 0 for plain counts."""
    if not keyed:
        return everywhere
    if len(keyed) == 1:
        return [NULL_VALUE if value is None else value for value in columns[keyed[0]]]
    return [
        (first or 0) * PAIR + (0 if second is None else second + 2)
        for first, second in zip(columns[keyed[0]], columns[keyed[1]], strict=True)
    ]


def add(counts: dict[tuple, int]):
    """Add counts (as stored) of rows being inserted."""
    upsert(counts, 1)


def built_through(write=False) -> dict[int, int]:
    """{built dim id: the first period of it not summed yet}; the blocks before it are whole.
    A dim without a mark yet (a database older than the marks) has every block it holds
    counted batch by batch, whole: `write` (inside a write transaction) marks it from there
    on; reading, it has no bound."""
    text = settings.read(_BUILT_THROUGH)
    stored = json.loads(text) if text else {}
    marks = {dim.id: stored[dim.description] for dim in BUILT if dim.description in stored}
    missing = [dim for dim in BUILT if dim.id not in marks]
    if missing and write:
        for dim in missing:
            newest = query("SELECT MAX(period) FROM rollup WHERE dim = ?", [dim.id]).fetchone()[0]
            marks[dim.id] = 0 if newest is None else newest + 1
        _save(marks)
    return marks


def build(newest_ms: int, now_ms: int):
    """Sum the blocks that closed (ended BUILD_GRACE_MS before the newest record stored, and
    before now) from the shorter periods they are made of; call in the write transaction
    that stored the records, after `add`."""
    if not BUILT:
        return
    marks = built_through(write=True)
    moved = False
    for dim in BUILT:
        closed = (min(newest_ms, now_ms) - BUILD_GRACE_MS) // dim.period_ms
        if closed <= marks[dim.id]:
            continue
        source = _BY_ID[dim.built_from]
        ratio = dim.period_ms // source.period_ms
        query(
            "INSERT INTO rollup (dim, period, endpoint, value, n)"
            f" SELECT ?, period / {ratio}, endpoint, value, SUM(n) FROM rollup"
            " WHERE dim = ? AND period >= ? AND period < ?"
            f" GROUP BY period / {ratio}, endpoint, value"
            " ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n",
            [dim.id, source.id, marks[dim.id] * ratio, closed * ratio],
        )
        marks[dim.id] = closed
        moved = True
    if moved:
        _save(marks)


def _save(marks: dict[int, int]):
    settings.write(_BUILT_THROUGH, json.dumps({_BY_ID[ident].description: mark for ident, mark in marks.items()}))


def forget(end_ms: int | None, client_ids: str | None = None, endpoint_ids: list | None = None, params=()):
    """Remove the counts a deletion can still attribute once the records are gone (those past
    the records' horizon): the rows of the selected clients (`client_ids`, SQL selecting client
    entry ids, with `params`) in every dim keyed by client; or, when whole endpoints are deleted
    (`endpoint_ids`), their rows in every per-endpoint dim; or, when neither is given, every
    row. Only whole periods up to `end_ms` (None: all) go: a period that began before and ends
    after it keeps its count. Run after the records' own counts were subtracted (`apply`)."""
    for dim in STATISTICS:
        condition, args = "dim = ?", [dim.id]
        if end_ms is not None:
            condition += " AND period < ?"
            args.append((end_ms + 1) // dim.period_ms)
        if client_ids is not None:
            if "client" not in dim.columns:
                continue
            condition += f" AND value IN ({client_ids})"
            args += list(params)
        elif endpoint_ids is not None:
            if not dim.per_endpoint or not endpoint_ids:
                continue
            condition += f" AND endpoint IN ({', '.join('?' * len(endpoint_ids))})"
            args += list(endpoint_ids)
        query(f"DELETE FROM rollup WHERE {condition}", args)


def expire(before_ms: int) -> int:
    """Forget the statistics from before the day `before_ms` falls in; how many rows went.

    Every period that began before that day goes (a 16-day block with it, though part of it
    is younger), and queries count nothing before it (`statistics_from`): so no window ever
    reads a block whose older days are gone."""
    mark = before_ms // DAY_MS * DAY_MS
    settings.write(_MARK, str(mark))
    return sum(
        query("DELETE FROM rollup WHERE dim = ? AND period < ?", [dim.id, -(-mark // dim.period_ms)]).rowcount
        for dim in STATISTICS
    )


def statistics_from() -> int | None:
    """The time (ms) before which statistics were expired; None if they never were."""
    mark = settings.read(_MARK)
    return int(mark) if mark is not None else None


def upsert(counts: dict, sign: int):
    insert_rows(_INSERT, 5, [(*key, sign * n) for key, n in counts.items()], _ADD)
