"""Outputs in the store: their settings, their cursors (how far each got), their leases (which
process delivers each), and reading the records each still has to send.

A cursor is the highest record id the output's receiver accepted. Writers take turns and ids
are handed out in order (see models.clients.activity.records_after), so every record of the output's
endpoints with an id above the cursor is still to be sent, and none below it is: delivery
reads from the cursor in id order and moves it only once a batch is accepted.
"""

import json
from collections import namedtuple

from models.clients import activity
from models.engine.database import query, write_transaction
from models.engine.sql import can_be_id
from models.records import thawing
from models.records.filters import Filters, Resolved
from models.schema import jobs

OutputRow = namedtuple(
    "OutputRow",
    "id name kind url options shape endpoints cursor paused created delivered skipped last_delivery"
    " failures last_error last_error_at",
)
_COLUMNS = ", ".join(OutputRow._fields)
LEASE_PREFIX = "output:"


def _row(raw) -> OutputRow:
    row = OutputRow._make(raw)
    return row._replace(
        options=json.loads(row.options),
        endpoints=None if row.endpoints is None else json.loads(row.endpoints),
        paused=bool(row.paused),
    )


def lease_name(output_id: int) -> str:
    return f"{LEASE_PREFIX}{output_id}"


def create(name, kind, url, options: dict, shape, endpoints, start_after: int, now: int) -> OutputRow:
    """A new output whose cursor is `start_after`; call inside a write transaction."""
    new_id = query(
        "INSERT INTO output (name, kind, url, options, shape, endpoints, cursor, paused, created, delivered,"
        " skipped, failures) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 0, 0, 0) RETURNING id",
        [
            name,
            kind,
            url,
            json.dumps(options, separators=(",", ":"), sort_keys=True),
            shape,
            None if endpoints is None else json.dumps(sorted(set(endpoints))),
            start_after,
            now,
        ],
    ).fetchone()[0]
    return get(new_id)


def name_taken(name: str) -> bool:
    return query("SELECT 1 FROM output WHERE name = ?", [name]).fetchone() is not None


def get(output_id: int) -> OutputRow | None:
    if not can_be_id(output_id):
        return None
    raw = query(f"SELECT {_COLUMNS} FROM output WHERE id = ?", [output_id]).fetchone()
    return None if raw is None else _row(raw)


def find(name_or_id: str) -> OutputRow | None:
    """An output by its name, or by its id written as a number."""
    raw = query(f"SELECT {_COLUMNS} FROM output WHERE name = ?", [name_or_id]).fetchone()
    if raw is None and name_or_id.isdigit():
        return get(int(name_or_id))
    return None if raw is None else _row(raw)


def list_outputs(endpoint_limit=None) -> list[OutputRow]:
    """Every output, oldest first; an endpoint-limited reader sees only those whose endpoints
    all lie within its limit (an output of every endpoint is not among them)."""
    rows = [_row(raw) for raw in query(f"SELECT {_COLUMNS} FROM output ORDER BY id")]
    if endpoint_limit is None:
        return rows
    return [row for row in rows if row.endpoints is not None and set(row.endpoints) <= set(endpoint_limit)]


def delete(output_id: int) -> bool:
    """Forget the output and its lease; call inside a write transaction."""
    query("DELETE FROM job_lease WHERE name = ?", [lease_name(output_id)])
    return query("DELETE FROM output WHERE id = ?", [output_id]).rowcount == 1


def update(output_id: int, name, url, options: dict, shape, endpoints, paused: bool) -> OutputRow:
    """Replace an output's settings; its cursor and counts stay. Call inside a write transaction."""
    query(
        "UPDATE output SET name = ?, url = ?, options = ?, shape = ?, endpoints = ?, paused = ? WHERE id = ?",
        [
            name,
            url,
            json.dumps(options, separators=(",", ":"), sort_keys=True),
            shape,
            None if endpoints is None else json.dumps(sorted(set(endpoints))),
            int(paused),
            output_id,
        ],
    )
    return get(output_id)


def set_paused(output_id: int, paused: bool) -> OutputRow | None:
    query("UPDATE output SET paused = ? WHERE id = ?", [int(paused), output_id])
    return get(output_id)


def waiting(now: int) -> list[int]:
    """Ids of the outputs that are not paused and that no process delivers now (no live lease)."""
    rows = query(
        "SELECT o.id FROM output o LEFT JOIN job_lease l ON l.name = ? || CAST(o.id AS TEXT)"
        " WHERE o.paused = 0 AND (l.holder IS NULL OR l.expires < ?) ORDER BY o.id",
        [LEASE_PREFIX, now],
    )
    return [row[0] for row in rows]


