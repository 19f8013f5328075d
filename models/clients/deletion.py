"""Deleting records, always together with the lost-record marks of their endpoints."""

from contextlib import nullcontext

from catalogue import FIELDS_BY_SQL
from models.engine.database import db, query, write_transaction, yield_to_storing
from models.engine.sql import placeholders
from models.records import freezing, thawing
from models.records.blocks import COLUMNS
from models.records.filters import stored_ids
from models.statistics import counting, first_seen, rollups
from models.statistics.anonymous import DIMS as KEPT


def client_selection(endpoints=None, client_ids=None, endpoint_limit=None) -> tuple[str, list]:
    """SQL selecting the ids of client entries by endpoint names and client ids (either may
    be empty: no restriction), always within `endpoint_limit` (None: no limit)."""
    where, params = [], []
    if endpoints:
        where.append(f"e.name IN ({placeholders(len(endpoints))})")
        params += endpoints
    if endpoint_limit is not None:
        allowed = sorted(endpoint_limit)
        where.append(f"e.name IN ({placeholders(len(allowed))})" if allowed else "0 = 1")
        params += allowed
    if client_ids:
        where.append(f"c.client_id IN ({placeholders(len(client_ids))})")
        params += client_ids
    sql = "SELECT c.id FROM client c JOIN endpoint e ON e.id = c.endpoint"
    return sql + (" WHERE " + " AND ".join(where) if where else ""), params


def delete_records(
    endpoints=None, client_ids=None, end_ms=None, batch_size=None, endpoint_limit=None, after_batch=None, expire=False
) -> int:
    """Delete the records of the selected clients (everyone's when neither filter is given) up
    to `end_ms` (inclusive; None: all), and raise their endpoints' lost marks to match.

    A deletion takes the records' counts out of every rollup, and then what can still be
    attributed to the selection past the records' horizon (rollups.forget). Records that
    expire (`expire`) leave the statistics as they were: only the rollups that expire with
    the records lose their counts.

    Without `batch_size` it runs as one statement inside the caller's transaction. With it,
    each batch is a transaction of its own, so writers queued behind a huge deletion get their
    turn between batches; every batch leaves records and marks consistent, and
    `after_batch(deleted_so_far)` runs inside each batch's transaction (to keep an admin-action
    entry in step with what is committed).
    """
    where, params = [], []
    selection = None
    if endpoints or client_ids or endpoint_limit is not None:
        selection, params = client_selection(endpoints, client_ids, endpoint_limit)
        where.append(f"client IN ({selection})")
    frozen = (selection, list(params), end_ms)
    if end_ms is not None:
        where.append("ts <= ?")
        params.append(end_ms)
    condition = " AND ".join(where) or "1 = 1"
    dims = rollups.WITH_RECORDS if expire else rollups.DIMS
    if batch_size is None:
        deleted = _delete_frozen(*frozen, dims)
        deleted += _delete(f"SELECT id FROM record WHERE {condition}", params, dims)
        if not expire:
            _forget(endpoints, client_ids, end_ms, endpoint_limit)
        return deleted
    # Records stored after the deletion began are not part of it (their ids are higher): under
    # steady ingest of the selection, batch after batch would otherwise find more, for ever.
    top = thawing.newest_id()
    deleted = _delete_frozen(*frozen, dims, batched=True, after_batch=after_batch, limit=batch_size)
    while True:
        # Batches being stored go first: otherwise the next batch of the deletion takes the
        # writers' turn as soon as it is free again, and on SQLite a request in another worker
        # waited for the whole deletion.
        yield_to_storing()
        with write_transaction():
            count = _delete(
                f"SELECT id FROM record WHERE {condition} AND id <= ? ORDER BY id LIMIT ?",
                params + [top, batch_size],
                dims,
            )
            deleted += count
            if count < batch_size and not expire:
                _forget(endpoints, client_ids, end_ms, endpoint_limit)
            if after_batch is not None and (count or deleted == 0):
                after_batch(deleted)
        if count < batch_size:
            return deleted


