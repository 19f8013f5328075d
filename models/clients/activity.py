"""Reading records back as rows: pages of the activity log, export batches, the live tail."""

from collections import namedtuple
from operator import itemgetter

from catalogue import CLIENT, ENDPOINT, READ_FIELDS, TERM
from models.engine.database import query, snapshot
from models.engine.sql import chunks, placeholders
from models.records import thawing
from models.records.blocks import COLUMNS
from models.records.domains import TABLE as DOMAINS
from models.records.filters import Filters, Resolved, column_sql
from models.records.names import value_texts
from models.statistics import statistics

HOUR_MS = 3_600_000
# Records an export builds at a time from frozen blocks (a run of hours, or a span of one).
EXPORT_RECORDS = 2_500
# Raw rows carry ids only: their texts come from value_texts, looked up once per batch rather
# than joined into every row.
ROW_FIELDS = ("id", *(field.sql for field in READ_FIELDS))
_SELECT = "SELECT " + ", ".join(["r.id", *(column_sql(field) for field in READ_FIELDS)]) + " FROM record r"
# A record as the log shows it: every column as its text (names, strings; None: unknown),
# numbers as they are.
RecordRow = namedtuple("RecordRow", ROW_FIELDS)
_TS, _CLIENT = ROW_FIELDS.index("ts"), ROW_FIELDS.index("client")
_TERMS_AT = [i + 1 for i, field in enumerate(READ_FIELDS) if field.storage == TERM]
# (position in the row, storage) of each column whose stored value is not its own text.
_LOOKED_UP = [
    (i + 1, field.storage) for i, field in enumerate(READ_FIELDS) if field.storage in (TERM, ENDPOINT, CLIENT)
]


_ORDER = itemgetter(_TS, 0)
_STORED = itemgetter(0, *(COLUMNS.index(field.sql) for field in READ_FIELDS if not field.derived_from))
# The stored column of the source of each derived field (last in READ_FIELDS: column_sql).
_DERIVED = [COLUMNS.index(field.derived_from) for field in READ_FIELDS if field.derived_from]
assert all(field.derived_from for field in READ_FIELDS[len(READ_FIELDS) - len(_DERIVED) :]), "derived fields last"


@snapshot()
def page_records(filters: Filters, page: int, page_size: int, descending: bool = True) -> list[RecordRow]:
    """One page of the log, ordered by (ts, id), newest first unless ascending.

    Paged with OFFSET over the ordering index. (Remembering where earlier pages ended, to seek
    instead, gave wrong pages once records inside the window were deleted or arrived late.)
    """
    resolved = Resolved(filters)
    window, offset = (filters.start_ms, filters.end_ms), page * page_size
    if offset and not filters.search and thawing.newest_hour(resolved.endpoint_ids(), *window, descending) is not None:
        window, offset = _seek(filters, window, descending, offset)
    return texts(_fetch(resolved, window, descending, None, page_size, offset))


def _seek(filters: Filters, window: tuple, descending: bool, offset: int) -> tuple[tuple, int]:
    """(window, offset) of the same page, its window narrowed to end (start) with the hour the
    page starts in: the records' hourly counts (models/statistics/statistics.py, from the rollups mostly)
    say how many the hours before it hold, so frozen ones there need not be unpacked."""
    hours = statistics.stored_series(filters, HOUR_MS)
    skipped = 0
    for hour in sorted(hours, reverse=descending):
        if skipped + hours[hour] > offset:
            start, end = window
            if descending:
                return (
                    start,
                    min(end, hour + HOUR_MS - 1) if end is not None else hour + HOUR_MS - 1,
                ), offset - skipped
            return (max(start, hour) if start is not None else hour, end), offset - skipped
        skipped += hours[hour]
    return window, offset


