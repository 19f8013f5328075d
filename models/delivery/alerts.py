"""Alert rules, what they remember, their firings and the firings' deliveries: the store side of
alerting (the job that evaluates and delivers is app/jobs/alerts.py)."""

import json
from collections import namedtuple

from models.clients.clients import endpoint_last_activity
from models.engine.database import query, write_transaction
from models.engine.sql import can_be_id, chunks, placeholders
from models.records import thawing
from models.statistics import counting

KINDS = ("feed-silent", "new-client", "new-domain", "watched-domain", "client-share")
# A delivery's states: not tried yet, failed and to be tried again, done, given up.
PENDING, RETRYING, DELIVERED, FAILED = "pending", "retrying", "delivered", "failed"

RuleRow = namedtuple("RuleRow", "id kind endpoints client_ids destinations cooldown settings cursor created updated")
AlertRow = namedtuple("AlertRow", "id rule kind endpoint subject message detail ts deliveries")
DeliveryRow = namedtuple("DeliveryRow", "destination state attempts next_try error updated")
DueRow = namedtuple("DueRow", "delivery destination attempts id rule kind endpoint subject message detail ts secret")
# A record as the record-reading kinds judge it (texts, not term ids).
SeenRecord = namedtuple("SeenRecord", "id ts endpoint client question domain")

_RULE_COLUMNS = "id, kind, endpoints, client_ids, destinations, cooldown, settings, cursor, created, updated"
_JSON_COLUMNS = ("endpoints", "client_ids", "destinations", "settings")


def _dumps(value) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _rule(row) -> RuleRow:
    rule = RuleRow._make(row)
    return rule._replace(**{name: json.loads(getattr(rule, name)) for name in _JSON_COLUMNS if getattr(rule, name)})


def top_id(kind: str) -> int:
    """Where a new rule starts looking: after every client entry (new-client) or record
    (the other kinds) stored so far, so that it judges only what comes after it."""
    if kind != "new-client":
        return thawing.newest_id()
    return query("SELECT MAX(id) FROM client").fetchone()[0] or 0


def create_rule(fields: dict, secret: str, now_ms: int) -> RuleRow:
    """Store a rule; `fields` holds kind, endpoints, client_ids, destinations, cooldown, settings."""
    row = query(
        "INSERT INTO alert_rule (kind, endpoints, client_ids, destinations, cooldown, settings, secret, cursor,"
        f" created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_RULE_COLUMNS}",
        [
            fields["kind"],
            _dumps(sorted(set(fields["endpoints"]))),
            _dumps(fields["client_ids"]),
            _dumps(fields["destinations"]),
            fields["cooldown"],
            _dumps(fields["settings"]),
            secret,
            top_id(fields["kind"]),
            now_ms,
            now_ms,
        ],
    ).fetchone()
    return _rule(row)


def _visible(rule: RuleRow, endpoint_limit) -> bool:
    return endpoint_limit is None or set(rule.endpoints) <= set(endpoint_limit)


def list_rules(endpoint_limit=None) -> list[RuleRow]:
    """Every rule, oldest first; an endpoint-limited reader sees those within its limit."""
    rows = query(f"SELECT {_RULE_COLUMNS} FROM alert_rule ORDER BY id").fetchall()
    return [rule for rule in map(_rule, rows) if _visible(rule, endpoint_limit)]


def get_rule(rule_id: int, endpoint_limit=None) -> RuleRow | None:
    if not can_be_id(rule_id):
        return None
    row = query(f"SELECT {_RULE_COLUMNS} FROM alert_rule WHERE id = ?", [rule_id]).fetchone()
    rule = _rule(row) if row else None
    return rule if rule and _visible(rule, endpoint_limit) else None


def update_rule(rule_id: int, fields: dict, now_ms: int) -> RuleRow:
    """Change some of a rule's columns (names as create_rule takes them)."""
    values = {name: _dumps(value) if name in _JSON_COLUMNS else value for name, value in fields.items()}
    if "endpoints" in fields:
        values["endpoints"] = _dumps(sorted(set(fields["endpoints"])))
    assignments = ", ".join(f"{name} = ?" for name in values)
    row = query(
        f"UPDATE alert_rule SET {assignments}, updated = ? WHERE id = ? RETURNING {_RULE_COLUMNS}",
        [*values.values(), now_ms, rule_id],
    ).fetchone()
    if "settings" in fields or "endpoints" in fields:
        query("DELETE FROM alert_mark WHERE rule = ?", [rule_id])  # remembered under the old meaning
    return _rule(row)


