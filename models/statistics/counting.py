"""What is counted from the records after they are stored: the rollups (models/statistics/rollups.py) and
the names' first and last times (models/statistics/first_seen.py). An ingest request commits its records
and answers; they are counted a moment later by the service's counting process
(app/jobs/counting.py), so that the counting runs beside the next request rather than in front
of it: about a quarter of what storing a record cost.

A mark in the store is the highest record id whose counts are in. Every read counts the records
past it (the tail) from the records themselves, in the statement that reads the counts (the
mark read by `COUNTED_SQL` there: one snapshot), so answers are exact whatever the tail. Counts
and mark move in one write transaction. The tail is bounded: a batch being stored counts it
itself once it is longer than `behind_limit` records (nothing else counting: the counting
process stopped, a feed writing straight to the store), and anything that changes or deletes stored records
counts it first, in its own transaction (`apply`), so it never counts down a record that
was not counted up.
"""

from dataclasses import dataclass, field

from models.engine.database import db, delete_keyed, query, write_transaction, yield_to_storing
from models.records import freezing
from models.records.counted import MARK, counted_through, waiting_records
from models.runtime.clock import now_ms
from models.schema import settings
from models.statistics import first_seen, rollups

# Records stored may wait this many to be counted before a batch being stored counts them: 0,
# every batch is counted as it is stored (a feed or a command writing to the store); a gunicorn
# worker, behind whose requests the counting process counts, sets ANALYTICS_COUNT_BEHIND.
behind_limit = 0
# Records read and counted at a time while counting a tail (memory, not correctness): every
# part's keys are merged into the tail's, and parts of 1,000 cost 21 us a record against 17.6
# (a 5,000-record tail).
_CHUNK = 10_000
# The record columns counting reads: every rollup's, and the names' (first_seen).
_COLUMNS = tuple(dict.fromkeys([*rollups.COLUMNS, "question"]))


def start():
    """Give a database its mark: every record stored so far was counted as it was stored (a
    database made before the mark), or there is none. Call inside a write transaction, and
    give the blocks their marks too (rollups.built_through), so that counting a tail aside
    never writes them."""
    if settings.read(MARK) is None:
        settings.write(MARK, str(_newest_id()))


def catch_up(beyond: int = 0, batch: dict | None = None) -> int:
    """Count the records past the mark (the tail) and move the mark, when the tail is longer
    than `beyond` records; how many were counted. Call inside a write transaction: no record
    can be stored, changed or deleted between the counting and the mark. `batch`: the columns
    (as stored) of the records just stored in this transaction, counted as they are when they
    are the whole tail, rather than read back."""
    mark = counted_through()
    newest_id = _newest_id()
    if newest_id - mark <= beyond:
        return 0
    if batch is not None and newest_id - mark == len(batch["ts"]):  # the tail is this batch, no gap
        tail = _Tail(0, mark)
        tail.add(newest_id, batch)
        return _write(tail)
    return _write(_tail(mark))


def waiting() -> int:
    """About how many records wait to be counted (ids past the mark)."""
    return max(0, _newest_id() - counted_through())


def not_counted() -> int:
    """How many records wait to be counted (the tail), exactly."""
    return query("SELECT COUNT(*) FROM record WHERE id > ?", [counted_through()]).fetchone()[0]


def catch_up_aside() -> int:
    """catch_up, counting before taking the write lock (which then only writes the counts), for
    the counting process: ingestion waits for it as little as possible (it yields to a batch
    being stored). Writes nothing when the mark moved meanwhile (another process counted; or
    stored records changed, which counts first), so the records counted are as they were read."""
    mark = counted_through()
    tail = _tail(mark)
    if not tail.records:
        return 0
    yield_to_storing()
    with write_transaction():
        return _write(tail) if counted_through() == mark else 0


def _newest_id() -> int:
    return query("SELECT MAX(id) FROM record").fetchone()[0] or 0


@dataclass
class _Tail:
    """What the records past a mark add: how many, the highest id and newest time among them,
    their rollup counts and their names' spans (first_seen.spans)."""

    records: int
    through: int
    newest: int | None = None
    rollups: dict = field(default_factory=dict)
    spans: dict = field(default_factory=dict)

    def add(self, through: int, columns: dict):
        """Count records given column by column (as stored; every column of _COLUMNS), the
        highest id among them `through`."""
        stamps = columns["ts"]
        self.records += len(stamps)
        self.through = through
        self.newest = max(self.newest or stamps[0], *stamps)
        counts = rollups.count(columns)
        spans = first_seen.spans(columns["endpoint"], columns["question"], stamps)
        if not self.rollups and not self.spans:  # the first part (most tails are one): as counted
            self.rollups, self.spans = counts, spans
            return
        for key, n in counts.items():
            self.rollups[key] = self.rollups.get(key, 0) + n
        for key, (first, last) in spans.items():
            known = self.spans.get(key)
            self.spans[key] = (first, last) if known is None else (min(first, known[0]), max(last, known[1]))


