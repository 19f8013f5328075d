"""Reading records back as rows: pages of the activity log, export batches, the live tail."""

from collections import namedtuple

from catalogue import CLIENT, ENDPOINT, READ_FIELDS, TERM

from .database import query
from .filters import Filters, Resolved, column_sql
from .names import value_texts

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


def page_records(filters: Filters, page: int, page_size: int, descending: bool = True) -> list[RecordRow]:
    """One page of the log, ordered by (ts, id), newest first unless ascending.

    Paged with OFFSET over the ordering index. (Remembering where earlier pages ended, to seek
    instead, gave wrong pages once records inside the window were deleted or arrived late.)
    """
    condition, params = Resolved(filters).where()
    return texts(_fetch(condition, params, descending, None, page_size, page * page_size))


def iter_raw_batches(filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as raw rows (fields as in ROW_FIELDS; names and strings as their
    ids, see value_texts), a list per batch. Each batch is one short keyset query, so memory
    stays flat and no read transaction holds back WAL checkpoints."""
    resolved = Resolved(filters)
    condition, params = resolved.where()
    after = None
    while True:
        rows = _fetch(condition, params, descending, after, batch_size, 0)
        yield rows
        if len(rows) < batch_size:
            return
        after = (rows[-1][_TS], rows[-1][0])
        # The next batch's window ends (starts) at the last row's time, rather than the seek
        # adding a second bound: given two, SQLite bounded the index scan by the window's and
        # walked again past every row already exported, 35 ms a batch at 1M records.
        if descending:
            condition, params = resolved.where(end_ms=after[0])
        else:
            condition, params = resolved.where(start_ms=after[0])


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
    rows = query(
        f"{_SELECT} WHERE r.id > ? AND r.id <= ? AND {condition} ORDER BY r.id LIMIT ?",
        [last_id, bound, *params, limit],
    ).fetchall()
    found = texts(rows)
    if resolved.pattern is not None:  # new names keep coming: each record's is matched here
        found = [row for row in found if resolved.pattern.search(row.question)]
    return found, rows[-1][0] if len(rows) == limit else bound


def committed_top() -> int:
    """The highest record id visible now (0: none). Writers take turns and ids are handed out
    in order, so every record committed later has a higher id: a stream starts after it."""
    return query("SELECT MAX(id) FROM record").fetchone()[0] or 0


def _fetch(condition, params, descending, after, limit, offset):
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
        sql = f"{_SELECT} WHERE {condition}{seek} {ordering} LIMIT ?"
        return query(sql, [*params, *seek_params, limit]).fetchall()
    # The rows an OFFSET skips are still made into result rows: skip them as bare ids, then
    # read the page's columns for its own rows only.
    chosen = f"SELECT r.id FROM record r WHERE {condition}{seek} {ordering} LIMIT ? OFFSET ?"
    sql = f"{_SELECT} WHERE r.id IN ({chosen}) {ordering}"
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
