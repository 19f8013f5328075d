"""Records old enough to be left alone are packed into blocks (models/records/blocks.py), and unpacked
again when something must change them.

Frozen: a record older than the hot horizon (`hot_hours` before the current hour) that every
reader by id has gone past (counted, delivered by every output, judged by every rule that reads
records). Its row leaves the record table for a block of its endpoint's records of its hour:
about 28 bytes a record against ~130 as a row with three indexes. A record arriving later for a
frozen hour goes into a block of its own when its turn comes.

Melted: the blocks a deletion or a rewrite is about to change are unpacked back into rows,
under their own ids, first; that change then works on rows alone, and the rows are frozen
again later.
"""

import itertools
from operator import itemgetter

from models.engine.database import db, delete_keyed, insert_rows, query
from models.engine.sql import chunks, placeholders
from models.records import blocks
from models.records.blocks import COLUMNS, HOUR_MS, block_condition
from models.records.counted import counted_through

# Hours of records kept as rows before the current one (ANALYTICS_HOT_HOURS).
hot_hours = 48


def configure(config) -> None:
    global hot_hours
    hot_hours = config["ANALYTICS_HOT_HOURS"]


# Records a block holds at most (an endpoint's hour of more than CLIENT_SHARE is shared out).
BLOCK_RECORDS = 20_000
CLIENT_SHARE = 256
# Records a call of `freeze` packs at least once it packs (an hour is never split) and at most
# about: one write transaction, which batches being stored wait for.
STEP_RECORDS = 5_000
# Records the counting process freezes a look (every ANALYTICS_FREEZE_INTERVAL) while records
# arrive.
LOOK_RECORDS = 50_000