def delete_rule(rule_id: int):
    """Delete a rule and what it remembers; its firings stay in the history, and deliveries
    not yet made are given up (their webhook secret goes with the rule)."""
    query("DELETE FROM alert_rule WHERE id = ?", [rule_id])
    query("DELETE FROM alert_mark WHERE rule = ?", [rule_id])
    query("DELETE FROM alert_told WHERE rule = ?", [rule_id])
    query(
        "UPDATE alert_delivery SET state = ?, error = ?, next_try = NULL WHERE state IN (?, ?)"
        " AND alert IN (SELECT id FROM alert WHERE rule = ?)",
        [FAILED, "the rule was deleted", PENDING, RETRYING, rule_id],
    )


def secret_of(rule_id: int) -> str:
    return query("SELECT secret FROM alert_rule WHERE id = ?", [rule_id]).fetchone()[0]


def advance(rule_id: int, seen: int, cursor: int) -> bool:
    """Move a rule's cursor from `seen` to `cursor`; False when it is no longer at `seen` (another
    process judged those rows first: whoever moves the cursor is the one that fires)."""
    return query("UPDATE alert_rule SET cursor = ? WHERE id = ? AND cursor = ?", [cursor, rule_id, seen]).rowcount == 1


# What the kinds read.


def endpoint_activity(names: list) -> dict[str, int | None]:
    """Each named endpoint's last activity (ms; None: no record yet, or never seen)."""
    ids = dict(query(f"SELECT id, name FROM endpoint WHERE name IN ({placeholders(len(names))})", names).fetchall())
    last = endpoint_last_activity(list(ids))
    return {name: None for name in names} | {name: last[ident] for ident, name in ids.items()}


def new_clients(names: list, after_id: int, limit: int) -> list[tuple]:
    """Client entries made after `after_id` on the named endpoints: (id, endpoint, client id,
    host, ip, mac), oldest first."""
    return query(
        "SELECT c.id, e.name, c.client_id, c.host, c.ip, c.mac FROM client c JOIN endpoint e ON e.id = c.endpoint"
        f" WHERE c.id > ? AND e.name IN ({placeholders(len(names))}) ORDER BY c.id LIMIT ?",
        [after_id, *names, limit],
    ).fetchall()


def _scope(names: list, clients: list | None) -> tuple[str, list]:
    condition = f"e.name IN ({placeholders(len(names))})"
    if clients:
        condition += f" AND c.client_id IN ({placeholders(len(clients))})"
    return condition, [*names, *(clients or [])]


def records_after(names: list, clients: list | None, after_id: int, limit: int) -> tuple[list[SeenRecord], int]:
    """Records stored after `after_id` on the named endpoints (and clients), oldest first, and
    the id to go on from (the last one read; `after_id` when none)."""
    top = query("SELECT MAX(id) FROM (SELECT id FROM record WHERE id > ? ORDER BY id LIMIT ?) s", [after_id, limit])
    upto = top.fetchone()[0]
    if upto is None:
        return [], after_id
    condition, params = _scope(names, clients)
    rows = query(
        "SELECT r.id, r.ts, e.name, c.client_id, q.value, d.value FROM record r"
        " JOIN endpoint e ON e.id = r.endpoint JOIN client c ON c.id = r.client JOIN term q ON q.id = r.question"
        " LEFT JOIN term_domain td ON td.term = r.question LEFT JOIN term d ON d.id = td.domain"
        f" WHERE r.id > ? AND r.id <= ? AND {condition} ORDER BY r.id",
        [after_id, upto, *params],
    ).fetchall()
    return [SeenRecord._make(row) for row in rows], upto


def client_counts(names: list, clients: list | None, start_ms: int, end_ms: int) -> list[tuple]:
    """Per client of the named endpoints with records in [start, end]: (endpoint, client id,
    queries, NXDOMAIN answers, blocked queries)."""
    condition, params = _scope(names, clients)
    return query(
        "SELECT e.name, c.client_id, COUNT(*),"
        " SUM(CASE WHEN s.value = 'NXDOMAIN' THEN 1 ELSE 0 END), SUM(CASE WHEN r.action = 0 THEN 1 ELSE 0 END)"
        " FROM record r JOIN endpoint e ON e.id = r.endpoint JOIN client c ON c.id = r.client"
        " LEFT JOIN term s ON s.id = r.status"
        f" WHERE r.ts >= ? AND r.ts <= ? AND {condition} GROUP BY e.name, c.client_id",
        [start_ms, end_ms, *params],
    ).fetchall()