def delete_to_anonymous(endpoint: str, client_id: str) -> int:
    """Delete a client's records, leaving their counts only in the statistics that name no
    client (as models/statistics/anonymous.py counts the queries of a client not logged); how many. Call
    inside a write transaction."""
    selection, params = client_selection([endpoint], [client_id])
    dims = tuple(dim for dim in rollups.DIMS if dim not in KEPT)
    deleted = _delete_frozen(selection, params, None, dims)
    deleted += _delete(f"SELECT id FROM record WHERE client IN ({selection})", params, dims)
    rollups.forget(None, client_ids=selection, params=params)
    return deleted


def expire_statistics(before_ms: int) -> int:
    """Delete the statistics (rollups) of whole periods that ended before `before_ms`; how
    many rollup rows went."""
    with write_transaction():
        first_seen.expire(before_ms)
        return rollups.expire(before_ms)


def _forget(endpoints, client_ids, end_ms, endpoint_limit):
    """rollups.forget for a selection made as delete_records takes it."""
    if client_ids:
        selection, params = client_selection(endpoints, client_ids, endpoint_limit)
        rollups.forget(end_ms, client_ids=selection, params=params)
    elif endpoints or endpoint_limit is not None:
        names = set(endpoints or endpoint_limit)
        if endpoints and endpoint_limit is not None:
            names &= set(endpoint_limit)
        endpoint_ids = stored_ids(FIELDS_BY_SQL["endpoint"], sorted(names))
        rollups.forget(end_ms, endpoint_ids=endpoint_ids)
        first_seen.forget(end_ms, endpoint_ids)
    else:
        rollups.forget(end_ms)
        first_seen.forget(end_ms)


_CLIENT = COLUMNS.index("client")
# Blocks a transaction of a batched deletion rewrites at most.
FROZEN_BATCH = 200


def _delete_frozen(selection, params: list, end_ms, dims, batched=False, after_batch=None, limit=None) -> int:
    """The frozen part of a deletion of the records of the client entries `selection` (SQL of
    their ids; None: everyone's) up to `end_ms`: the blocks that may hold some are unpacked a
    batch at a time, the records chosen counted down as rows are (lost marks, rollups `dims`),
    and each block packed again without them, or gone when nothing is left. (Melting them into
    rows first cost the endpoint's every frozen record: 7 s to delete a client at 1M.) How
    many records. `batched`: each batch a transaction of its own, after_batch(deleted) in it, of
    `limit` records at most (a block holds up to 20,000 of one client's)."""
    endpoint_ids, entries = None, None
    if selection is not None:
        found = query(f"SELECT id, endpoint FROM client WHERE id IN ({selection})", params).fetchall()
        if not found:
            return 0
        entries, endpoint_ids = [row[0] for row in found], sorted({row[1] for row in found})
    chosen = " AND ".join(
        ([f"client IN ({selection})"] if selection is not None else []) + (["ts <= ?"] if end_ms is not None else [])
    )
    chosen_params = list(params) + ([end_ms] if end_ms is not None else [])
    deleted = 0
    while True:
        ids, cut = freezing.holding(endpoint_ids, end_ms, entries), False
        for start in range(0, max(len(ids), 1), FROZEN_BATCH):
            if batched:
                yield_to_storing()  # as between the batches of rows (delete_records)
            with write_transaction() if batched else nullcontext():
                part = ids[start : start + FROZEN_BATCH]
                if part:
                    taken, cut = _take_frozen(part, entries, (chosen, chosen_params), dims, limit)
                    deleted += taken
                    if taken and after_batch is not None:
                        after_batch(deleted)
                if not cut and start + FROZEN_BATCH >= len(ids):  # none of theirs up to end_ms is frozen now
                    scope = f" AND id IN ({selection})" if selection is not None else ""
                    bound = " AND last_frozen <= ?" if end_ms is not None else ""
                    query(
                        f"UPDATE client SET last_frozen = NULL WHERE last_frozen IS NOT NULL{scope}{bound}",
                        list(params) + ([end_ms] if end_ms is not None else []),
                    )
            if cut:
                break  # the blocks packed again have ids of their own: picked again
        if not cut:
            return deleted