def _tail(mark: int) -> _Tail:
    """The counts of the records past `mark`, read in one statement (one snapshot), counted in
    parts of _CHUNK records (memory)."""
    cursor = query(f"SELECT id, {', '.join(_COLUMNS)} FROM record WHERE id > ? ORDER BY id", [mark])
    tail = _Tail(0, mark)
    while rows := cursor.fetchmany(_CHUNK):
        ids, *values = zip(*rows, strict=True)
        tail.add(ids[-1], dict(zip(_COLUMNS, values, strict=True)))
    return tail


def _write(tail: _Tail) -> int:
    """Write a tail's counts and move the mark past it; then sum the blocks that closed."""
    if tail.records:
        rollups.add(tail.rollups)
        # A question a privacy setting dropped is stored as '': no name.
        condition, params = db.obj.dialect.term_in([""])
        unnamed = query(f"SELECT id FROM term WHERE {condition}", params).fetchone()
        first_seen.note_spans(
            [
                (question, endpoint or 0, first, last)
                for (endpoint, question), (first, last) in tail.spans.items()
                if unnamed is None or question != unnamed[0]
            ]
        )
        settings.write(MARK, str(tail.through))
        rollups.build(tail.newest, now_ms())
    return tail.records


def freeze_a_look(arrived: bool) -> int:
    """Freeze what is past the hot horizon, in write transactions of about freezing.STEP_RECORDS, each
    after the batches waiting to be stored, and each followed by counting what they stored
    meanwhile (so that the counts wait a step at most, and what they count may be frozen in the
    next): all of it, or freezing.LOOK_RECORDS at most while records arrive (`arrived`: some were counted
    just before; or some are counted between the steps), as freezing as fast as a backfill of
    old records arrived took a tenth of the ingest's rate; how many. Outside a transaction, in
    the process that has the turn to count."""
    packed = 0
    while True:
        yield_to_storing()
        with write_transaction():  # short: batches wait for it
            step = freezing.freeze(now_ms())
        packed += step
        arrived = catch_up_aside() > 0 or arrived
        if step < freezing.STEP_RECORDS or (packed >= freezing.LOOK_RECORDS and arrived):
            return packed


def apply(condition: str, params: list, sign: int, dims=None, counted_only=False, table: str = "record"):
    """Add (sign 1) or subtract (sign -1) the counts, in `dims` (None: all), of the records matching
    `condition` (SQL on the record table). Deletions and rewrites call it before they change
    records, in their transaction: the tail is counted first, so that every record they count
    down was counted up. `counted_only`: count only the records up to the mark, leaving the tail
    to be counted as it is (new dims counted from the records).

    The rows are read once and counted in Python: a GROUP BY per column over them cost several
    times more (seconds for a large client's deletion, all of it under the write lock)."""
    if counted_only:
        condition, params = f"({condition}) AND id <= ?", [*params, counted_through()]
    else:
        catch_up()
    cursor = query(f"SELECT {', '.join(rollups.COLUMNS)} FROM {table} WHERE {condition}", params)
    counts: dict[tuple, int] = {}
    while rows := cursor.fetchmany(10_000):
        for key, n in rollups.count(dict(zip(rollups.COLUMNS, zip(*rows, strict=True), strict=True)), dims).items():
            counts[key] = counts.get(key, 0) + n
    rollups.upsert(counts, sign)
    if sign < 0 and counts:
        # Rows counted down to nothing go, so expired periods leave no trace behind: looked up
        # by key (a range per dim scanned millions of hourly rows for one small client).
        delete_keyed("rollup", ("dim", "period", "endpoint", "value"), list(counts), "n = 0")


def oldest_statistic() -> int | None:
    """The start (ms) of the oldest period any statistic still counts, None if none: records
    not counted yet are in their days' statistics too."""
    # One statement, one snapshot: counting in between would move records from one to the other.
    # Each MIN alone in its SELECT: read from one end of the key.
    parts = [f"(SELECT MIN(period) FROM rollup WHERE dim = {dim.id}) * {dim.period_ms}" for dim in rollups.STATISTICS]
    source, waiting, params = waiting_records()
    parts.append(f"(SELECT MIN(r.ts) FROM {source} WHERE {waiting}) / {rollups.DAY_MS} * {rollups.DAY_MS}")
    union = " UNION ALL ".join(f"SELECT {part} AS t" for part in parts)
    return query(f"SELECT MIN(t) FROM ({union}) AS starts", params).fetchone()[0]