def seed_domains(rule_id: int, names: list, since_ms: int):
    """Remember the registrable domains asked on the named endpoints since `since_ms` (subjects
    "endpoint/domain", as the new-domain kind marks them), from
    the names' first/last-seen statistic (models/statistics/first_seen.py, kept past the records' horizon),
    so that a new rule does not take every domain it meets for a new one."""
    with write_transaction():
        counting.catch_up()  # the names of the records not counted yet too
        _seed_domains(rule_id, names, since_ms)


def _seed_domains(rule_id: int, names: list, since_ms: int):
    query(
        "INSERT INTO alert_mark (rule, subject, ts) SELECT ?, e.name || '/' || d.value, MAX(n.last) FROM name_seen n"
        " JOIN endpoint e ON e.id = n.endpoint JOIN term_domain td ON td.term = n.term JOIN term d ON d.id = td.domain"
        f" WHERE e.name IN ({placeholders(len(names))}) AND n.last >= ? GROUP BY e.name, d.value"
        " ON CONFLICT (rule, subject) DO NOTHING",
        [rule_id, *names, since_ms],
    )


def marks(rule_id: int, subjects) -> dict[str, int]:
    found = {}
    for part in chunks(sorted(subjects), 500):
        rows = query(
            f"SELECT subject, ts FROM alert_mark WHERE rule = ? AND subject IN ({placeholders(len(part))})",
            [rule_id, *part],
        )
        found.update(rows)
    return found


def set_marks(rule_id: int, stamps: dict[str, int]):
    for subject, ts in stamps.items():
        query(
            "INSERT INTO alert_mark (rule, subject, ts) VALUES (?, ?, ?)"
            " ON CONFLICT (rule, subject) DO UPDATE SET ts = excluded.ts WHERE alert_mark.ts < excluded.ts",
            [rule_id, subject, ts],
        )


def forget_marks(rule_id: int, before_ms: int):
    """Forget what a rule saw before `before_ms` (it would not count any more): bounded marks."""
    query("DELETE FROM alert_mark WHERE rule = ? AND ts < ?", [rule_id, before_ms])


# Firings and deliveries.


def last_fired(rule_id: int, subject: str) -> int | None:
    told = query("SELECT ts FROM alert_told WHERE rule = ? AND subject = ?", [rule_id, subject]).fetchone()
    if told is not None:
        return told[0]
    # A firing from before alert_told was kept, while the history still holds it.
    return query("SELECT MAX(ts) FROM alert WHERE rule = ? AND subject = ?", [rule_id, subject]).fetchone()[0]


def has_told_before(rule_id: int, before_ms: int) -> bool:
    return (
        query("SELECT 1 FROM alert_told WHERE rule = ? AND ts < ? LIMIT 1", [rule_id, before_ms]).fetchone() is not None
    )


def forget_told(rule_id: int, before_ms: int):
    """Forget when a rule fired before `before_ms` (past its cooldown, that no longer matters for
    a condition that does not last): bounded rows. Call inside a write transaction."""
    query("DELETE FROM alert_told WHERE rule = ? AND ts < ?", [rule_id, before_ms])


def fire(rule: RuleRow, endpoint: str, subject: str, message: str, detail: dict, now_ms: int) -> int | None:
    """Record a firing and one pending delivery per destination the rule has now (read again
    here: it may have been changed, or deleted — then nothing fires — since the job read it)."""
    current = query("SELECT destinations FROM alert_rule WHERE id = ?", [rule.id]).fetchone()
    if current is None:
        return None
    alert = query(
        "INSERT INTO alert (rule, kind, endpoint, subject, message, detail, ts)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [rule.id, rule.kind, endpoint, subject, message, _dumps(detail), now_ms],
    ).fetchone()[0]
    query(
        "INSERT INTO alert_told (rule, subject, ts) VALUES (?, ?, ?)"
        " ON CONFLICT (rule, subject) DO UPDATE SET ts = excluded.ts",
        [rule.id, subject, now_ms],
    )
    for destination in json.loads(current[0]):
        query(
            "INSERT INTO alert_delivery (alert, destination, state, attempts, next_try, error, updated)"
            " VALUES (?, ?, ?, 0, ?, '', ?)",
            [alert, destination, PENDING, now_ms, now_ms],
        )
    return alert