def iter_raw_batches(filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as raw rows (fields as in ROW_FIELDS; names and strings as their
    ids, see value_texts), a list per batch, memory flat. The window is walked in steps, each
    in a snapshot of its own (models.engine.database.snapshot) and read whole before it is handed on:
    no snapshot is held while the client reads, so none keeps the write-ahead log from being
    restarted for long. A step reads the records past the last one handed on by (ts, id),
    which freezing keeps: a record frozen, melted or counted between two steps is read once,
    and a record is left out only if a deletion or an expiry removed it before its step read
    it (see docs/record-store.md). Frozen records are unpacked a run of hours at a time as the
    walk reaches them (models/records/thawing.py)."""
    after, left = None, []
    while True:
        with snapshot():
            rows, after = _export_step(Resolved(filters), descending, after, batch_size)
        left += rows
        while len(left) >= batch_size:
            yield left[:batch_size]
            left = left[batch_size:]
        if after is None:
            yield left
            return


# Past every id, and before every id: the cursor of a step that read whole milliseconds.
_ID_BEYOND, _ID_BEFORE = 2**63 - 1, 0


def _export_step(resolved: Resolved, descending: bool, after, batch_size: int) -> tuple[list, tuple | None]:
    """(rows, cursor) of the records past `after` (ts, id) in walking order: rows up to
    `batch_size` as far as the first run of frozen hours, or with it the first span of that run
    (about EXPORT_RECORDS records, with the rows of its time); the cursor is the (ts, id) the
    next step goes on after, None once the window is done."""
    start, end = resolved.filters.start_ms, resolved.filters.end_ms
    if after is not None:  # the walk goes on from the cursor's ms (the seek leaves out the rest)
        ts, ident = after
        if descending:
            end = ts - 1 if ident == _ID_BEFORE else ts
        else:
            start = ts + 1 if ident == _ID_BEYOND else ts
    if start is not None and end is not None and start > end:
        return [], None
    runs = thawing.runs(resolved.endpoint_ids(), start, end, descending, resolved.hint(), EXPORT_RECORDS, count=1)
    if not runs:
        rows = _rows_past(resolved, (start, end), descending, after, batch_size)
        return rows, (rows[-1][_TS], rows[-1][0]) if len(rows) == batch_size else None
    run = runs[0]
    first, last = thawing.run_start_ms(run), thawing.run_end_ms(run)
    near = (max(last + 1, start) if start is not None else last + 1, end) if descending else (start, first - 1)
    rows = []
    if near[0] is None or near[1] is None or near[0] <= near[1]:
        # The rows the walk reaches before the run: of hours not frozen, or late.
        rows = _rows_past(resolved, near, descending, after, batch_size)
        if len(rows) == batch_size:
            return rows, (rows[-1][_TS], rows[-1][0])
    window = (first if start is None else max(first, start), last if end is None else min(last, end))
    found, cursor = _thawed_span(resolved, run, window, descending, after, batch_size)
    return rows + found, cursor


def _rows_past(resolved: Resolved, window: tuple, descending: bool, after, limit: int) -> list:
    """Up to `limit` rows of the record table in the window past `after` (ts, id), in walking
    order. The window ends (starts) at the cursor's ms, rather than the seek adding a second
    bound: given two, SQLite bounded the index scan by the window's and walked again past every
    row already exported, 35 ms a batch at 1M records."""
    condition, params = resolved.where(*window)
    return _fetch_from("record r", condition, params, descending, after, limit, 0)


def _thawed_span(resolved: Resolved, run: tuple, window: tuple, descending: bool, after, limit: int):
    """(records, cursor) of the first span of the run's hours in walking order past `after`:
    its frozen records unpacked, with the rows of its time, in walking order; the cursor the
    next step goes on after (past the span, or past the last record when cut at `limit`)."""
    low, high = window
    past = _past(after, descending)
    if resolved.endpoints_alone():
        # The run's blocks are those of the endpoints allowed: only the window is left to test,
        # here, and a sort merges them with the rows of those hours (late, or melted). Staging
        # them in a table to run the statement there cost more than the rest of the export.
        # Spans of EXPORT_RECORDS at most: an hour of a busy store is tens of thousands.
        spans = thawing.pieces(run, EXPORT_RECORDS, low, high, descending)
        first, last, frozen = next(spans)
        spans.close()
        condition, params = resolved.where(first, last)
        seek, seek_params = _seek_sql(after, descending)
        rows = [row for row in _as_selected(frozen) if past(row)]
        rows += query(f"{_SELECT} WHERE {condition}{seek}", params + seek_params).fetchall()
        rows.sort(key=_ORDER, reverse=descending)
        return rows, (first, _ID_BEFORE) if descending else (last, _ID_BEYOND)
    thawing.stage(run)
    condition, params = resolved.where(low, high)
    rows = _fetch_from(f"{thawing.WITH_STAGED} r", condition, params, descending, after, limit, 0)
    if len(rows) == limit:
        return rows, (rows[-1][_TS], rows[-1][0])
    return rows, (low, _ID_BEFORE) if descending else (high, _ID_BEYOND)


def _past(after, descending: bool):
    """Whether a row (in _SELECT's shape) comes after the cursor `after` in walking order."""
    if after is None:
        return lambda row: True
    if descending:
        return lambda row: _ORDER(row) < after
    return lambda row: _ORDER(row) > after


def _seek_sql(after, descending: bool) -> tuple[str, list]:
    """SQL (` AND ...`) leaving out the rows up to `after` (ts, id), in a window ending (starting)
    at its ms: (ts, id) strictly beyond it in walking order."""
    if after is None:
        return "", []
    op = "<" if descending else ">"
    return f" AND (r.ts {op} ? OR r.id {op} ?)", list(after)


def _as_selected(records: list[tuple]) -> list[tuple]:
    """Records as stored (rows in thawing's COLUMNS order) in the shape of _SELECT's rows: the
    derived fields (last in READ_FIELDS) as column_sql reads them, from the domains table."""
    derived = []
    for source in _DERIVED:
        found = {}
        sources = list({record[source] for record in records} - {None})
        for part in chunks(sources, 500):
            found.update(query(f"SELECT term, domain FROM {DOMAINS} WHERE term IN ({placeholders(len(part))})", part))
        derived.append([found.get(record[source]) for record in records])
    return [stored + more for stored, more in zip(map(_STORED, records), zip(*derived, strict=True), strict=True)]


@snapshot()
def records_after(filters: Filters, last_id: int, limit: int = 500, scan: int = 20_000) -> tuple[list[RecordRow], int]:
    """Matching records among the ids (last_id, last_id + scan], oldest id first, and the id
    the next call starts after: the last id examined, matching or not, so a stream whose filter
    matches nothing still moves on and never reads the same records twice. Rows of clients
    deleted meanwhile are left out, but read past."""
    # Writers take turns and ids are handed out in order (see Engine.lock_writes), so once an id
    # is visible every lower id is final: nothing below `top` can still commit.
    top = committed_top()
    bound = min(last_id + scan, top)
    if bound <= last_id:
        return [], last_id
    # One statement, one snapshot: with ids looked up beforehand, a batch committed in between
    # could add a matching client (low id, missed) and records above it (seen), and the
    # stream would move past the missed record for good.
    resolved = Resolved(filters, inline=True)
    condition, params = resolved.where()
    source = "record r"
    if thawing.thaw_ids(last_id, bound, condition, params):  # records that arrived long after their time
        source = f"{thawing.BOTH} r"
    rows = query(
        f"{_SELECT.replace(' FROM record r', f' FROM {source}')} WHERE r.id > ? AND r.id <= ? AND {condition}"
        " ORDER BY r.id LIMIT ?",
        [last_id, bound, *params, limit],
    ).fetchall()
    found = texts(rows)
    if resolved.pattern is not None:  # new names keep coming: each record's is matched here
        found = [row for row in found if resolved.matches(row.question)]
    return found, rows[-1][0] if len(rows) == limit else bound


def committed_top() -> int:
    """The highest record id visible now (0: none). Writers take turns and ids are handed out
    in order, so every record committed later has a higher id: a stream starts after it."""
    return thawing.newest_id()


def _fetch(resolved: Resolved, window: tuple, descending: bool, after, limit: int, offset: int) -> list:
    """Rows of the window in (ts, id) order past `after` (ts, id), `limit` of them after
    skipping `offset`: from the record table, and from the blocks of frozen records newest
    (oldest) first until the rows from the newest (oldest) hour thawed on are enough."""
    endpoint_ids = resolved.endpoint_ids()
    condition, params = resolved.where(*window)
    edge = thawing.newest_hour(endpoint_ids, *window, descending)
    if edge is None:
        return _fetch_from("record r", condition, params, descending, after, limit, offset)
    # Past the newest (before the oldest) frozen hour every record is a row: often enough.
    start, end = window
    if descending:
        bound = (edge + 1) * HOUR_MS
        hot = (max(start, bound) if start is not None else bound, end)
    else:
        bound = edge * HOUR_MS - 1
        hot = (start, min(end, bound) if end is not None else bound)
    if hot[0] is None or hot[1] is None or hot[0] <= hot[1]:
        near, near_params = resolved.where(*hot)
        rows = _fetch_from("record r", near, near_params, descending, after, limit, offset)
        if len(rows) == limit:
            return rows
    # Lazy: the blocks past the run that fills the page are never chosen.
    runs = thawing.each_run(endpoint_ids, *window, descending, resolved.hint())
    thawing.start_thawed()
    following = next(runs, None)
    while following is not None:
        run = following
        thawing.stage(run)
        thawing.keep(condition, params)
        following = next(runs, None)
        if following is None:
            break
        # Every record past this bound is a row now, stored or thawed: enough of them is the answer.
        bounded = (max(start or 0, thawing.run_start_ms(run)), end) if descending else (start, thawing.run_end_ms(run))
        near, near_params = resolved.where(*bounded)
        rows = _fetch_from(f"{thawing.BOTH} r", near, near_params, descending, after, limit, offset)
        if len(rows) == limit:
            return rows
    return _fetch_from(f"{thawing.BOTH} r", condition, params, descending, after, limit, offset)


def _fetch_from(source: str, condition, params, descending, after, limit, offset):
    select = _SELECT.replace(" FROM record r", f" FROM {source}")
    order = "DESC" if descending else "ASC"
    seek, seek_params = _seek_sql(after, descending)
    ordering = f"ORDER BY r.ts {order}, r.id {order}"
    if not offset:
        sql = f"{select} WHERE {condition}{seek} {ordering} LIMIT ?"
        return query(sql, [*params, *seek_params, limit]).fetchall()
    # The rows an OFFSET skips are still made into result rows: skip them as bare ids, then
    # read the page's columns for its own rows only.
    chosen = f"SELECT r.id FROM {source} WHERE {condition}{seek} {ordering} LIMIT ? OFFSET ?"
    sql = f"{select} WHERE r.id IN ({chosen}) {ordering}"
    return query(sql, [*params, *seek_params, limit, offset]).fetchall()


def texts(rows) -> list[RecordRow]:
    """Raw rows with their stored ids replaced by their texts. A row whose client entry or one
    of whose strings is gone (deleted since the rows were read) is left out: a record is shown
    whole or not at all."""
    ids: dict[str, set] = {}
    for i, storage in _LOOKED_UP:
        ids.setdefault(storage, set()).update(row[i] for row in rows)
    found = {storage: value_texts(storage, values) for storage, values in ids.items()}
    terms_gone = len(found[TERM]) < len(ids[TERM] - {None})
    for names in found.values():
        names[None] = None
    clients, terms = found[CLIENT], found[TERM]
    convert = _CONVERT
    if terms_gone:  # rewritten since they were read, and their old strings deleted: left out too
        rows = [row for row in rows if all(row[i] in terms for i in _TERMS_AT)]
    return [convert(row, terms, found[ENDPOINT], clients) for row in rows if row[_CLIENT] in clients]


# Row -> RecordRow with texts, made once from the catalogue: a loop over the columns of every
# row cost more than the query of a log page.
_CONVERT = eval(  # noqa: S307
    "lambda row, term, endpoint, client: RecordRow(row[0], "
    + ", ".join(
        f"{field.storage}[row[{i + 1}]]"  # the lambda's parameters are named as the storages
        if field.storage in (TERM, ENDPOINT, CLIENT)
        else f"row[{i + 1}]"
        for i, field in enumerate(READ_FIELDS)
    )
    + ")",
    {"RecordRow": RecordRow},
)