def claim(output_id: int, holder: str, now: int, lease_ms: int) -> bool:
    """Take (or keep) the right to deliver the output until now + lease_ms."""
    return jobs.claim(lease_name(output_id), holder, now, 0, lease_ms)


def release(output_id: int, holder: str, now: int):
    jobs.finish(lease_name(output_id), holder, now)


def release_all(holder: str, now: int):
    """Give up every output lease `holder` has (its process is stopping), so that another
    process takes over at once rather than when the leases run out."""
    with write_transaction():
        query(
            "UPDATE job_lease SET last_run = ?, expires = 0, holder = NULL WHERE holder = ? AND name LIKE ?",
            [now, holder, LEASE_PREFIX + "%"],
        )


def filters_of(output: OutputRow) -> Filters:
    """The filters of the records an output sends: its endpoints (None: every one)."""
    return Filters(values={"endpoint": output.endpoints} if output.endpoints is not None else {})


def pending(output: OutputRow, limit: int) -> tuple[list, int]:
    """The output's next records after its cursor, oldest id first (models.clients.activity's rows),
    and the id its cursor may move to once they are accepted (it may pass ids of other
    endpoints' records)."""
    return activity.records_after(filters_of(output), output.cursor, limit=limit)


def advance(output_id: int, old_cursor: int, new_cursor: int, sent: int, now: int) -> bool:
    """Move the cursor forward after the receiver accepted `sent` records; a cursor that moved
    past `old_cursor` meanwhile (another process delivered) is left alone."""
    with write_transaction():
        delivered = "last_delivery = ?, failures = 0, " if sent else ""
        return (
            query(
                f"UPDATE output SET {delivered}cursor = ?, delivered = delivered + ? WHERE id = ? AND cursor = ?",
                ([now] if sent else []) + [new_cursor, sent, output_id, old_cursor],
            ).rowcount
            == 1
        )


def note_failure(output_id: int, error: str, now: int):
    with write_transaction():
        query(
            "UPDATE output SET failures = failures + 1, last_error = ?, last_error_at = ? WHERE id = ?",
            [error[:1000], now, output_id],
        )


def backlog(output: OutputRow, at_most: int) -> int:
    """How many of the output's records are stored after its cursor, counted up to `at_most`."""
    condition, params = Resolved(filters_of(output), inline=True).where()
    source = _source(output.cursor, condition, params)
    return query(
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {source} WHERE r.id > ? AND {condition} LIMIT ?) t",
        [output.cursor, *params, at_most],
    ).fetchone()[0]


def _source(cursor: int, condition: str, params: list) -> str:
    """The FROM item of the records after `cursor`: an output made to start from older records
    than the newest sends the frozen ones too (models/records/thawing.py)."""
    if thawing.thaw_ids(cursor, thawing.newest_id(), condition, params):
        return f"{thawing.BOTH} r"
    return "record r"


def skip_point(output: OutputRow, keep: int) -> tuple[int, int] | None:
    """Where the cursor would go for only the output's newest `keep` records to remain, and how
    many records it would pass: (new cursor, skipped), or None when no more than `keep` wait.
    Reads only, so that counting a long backlog holds no write lock (ingest does not wait)."""
    condition, params = Resolved(filters_of(output), inline=True).where()
    source = _source(output.cursor, condition, params)
    found = query(
        f"SELECT r.id FROM {source} WHERE r.id > ? AND {condition} ORDER BY r.id DESC LIMIT 1 OFFSET ?",
        [output.cursor, *params, keep],
    ).fetchone()
    if found is None:
        return None
    skipped = query(
        f"SELECT COUNT(*) FROM {source} WHERE r.id > ? AND r.id <= ? AND {condition}",
        [output.cursor, found[0], *params],
    ).fetchone()[0]
    return found[0], skipped


def skip(output: OutputRow, new_cursor: int, skipped: int) -> bool:
    """Move the cursor past records never to be sent, unless it moved meanwhile; call inside a
    write transaction."""
    return (
        query(
            "UPDATE output SET cursor = ?, skipped = skipped + ? WHERE id = ? AND cursor = ?",
            [new_cursor, skipped, output.id, output.cursor],
        ).rowcount
        == 1
    )


def newest_id() -> int:
    """Where an output that starts "now" starts after."""
    return activity.committed_top()
