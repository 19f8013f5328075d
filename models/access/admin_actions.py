"""The admin-action log: appended in the transaction of each change, read back with filters."""

import json
from collections import namedtuple

from models.engine.database import db, query
from models.engine.sql import ascii_lower, like_escape, placeholders

# An entry as stored; `metadata` is its JSON text.
AdminActionRow = namedtuple("AdminActionRow", "id ts action key_id key_name source_ip metadata")


def record_action(action: str, actor: dict, metadata: dict, endpoints, now_ms: int) -> int:
    """Append an entry; call inside the change's transaction. `actor` holds key_id, key_name
    and source_ip; `endpoints` the endpoints the change touched (None: not endpoint data)."""
    row = query(
        "INSERT INTO admin_action (ts, action, key_id, key_name, source_ip, metadata, endpoints)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [
            now_ms,
            action,
            actor["key_id"],
            actor["key_name"],
            actor["source_ip"],
            json.dumps(metadata, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
            None if endpoints is None else json.dumps(sorted(set(endpoints))),
        ],
    ).fetchone()
    return row[0]


def update_metadata(action_id: int, metadata: dict):
    """Replace an entry's metadata (a change made in several transactions updates its entry in
    each, so the log always matches what is committed)."""
    query(
        "UPDATE admin_action SET metadata = ? WHERE id = ?",
        [json.dumps(metadata, separators=(",", ":"), sort_keys=True, ensure_ascii=False), action_id],
    )


def list_actions(start_ms, end_ms, action=None, search=None, endpoint_limit=None, page=0, page_size=100):
    """Entries in the window, newest first; an endpoint-limited reader sees only entries
    whose endpoints all lie within its limit."""
    where, params = ["a.ts >= ?", "a.ts <= ?"], [start_ms, end_ms]
    if action:
        where.append("a.action = ?")
        params.append(action)
    if search:
        pattern = "%" + like_escape(ascii_lower(search)) + "%"
        like = db.obj.dialect.like_ascii_nocase
        where.append(f"({like('a.action')} OR {like('a.metadata')})")
        params += [pattern, pattern]
    if endpoint_limit is not None:
        condition, allowed = visible_within("a.endpoints", endpoint_limit)
        where.append(condition)
        params += allowed
    rows = query(
        "SELECT a.id, a.ts, a.action, a.key_id, a.key_name, a.source_ip, a.metadata FROM admin_action a"
        f" WHERE {' AND '.join(where)} ORDER BY a.ts DESC, a.id DESC LIMIT ? OFFSET ?",
        params + [page_size, page * page_size],
    )
    return [AdminActionRow._make(row) for row in rows]


def visible_within(endpoints_column: str, endpoint_limit) -> tuple[str, list]:
    """(SQL, params): a log entry whose endpoints (a JSON list in `endpoints_column`; NULL: all
    endpoints) all lie within `endpoint_limit`, so an endpoint-limited reader may see it."""
    allowed = sorted(endpoint_limit)
    return (
        f"{endpoints_column} IS NOT NULL AND NOT EXISTS"
        f" (SELECT 1 FROM {db.obj.dialect.json_array_rows(endpoints_column, 'e')}"
        f" WHERE e.value NOT IN ({placeholders(len(allowed))}))",
        allowed,
    )