def due_deliveries(now_ms: int, limit: int) -> list[DueRow]:
    rows = query(
        "SELECT d.id, d.destination, d.attempts, a.id, a.rule, a.kind, a.endpoint, a.subject, a.message, a.detail,"
        " a.ts, r.secret FROM alert_delivery d JOIN alert a ON a.id = d.alert JOIN alert_rule r ON r.id = a.rule"
        " WHERE d.state IN (?, ?) AND d.next_try <= ? ORDER BY d.next_try, d.id LIMIT ?",
        [PENDING, RETRYING, now_ms, limit],
    ).fetchall()
    return [DueRow._make(row[:9] + (json.loads(row[9]),) + row[10:]) for row in rows]


def delivery_tried(delivery_id: int, state: str, attempts: int, next_try: int | None, error: str, now_ms: int):
    query(
        "UPDATE alert_delivery SET state = ?, attempts = ?, next_try = ?, error = ?, updated = ? WHERE id = ?",
        [state, attempts, next_try, error, now_ms, delivery_id],
    )


def has_older(before_ms: int) -> bool:
    """Whether any alert was fired before `before_ms` (so that most runs need no write)."""
    return query("SELECT 1 FROM alert WHERE ts < ? LIMIT 1", [before_ms]).fetchone() is not None


def expire(before_ms: int) -> int:
    """Delete the alerts fired before `before_ms` and their deliveries; how many alerts."""
    return _delete_alerts("ts < ?", [before_ms])


def forget_clients(clients, key: str) -> int:
    """Delete the alerts that name any of `clients` ((endpoint, client id) pairs) under `key`
    of their detail (about it, or naming it as the one that asked), their deliveries, and when a
    rule last told of it (the subject endpoint/client). How many alerts. Call inside a write
    transaction."""
    wanted = {}
    for endpoint, client in clients:
        wanted.setdefault(endpoint, set()).add(client)
    gone = [
        ident
        for endpoint, names in wanted.items()
        for ident, detail in query("SELECT id, detail FROM alert WHERE endpoint = ?", [endpoint]).fetchall()
        if json.loads(detail).get(key) in names
    ]
    for part in chunks(gone, 500):
        _delete_alerts(f"id IN ({placeholders(len(part))})", part)
    subjects = [f"{endpoint}/{client}" for endpoint, client in clients]  # new-client's subjects
    for part in chunks(subjects, 500):
        query(f"DELETE FROM alert_told WHERE subject IN ({placeholders(len(part))})", part)
    return len(gone)


def _delete_alerts(condition: str, params: list) -> int:
    """Delete the alerts matching `condition` (SQL on the alert table) and their deliveries
    first; how many alerts."""
    query(f"DELETE FROM alert_delivery WHERE alert IN (SELECT id FROM alert WHERE {condition})", params)
    return query(f"DELETE FROM alert WHERE {condition}", params).rowcount


def list_alerts(start_ms, end_ms, rule_id=None, endpoint_limit=None, page=0, page_size=100) -> list[AlertRow]:
    """Firings in the window, newest first, each with its deliveries; an endpoint-limited
    reader sees those of its endpoints."""
    where, params = ["a.ts >= ?", "a.ts <= ?"], [start_ms, end_ms]
    if rule_id is not None:
        where.append("a.rule = ?")
        params.append(rule_id)
    if endpoint_limit is not None:
        allowed = sorted(endpoint_limit) or [""]
        where.append(f"a.endpoint IN ({placeholders(len(allowed))})")
        params += allowed
    rows = query(
        "SELECT a.id, a.rule, a.kind, a.endpoint, a.subject, a.message, a.detail, a.ts FROM alert a"
        f" WHERE {' AND '.join(where)} ORDER BY a.ts DESC, a.id DESC LIMIT ? OFFSET ?",
        params + [page_size, page * page_size],
    ).fetchall()
    deliveries = {row[0]: [] for row in rows}
    if deliveries:
        for part in chunks(list(deliveries), 500):
            found = query(
                "SELECT alert, destination, state, attempts, next_try, error, updated FROM alert_delivery"
                f" WHERE alert IN ({placeholders(len(part))}) ORDER BY id",
                part,
            )
            for alert, *delivery in found:
                deliveries[alert].append(DeliveryRow._make(delivery))
    return [AlertRow(*row[:6], json.loads(row[6]), row[7], deliveries[row[0]]) for row in rows]
