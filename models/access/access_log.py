"""The access log: who read the activity log, its CSV export and its realtime stream, kept apart
from the admin-action log (reads, not changes) with a retention of its own."""

import json
from collections import namedtuple

from models.access.admin_actions import visible_within
from models.engine.database import query, write_transaction

# An entry as stored; `query` is the JSON text of the request's query parameters.
AccessRow = namedtuple("AccessRow", "id ts kind key_id key_name source_ip query start_ms end_ms rows bytes")
_COLUMNS = "a.id, a.ts, a.kind, a.key_id, a.key_name, a.source_ip, a.query, a.start_ms, a.end_ms, a.rows, a.bytes"


def record_read(kind: str, actor: dict, query_args: dict, endpoints, window, sent, now_ms: int) -> int:
    """Append an entry in a transaction of its own; its id. `actor` holds key_id, key_name and
    source_ip; `endpoints` the endpoints the reader could see (None: all); `window` (start,
    end) ms or None each; `sent` (rows, bytes) so far."""
    with write_transaction():
        return query(
            "INSERT INTO access_read (ts, kind, key_id, key_name, source_ip, query, endpoints, start_ms, end_ms,"
            " rows, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            [
                now_ms,
                kind,
                actor["key_id"],
                actor["key_name"],
                actor["source_ip"],
                json.dumps(query_args, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
                None if endpoints is None else json.dumps(sorted(set(endpoints))),
                *window,
                *sent,
            ],
        ).fetchone()[0]


def finish_read(entry_id: int, rows: int, size: int):
    """What a streamed read sent, once it ended."""
    with write_transaction():
        query("UPDATE access_read SET rows = ?, bytes = ? WHERE id = ?", [rows, size, entry_id])


def list_reads(start_ms, end_ms, kind=None, key_name=None, endpoint_limit=None, page=0, page_size=100):
    """Entries in the window, newest first; an endpoint-limited reader sees only the reads of
    keys limited to its endpoints (a read across all endpoints names none)."""
    where, params = ["a.ts >= ?", "a.ts <= ?"], [start_ms, end_ms]
    if kind:
        where.append("a.kind = ?")
        params.append(kind)
    if key_name:
        where.append("a.key_name = ?")
        params.append(key_name)
    if endpoint_limit is not None:
        condition, allowed = visible_within("a.endpoints", endpoint_limit)
        where.append(condition)
        params += allowed
    rows = query(
        f"SELECT {_COLUMNS} FROM access_read a WHERE {' AND '.join(where)} ORDER BY a.ts DESC, a.id DESC"
        " LIMIT ? OFFSET ?",
        params + [page_size, page * page_size],
    )
    return [AccessRow._make(row) for row in rows]


def expire(before_ms: int) -> int:
    """Forget the reads made before `before_ms`; how many."""
    with write_transaction():
        return query("DELETE FROM access_read WHERE ts < ?", [before_ms]).rowcount
