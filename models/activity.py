"""Reading records back as rows: pages of the activity log, export batches, the live tail."""

from collections import namedtuple
from operator import itemgetter

from catalogue import CLIENT, ENDPOINT, READ_FIELDS, TERM

from . import thawing
from .blocks import COLUMNS
from .database import query
from .domains import TABLE as DOMAINS
from .filters import Filters, Resolved, column_sql
from .names import value_texts
from .utils import chunks, placeholders

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
    page starts in: the records' hourly counts (models/statistics.py, from the rollups mostly)
    say how many the hours before it hold, so frozen ones there need not be unpacked."""
    from . import statistics

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
    ids, see value_texts), a list per batch. Each batch is one short keyset query, so memory
    stays flat and no read transaction holds back WAL checkpoints. Frozen records are unpacked
    a run of hours at a time, once, as the walk reaches them (models/thawing.py)."""
    resolved = Resolved(filters)
    start, end = filters.start_ms, filters.end_ms
    # Short runs: with runs of 10,000-50,000 records held as tuples, the worker's memory grew
    # through the frozen part of a 10M-record export (bench/run.py).
    runs = thawing.runs(resolved.endpoint_ids(), start, end, descending, resolved.hint(), EXPORT_RECORDS)
    # Stretches of the window in walking order: each read from the rows, and from the run of
    # frozen hours it covers (None: rows alone, before the first run and after the last).
    stretches, bound = [], end if descending else start
    for run in runs:
        if descending:
            first = thawing.run_start_ms(run)
            if bound is None or first <= bound:
                stretches.append((None, (thawing.run_end_ms(run) + 1, bound)))
                stretches.append((run, (first, thawing.run_end_ms(run))))
                bound = first - 1
        else:
            last = thawing.run_end_ms(run)
            if bound is None or last >= bound:
                stretches.append((None, (bound, thawing.run_start_ms(run) - 1)))
                stretches.append((run, (thawing.run_start_ms(run), last)))
                bound = last + 1
    stretches.append((None, (start, bound) if descending else (bound, end)))
    left = None  # the rows of the last batch not yet yielded: batches stay full across stretches
    for run, (low, high) in stretches:
        low = low if start is None or (low is not None and low >= start) else start
        high = high if end is None or (high is not None and high <= end) else end
        if low is not None and high is not None and low > high:
            continue
        if run is None:
            found = _walk(resolved, (low, high), descending, batch_size)
        else:
            found = _thawed_stretch(resolved, run, (low, high), descending, batch_size)
        for rows in found:
            left = rows if left is None else left + rows
            if len(left) >= batch_size:
                yield left[:batch_size]
                left = left[batch_size:]
    yield left or []


def _thawed_stretch(resolved: Resolved, run: tuple, window: tuple, descending: bool, batch_size: int):
    """The records of the window, whose hours are those of `run`: its frozen ones unpacked, with
    the rows of those hours, in time order (a run holds at most ~50,000 records)."""
    if resolved.endpoints_alone():
        # The run's blocks are those of the endpoints allowed: only the window is left to test,
        # here, and a sort merges them with the rows of those hours (late, or melted). Staging
        # them in a table to run the statement there cost more than the rest of the export.
        # Spans of EXPORT_RECORDS at most: an hour of a busy store is tens of thousands.
        for first, last, frozen in thawing.pieces(run, EXPORT_RECORDS, *window, descending):
            condition, params = resolved.where(first, last)  # the span's rows
            rows = _as_selected(frozen) + query(f"{_SELECT} WHERE {condition}", params).fetchall()
            rows.sort(key=_ORDER, reverse=descending)
            for start in range(0, len(rows), batch_size):
                yield rows[start : start + batch_size]
        return
    condition, params = resolved.where(*window)
    thawing.stage(run)
    select = _SELECT.replace(" FROM record r", f" FROM {thawing.WITH_STAGED} r")
    order = "DESC" if descending else "ASC"
    cursor = query(f"{select} WHERE {condition} ORDER BY r.ts {order}, r.id {order}", params)
    while rows := cursor.fetchmany(batch_size):
        yield rows


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


def _walk(resolved: Resolved, window: tuple, descending: bool, batch_size: int):
    """The rows of the record table in the window, in keyset batches."""
    condition, params = resolved.where(*window)
    after = None
    while True:
        rows = _fetch_from("record r", condition, params, descending, after, batch_size, 0)
        if rows:
            yield rows
        if len(rows) < batch_size:
            return
        after = (rows[-1][_TS], rows[-1][0])
        # The next batch's window ends (starts) at the last row's time, rather than the seek
        # adding a second bound: given two, SQLite bounded the index scan by the window's and
        # walked again past every row already exported, 35 ms a batch at 1M records.
        condition, params = resolved.where(window[0], after[0]) if descending else resolved.where(after[0], window[1])


def records_after(filters: Filters, last_id: int, limit: int = 500, scan: int = 20_000) -> tuple[list[RecordRow], int]:
    """Matching records among the ids (last_id, last_id + scan], oldest id first, and the id
    the next call starts after: the last id examined, matching or not, so a stream whose filter
    matches nothing still moves on and never reads the same records twice. Rows of clients
    deleted meanwhile are left out, but read past."""
    # Writers take turns and ids are handed out in order (see models.dialect), so once an id
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
        found = [row for row in found if resolved.pattern.search(row.question)]
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
    runs = thawing.runs(endpoint_ids, *window, descending, resolved.hint())
    thawing.start_thawed()
    for i, run in enumerate(runs):
        thawing.stage(run)
        thawing.keep(condition, params)
        if i == len(runs) - 1:
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
    seek, seek_params = "", []
    if after is not None:
        ts, ident = after
        # (ts, id) strictly beyond the previous row; the condition's window already ends there.
        op = "<" if descending else ">"
        seek = f" AND (r.ts {op} ? OR r.id {op} ?)"
        seek_params = [ts, ident]
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