_TS = COLUMNS.index("ts")
_ENDPOINT = COLUMNS.index("endpoint")
_BLOCK = (
    "INSERT INTO record_block (endpoint, hour, first_ts, last_ts, first_id, last_id, n, client_filter,"
    " question_filter, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_POSTINGS = "INSERT INTO block_question (question, hour, block)"
_CLIENT, _QUESTION = COLUMNS.index("client"), COLUMNS.index("question")


def frozen_upto() -> int:
    """The highest record id that may be frozen: every reader of records by id is past it."""
    cursors = [counted_through()]
    cursors += [row[0] for row in query("SELECT MIN(cursor) FROM output") if row[0] is not None]
    rules = query("SELECT MIN(cursor) FROM alert_rule WHERE kind IN ('new-domain', 'watched-domain')")
    cursors += [row[0] for row in rules if row[0] is not None]
    return min(cursors)


def freeze(now_ms: int, budget: int = STEP_RECORDS) -> int:
    """Pack the records past the hot horizon into blocks, hour after hour from the oldest, about
    `budget` records at most; how many. Call inside a write transaction."""
    horizon = (now_ms // HOUR_MS - hot_hours) * HOUR_MS
    upto = frozen_upto()
    packed = 0
    while packed < budget:
        oldest = query("SELECT MIN(ts) FROM record WHERE ts < ? AND id <= ?", [horizon, upto]).fetchone()[0]
        if oldest is None:
            break
        start = oldest // HOUR_MS * HOUR_MS
        window = [start, start + HOUR_MS, upto]
        rows = query(
            f"SELECT {', '.join(COLUMNS)} FROM record WHERE ts >= ? AND ts < ? AND id <= ? ORDER BY endpoint",
            window,
        ).fetchall()
        _store(rows, start // HOUR_MS)
        query(
            "UPDATE client SET last_frozen = (SELECT MAX(ts) FROM record r WHERE r.client = client.id"
            " AND r.ts >= ? AND r.ts < ? AND r.id <= ?) WHERE id IN (SELECT DISTINCT client FROM record"
            " WHERE ts >= ? AND ts < ? AND id <= ?) AND (last_frozen IS NULL OR last_frozen < (SELECT MAX(ts)"
            " FROM record r WHERE r.client = client.id AND r.ts >= ? AND r.ts < ? AND r.id <= ?))",
            window * 3,
        )
        query("DELETE FROM record WHERE ts >= ? AND ts < ? AND id <= ?", window)
        packed += len(rows)
    return packed


def _store(rows: list, hour: int) -> None:
    """Rows of one hour, grouped by endpoint, as blocks (blocks.pack orders each). An endpoint's
    hour of more than CLIENT_SHARE records is shared out by client entry (id modulo the
    shares): a read after a few clients then unpacks about CLIENT_SHARE records of its hour,
    not every one of them."""
    postings = []
    for endpoint, group in itertools.groupby(rows, key=itemgetter(_ENDPOINT)):
        parts = [list(group)]
        shares = -(-len(parts[0]) // CLIENT_SHARE)
        if shares > 1:
            records, parts = parts[0], [[] for _ in range(shares)]
            for row in records:
                parts[row[_CLIENT] % shares].append(row)
        for part in parts:
            for start in range(0, len(part), BLOCK_RECORDS):
                made = part[start : start + BLOCK_RECORDS]
                (ident,) = query(_BLOCK, _block(endpoint, hour, made)).fetchone()
                postings += _postings(ident, hour, (row[_QUESTION] for row in made))
    insert_rows(_POSTINGS, 3, postings)


def _postings(ident: int, hour: int, questions) -> list[tuple]:
    """The block_question rows of block `ident` of `hour` holding the names `questions`."""
    return [(question, hour, ident) for question in set(questions)]


def _forget(ident: int, hour: int, rows: list) -> None:
    """Delete the block_question rows of block `ident` of `hour`, holding `rows`, about to go."""
    keys = _postings(ident, hour, (row[_QUESTION] for row in rows))
    delete_keyed("block_question", ("question", "hour", "block"), keys)


def index_frozen() -> int:
    """Write the block_question rows of every block (of a database frozen before they were
    kept, schema version 14); how many blocks."""
    done, after = 0, 0
    while found := query(
        "SELECT id, hour, data FROM record_block WHERE id > ? ORDER BY id LIMIT 500", [after]
    ).fetchall():
        postings = []
        for ident, hour, data in found:
            postings += _postings(ident, hour, blocks.Inflated(data, {_QUESTION}).column(_QUESTION))
        insert_rows(_POSTINGS, 3, postings, " ON CONFLICT DO NOTHING")  # a block noted already stays
        done, after = done + len(found), found[-1][0]
    return done


def _block(endpoint: int, hour: int, part: list) -> tuple:
    ids, times = [row[0] for row in part], [row[_TS] for row in part]
    bounds = (min(times), max(times), min(ids), max(ids))  # `part` may be in a block's order
    # No question filter (empty: the column is NOT NULL): block_question says which names it holds.
    filters = (blocks.bloom(row[_CLIENT] for row in part), b"")
    return (endpoint, hour, *bounds, len(part), *filters, blocks.pack(part))


def melt(condition: str, params: list) -> int:
    """Unpack the blocks matching `condition` (SQL on record_block) back into rows; how many
    records. Call inside the write transaction of the change that needs them as rows."""
    found = query(f"SELECT id, hour, data FROM record_block WHERE {condition}", params).fetchall()
    if not found:
        return 0
    melted = 0
    for ident, hour, data in found:
        rows = blocks.unpack(data)
        insert_rows(f"INSERT INTO record ({', '.join(COLUMNS)})", len(COLUMNS), rows)
        _forget(ident, hour, rows)
        melted += len(rows)
    for part in chunks([ident for ident, _, _ in found], 500):
        query(f"DELETE FROM record_block WHERE id IN ({placeholders(len(part))})", part)
    return melted


def holding(endpoint_ids: list | None, end_ms: int | None, entries: list | None) -> list[int]:
    """The ids of the blocks, oldest first, that may hold records of `endpoint_ids` (None: all)
    up to `end_ms` (None: all), of the client entries `entries` (None: any; a block's client
    filter says whether it may hold one of them)."""
    condition, params = block_condition(endpoint_ids, None, end_ms)
    if entries is None or len(entries) > MANY_ENTRIES:
        return [row[0] for row in query(f"SELECT id FROM record_block WHERE {condition} ORDER BY hour, id", params)]
    wanted = blocks.Wanted(entries)
    found = query(f"SELECT id, client_filter FROM record_block WHERE {condition} ORDER BY hour, id", params)
    return [ident for ident, clients in found if wanted.may_be_in(clients)]


# Past this many client entries, picking blocks by their filters costs more than it saves.
MANY_ENTRIES = 1_000


def rewrite(block_ids: list[int], gone: set[int]) -> None:
    """Pack the blocks `block_ids` again without the records whose ids are in `gone`; a block
    left empty goes. Call inside a write transaction."""
    for part in chunks(block_ids, 500):
        found = query(f"SELECT id, hour, data FROM record_block WHERE id IN ({placeholders(len(part))})", part)
        for ident, hour, data in found.fetchall():
            rows = blocks.unpack(data)
            kept = [row for row in rows if row[0] not in gone]
            if len(kept) < len(rows):
                query("DELETE FROM record_block WHERE id = ?", [ident])
                _forget(ident, hour, rows)
                if kept:
                    _store(kept, hour)


def melt_holding(endpoint_ids: list | None, entries: list) -> int:
    """Melt the blocks that may hold records of the client entries `entries` (of the endpoints
    `endpoint_ids`); how many records."""
    ids = holding(endpoint_ids, None, entries)
    melted = sum(melt(f"id IN ({placeholders(len(part))})", part) for part in chunks(ids, 500))
    if ids:
        for part in chunks(entries, 500):
            query(f"UPDATE client SET last_frozen = NULL WHERE id IN ({placeholders(len(part))})", part)
    return melted


def renote_last_frozen(endpoint: int, entry_ids) -> None:
    """Read again the newest time of the frozen records of these client entries of `endpoint`
    (after a change that moved records away from them): from the blocks whose client filters
    may hold each, the newest hour first."""
    found = query(
        "SELECT id, hour, client_filter FROM record_block WHERE endpoint = ? ORDER BY hour DESC", [endpoint]
    ).fetchall()
    for entry in entry_ids:
        newest, hour_found = None, None
        for ident, hour, clients in found:
            if hour_found is not None and hour < hour_found:
                break  # the newest hour holding the entry is read whole (it may have several blocks)
            if blocks.may_hold(clients, [entry]):
                (data,) = query("SELECT data FROM record_block WHERE id = ?", [ident]).fetchone()
                times = [ts for ts, client in blocks.unpack(data, only={_TS, _CLIENT}) if client == entry]
                if times:
                    newest, hour_found = max([*times, *([newest] if newest is not None else [])]), hour
        query("UPDATE client SET last_frozen = ? WHERE id = ?", [newest, entry])


def has_records_sql(alias: str) -> str:
    """SQL: the client entry `alias` has a record, stored as a row or frozen."""
    return f"({alias}.last_frozen IS NOT NULL OR EXISTS (SELECT 1 FROM record r WHERE r.client = {alias}.id))"


def newest_sql(alias: str) -> str:
    """SQL: the newest timestamp among the records of the client entry `alias` (NULL: none)."""
    rows = f"(SELECT MAX(r.ts) FROM record r WHERE r.client = {alias}.id)"
    return db.obj.dialect.greatest(rows, f"{alias}.last_frozen")


def melt_window(endpoint_ids: list | None, start_ms: int | None, end_ms: int | None) -> int:
    """Melt the blocks that may hold records of `endpoint_ids` (None: every endpoint) with ts in
    [start_ms, end_ms] (None: unbounded)."""
    condition, params = block_condition(endpoint_ids, start_ms, end_ms)
    melted = melt(condition, params)
    if start_ms is None:
        # Every frozen record up to end_ms is a row now (melted here or before: a rewrite's
        # window): a client whose newest frozen one was no later has none frozen left.
        scope, scope_params = block_condition(endpoint_ids, None, None)
        bound = "" if end_ms is None else " AND last_frozen <= ?"
        query(
            f"UPDATE client SET last_frozen = NULL WHERE last_frozen IS NOT NULL{bound}"
            f" AND {scope.replace('endpoint IN', 'client.endpoint IN')}",
            ([] if end_ms is None else [end_ms]) + scope_params,
        )
    return melted