def _take_frozen(part: list, entries, chosen: tuple[str, list], dims, limit) -> tuple[int, bool]:
    """Take the records `chosen` (SQL on records, and its params) out of the blocks `part`, the
    `limit` lowest ids at most (None: all): (how many, whether some were left for later)."""
    only = {} if entries is None else {_CLIENT: set(entries)}  # the others' records stay packed
    thawing.stage((None, None, ("ids", tuple(part)), only))
    if chosen[0]:
        query(f"DELETE FROM {thawing.STAGING} WHERE NOT ({chosen[0]})", chosen[1])
    cut = False
    if limit is not None:
        over = query(f"SELECT id FROM {thawing.STAGING} ORDER BY id LIMIT 1 OFFSET ?", [limit]).fetchone()
        if over is not None:
            query(f"DELETE FROM {thawing.STAGING} WHERE id >= ?", [over[0]])
            cut = True
    marks = query(f"SELECT endpoint, MAX(ts) FROM {thawing.STAGING} GROUP BY endpoint").fetchall()
    if not marks:
        return 0, cut
    raise_lost_marks(dict(marks))
    counting.apply("1 = 1", [], -1, dims, table=thawing.STAGING)
    gone = {row[0] for row in query(f"SELECT id FROM {thawing.STAGING}")}
    freezing.rewrite(part, gone)
    return len(gone), cut


def _delete(victims: str, params: list, dims) -> int:
    """Delete the records `victims` selects, with everything kept beside them: the endpoints'
    lost marks and the rollups. Their ids are taken once, into a temporary table, so that
    every step works on exactly the same rows."""
    dialect = db.obj.dialect
    query(dialect.victim_table)
    query("DELETE FROM victim")
    query(f"INSERT INTO victim SELECT id FROM ({victims}) AS chosen", params)
    dialect.after_filling_temp_table(query, "victim")
    chosen = "id IN (SELECT id FROM victim)"
    marks = query(f"SELECT endpoint, MAX(ts) FROM record WHERE {chosen} GROUP BY endpoint").fetchall()
    raise_lost_marks(dict(marks))
    counting.apply(chosen, [], -1, dims)
    deleted = query(f"DELETE FROM record WHERE {chosen}").rowcount
    query("DELETE FROM victim")
    return deleted


def raise_lost_marks(marks: dict[int, int]):
    """Record, per endpoint id, the newest timestamp of records it is losing."""
    for endpoint_id, newest in marks.items():
        query(
            "UPDATE endpoint SET lost_mark = ? WHERE id = ? AND (lost_mark IS NULL OR lost_mark < ?)",
            (newest, endpoint_id, newest),
        )


def future_records(after_ms: int) -> list[tuple[str, int, int, int]]:
    """(endpoint name, records, oldest, newest timestamp) of the records stamped after
    `after_ms`, by endpoint."""
    return query(
        "SELECT e.name, COUNT(*), MIN(r.ts), MAX(r.ts) FROM record r JOIN endpoint e ON e.id = r.endpoint"
        " WHERE r.ts > ? GROUP BY e.name ORDER BY e.name",
        [after_ms],
    ).fetchall()


def delete_future(after_ms: int) -> int:
    """Delete the records stamped after `after_ms` (stored before the future tolerance was
    lowered) as every deletion does (rollups counted down); how many. Call inside a write
    transaction. Their time is no one's activity: their endpoints' lost marks are not raised
    to it, and a mark already past it (such a record deleted before) is cleared, so last
    activity reads from the records again. (Such records are never frozen: they are never
    past the hot horizon.)"""
    touched = "SELECT DISTINCT endpoint FROM record WHERE ts > ?"
    kept = query(f"SELECT id, lost_mark FROM endpoint WHERE id IN ({touched})", [after_ms]).fetchall()
    deleted = _delete("SELECT id FROM record WHERE ts > ?", [after_ms], rollups.DIMS)
    query("UPDATE endpoint SET lost_mark = NULL WHERE lost_mark > ?", [after_ms])
    for endpoint_id, mark in kept:
        if mark is not None and mark <= after_ms:
            query("UPDATE endpoint SET lost_mark = ? WHERE id = ?", [mark, endpoint_id])
    return deleted
