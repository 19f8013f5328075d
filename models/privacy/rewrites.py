"""Bringing stored records to stricter privacy: after a setting is made stricter (every record
stored before the change) and as records reach an age step (those older than its days).

The work is a list of tasks (table privacy_rewrite), each (endpoint, the coarser detail to
bring records to, a time range, the newest record id it covers), worked through in batches
of BATCH records in (ts, id) order, each batch a write transaction of its own so ingestion
never waits long. A batch takes its records' counts out of every rollup, rewrites them, and
adds them back: every total stays, and the counts follow the values (a truncated client
counts under the truncated one). Rewriting is idempotent (a truncated address truncates to
itself, a hashed one is left as it is, a domain reduces to itself), so a task cut short by a
crash is simply run again from its cursor.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

from models.engine.database import insert_rows, query, update_rows, write_transaction
from models.engine.sql import placeholders, statement_parts
from models.privacy import privacy, unused_terms
from models.records import domains, freezing, thawing
from models.records.terms import term_ids, term_values
from models.schema.tables import CLIENT_META_FIELDS
from models.statistics import counting, first_seen, rollups

BATCH = 500
# No record is newer or has a higher id: the bounds of a task that covers them all.
EVER = 2**62
STRICTER, AGE = "stricter", "age"
_COLUMNS = ("src_ip", "src_city", "question", "trigger_value", "answers", "spoof_target", "dst_country", "dst_isp")
_CLIENT_DIMS = [dim.id for dim in rollups.DIMS if "client" in dim.columns]
_METADATA = [field for field in CLIENT_META_FIELDS if field != "ip"]


def detail_rules(detail: dict) -> dict:
    """Settings that keep everything but what `detail` makes coarser."""
    return {**privacy.BUILT_IN, "ipv4_prefix": 32, "ipv6_prefix": 128, **detail}


@dataclass(frozen=True)
class Kept:
    """Where the records a task covers are kept: the newest record number, and how many records
    of an endpoint (id, name) have ts in (after, upto] and a number up to id_upto (the SQL
    store's here; models/clickhouse/rewrites.py's in ClickHouse)."""

    newest_id: Callable[[], int]
    total: Callable[[int, str, int, int, int], int]


def change(endpoint: str, fields: dict, now: int) -> tuple[dict, int]:
    """privacy.change, and tasks to rewrite the records stored so far of every endpoint whose
    settings in force it made stricter (all that follow the default, for DEFAULT): (the
    settings in force, the records still to rewrite as `in_force` counts them). Call inside a
    write transaction."""
    return change_kept(IN_SQL, endpoint, fields, now)


def change_kept(kept: Kept, endpoint: str, fields: dict, now: int) -> tuple[dict, int]:
    """`change`, the records counted where `kept` says."""
    before = privacy.settings()
    result = privacy.change(endpoint, fields)
    after = privacy.settings()
    if endpoint == privacy.DEFAULT:
        endpoints = query("SELECT name, id FROM endpoint").fetchall()
    else:
        endpoints = query("SELECT name, id FROM endpoint WHERE name = ?", [endpoint]).fetchall()
    for name, ident in endpoints:
        detail = privacy.tightened(privacy.effective(before, name), privacy.effective(after, name))
        if detail:
            _add_task(kept, ident, name, detail, STRICTER, -1, EVER, kept.newest_id(), now)
    return result, pending_of(endpoint, pending())


def in_force(endpoint_limit=None) -> dict[str, tuple[dict, int]]:
    """privacy.in_force, each with the stored records still to rewrite (DEFAULT: everyone's)."""
    left = pending()
    return {name: (settings, pending_of(name, left)) for name, settings in privacy.in_force(endpoint_limit).items()}


def pending_of(name: str, left: dict[str, int]) -> int:
    return sum(left.values()) if name == privacy.DEFAULT else left.get(name, 0)


def plan_ages(now: int) -> None:
    """Tasks for the records that reached an age step since the last run (each step remembers
    how far it got, in privacy_age_mark). Call inside a write transaction."""
    plan_ages_kept(IN_SQL, now)


def plan_ages_kept(kept: Kept, now: int) -> None:
    """`plan_ages`, the records counted where `kept` says."""
    stored = privacy.settings()
    marks = {
        (endpoint, step): upto for endpoint, step, upto in query("SELECT endpoint, step, upto FROM privacy_age_mark")
    }
    wanted = set()
    for ident, name in query("SELECT id, name FROM endpoint").fetchall():
        spans = privacy.ages(privacy.effective(stored, name))
        for since, settings in spans[1:]:
            detail = privacy.tightened(privacy.BUILT_IN, settings)
            if not detail:
                continue
            step = json.dumps([since, detail], sort_keys=True)
            wanted.add((ident, step))
            done, bound = marks.get((ident, step), -1), now - since
            if bound <= done:
                continue
            _add_task(kept, ident, name, detail, AGE, done, bound, EVER, now)
            query(
                "INSERT INTO privacy_age_mark (endpoint, step, upto) VALUES (?, ?, ?)"
                " ON CONFLICT (endpoint, step) DO UPDATE SET upto = excluded.upto",
                [ident, step, bound],
            )
    for key in set(marks) - wanted:  # steps no longer in force
        query("DELETE FROM privacy_age_mark WHERE endpoint = ? AND step = ?", list(key))


def _sql_total(endpoint: int, name: str, after: int, upto: int, id_upto: int) -> int:
    freezing.melt_window([endpoint], after + 1, upto)  # a rewrite works on rows
    return query(
        "SELECT COUNT(*) FROM record WHERE endpoint = ? AND ts > ? AND ts <= ? AND id <= ?",
        [endpoint, after, upto, id_upto],
    ).fetchone()[0]


IN_SQL = Kept(thawing.newest_id, _sql_total)


def _add_task(kept: Kept, endpoint, name, detail: dict, kind: str, after: int, upto: int, id_upto: int, now) -> int:
    total = kept.total(endpoint, name, after, upto, id_upto)
    query(
        "INSERT INTO privacy_rewrite (endpoint, detail, kind, ts_after, ts_upto, id_upto, cursor_ts, cursor_id,"
        " total, done, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
        [endpoint, json.dumps(detail, sort_keys=True), kind, after, upto, id_upto, after, EVER, total, now],
    )
    return total


def pending() -> dict[str, int]:
    """{endpoint name: records its tasks have still to go through}."""
    rows = query(
        "SELECT e.name, SUM(t.total - t.done) FROM privacy_rewrite t JOIN endpoint e ON e.id = t.endpoint"
        " GROUP BY e.name"
    )
    return {name: max(int(left), 0) for name, left in rows}


def run(deadline, on_finished=None) -> int:
    """Work through the tasks, oldest first, until none is left or `deadline()` is true; the
    records rewritten. `on_finished(endpoint name, kind, detail, rewritten)` is called inside the
    transaction that ends a task."""
    rewritten = 0
    while not deadline():
        task = next_task()
        if task is None:
            break
        rewritten += _step(task, on_finished)
    return rewritten


def next_task():
    """The oldest task: (id, endpoint id, endpoint name, detail as JSON, kind, ts_after, ts_upto,
    id_upto, cursor_ts, cursor_id, done), or None."""
    return query(
        "SELECT t.id, t.endpoint, e.name, t.detail, t.kind, t.ts_after, t.ts_upto, t.id_upto, t.cursor_ts,"
        " t.cursor_id, t.done FROM privacy_rewrite t JOIN endpoint e ON e.id = t.endpoint ORDER BY t.id LIMIT 1"
    ).fetchone()


def advance(task: int, cursor_ts: int, cursor_id: int, gone_through: int) -> None:
    """A task's cursor moved past `gone_through` more records. Call inside a write transaction."""
    query(
        "UPDATE privacy_rewrite SET cursor_ts = ?, cursor_id = ?, done = done + ? WHERE id = ?",
        [cursor_ts, cursor_id, gone_through, task],
    )


def finish(task: int, name: str, kind: str, detail: dict, done: int, on_finished) -> None:
    """A task gone; `on_finished` told so. Call inside the write transaction that ends it."""
    query("DELETE FROM privacy_rewrite WHERE id = ?", [task])
    if on_finished is not None:
        on_finished(name, kind, detail, done)


def _step(task, on_finished) -> int:
    """One batch of a task (or its end); the records rewritten."""
    ident, endpoint, name, detail_text, kind, ts_after, ts_upto, id_upto, cursor_ts, cursor_id, done = task
    detail = json.loads(detail_text)
    rules = detail_rules(detail)
    key = privacy.hash_keys([name])[name] if rules["client_ip"] == privacy.HASH else None
    with write_transaction():
        counting.catch_up()  # the names' times and counts of every record, before they change
        freezing.melt_window([endpoint], max(cursor_ts, ts_after + 1), ts_upto)  # frozen again meanwhile
        rows = query(
            "SELECT r.id, r.ts, r.client, c.client_id, " + ", ".join(f"r.{c}" for c in _COLUMNS) + ", r.dst_asn"
            " FROM record r JOIN client c ON c.id = r.client"
            " WHERE r.endpoint = ? AND r.ts <= ? AND r.id <= ? AND (r.ts > ? OR (r.ts = ? AND r.id > ?))"
            " ORDER BY r.ts, r.id LIMIT ?",
            [endpoint, ts_upto, id_upto, cursor_ts, cursor_ts, cursor_id, BATCH],
        ).fetchall()
        if not rows:
            coarser_entries(endpoint, rules, key, ts_after, ts_upto)
            if rules["question"] != privacy.KEEP:
                _coarser_names(endpoint, rules, ts_after, ts_upto)
            finish(ident, name, kind, detail, done, on_finished)
            return 0
        changed = _rewrite(endpoint, rows, rules, key)
        last = rows[-1]
        advance(ident, last[1], last[0], len(rows))
    return changed


def _rewrite(endpoint: int, rows: list, rules: dict, key) -> int:
    """Rewrite the rows (see _step's SELECT) as `rules` keep them; how many changed."""
    texts = term_values(value for row in rows for value in (row[4], row[6]))
    updates, moved_from, unused = [], set(), set()
    strings, questions, clients = set(), set(), set()
    for rid, _, client, client_id, src_ip, src_city, question, trigger, answers, spoof, country, isp, asn in rows:
        new = {"client_id": client_id, "src_ip": texts.get(src_ip), "question": texts.get(question)}
        terms = {"src_city": src_city, "trigger_value": trigger, "answers": answers, "spoof_target": spoof}
        terms |= {"dst_country": country, "dst_isp": isp}
        values = {"dst_asn": asn}
        if rules["client_ip"] != privacy.KEEP:
            new["client_id"] = privacy.client_kept(client_id, rules, key)
            new["src_ip"] = privacy.address_kept(new["src_ip"], rules, key)
            if rules["client_ip"] != privacy.TRUNCATE:
                terms["src_city"] = None
        if rules["question"] != privacy.KEEP and new["question"] is not None:
            new["question"] = privacy.question_kept(new["question"], rules)
            terms["trigger_value"] = None
        if rules["answers"] == privacy.DROP:
            terms.update(answers=None, spoof_target=None, dst_country=None, dst_isp=None)
            values["dst_asn"] = None
        before = (
            client_id,
            texts.get(src_ip),
            texts.get(question),
            src_city,
            trigger,
            answers,
            spoof,
            country,
            isp,
            asn,
        )
        after = (new["client_id"], new["src_ip"], new["question"], *terms.values(), values["dst_asn"])
        if before == after:
            continue
        if new["client_id"] != client_id:
            moved_from.add(client)
        stored = (src_ip, question, *before[3:9])  # the term ids of before[1:9]
        unused.update(term for term, was, now in zip(stored, before[1:9], after[1:9], strict=True) if was != now)
        strings |= {new["src_ip"], new["question"]}
        questions.add(new["question"])
        clients.add(new["client_id"])
        updates.append((rid, new, terms, values))
    if not updates:
        return 0
    ids = [rid for rid, *_ in updates]
    condition = f"id IN ({placeholders(len(ids))})"
    counting.apply(condition, ids, -1)
    strings.discard(None)
    questions.discard(None)
    term = term_ids(strings | domains.domains_of(questions))
    term[None] = None
    domains.map_questions(term, questions)
    entry = entries(endpoint, clients)
    update_rows(
        "record",
        (
            "client",
            "src_ip",
            "question",
            "src_city",
            "trigger_value",
            "answers",
            "spoof_target",
            "dst_country",
            "dst_isp",
            "dst_asn",
        ),
        "id",
        [
            (
                entry[new["client_id"]],
                term[new["src_ip"]],
                term[new["question"]],
                *terms.values(),
                values["dst_asn"],
                rid,
            )
            for rid, new, terms, values in updates
        ],
    )
    counting.apply(condition, ids, 1)
    unused_terms.note(unused)
    if moved_from:
        freezing.renote_last_frozen(endpoint, moved_from)  # their frozen records may have moved
        _retire_entries(moved_from, rules, key)
    return len(updates)


def entries(endpoint: int, client_ids: set) -> dict[str, int]:
    """Ids of the endpoint's client entries by client id, made when missing."""
    names = sorted(client_ids)
    insert_rows(
        "INSERT INTO client (endpoint, client_id)",
        2,
        [(endpoint, name) for name in names],
        "ON CONFLICT (endpoint, client_id) DO NOTHING",
    )
    rows = query(
        f"SELECT client_id, id FROM client WHERE endpoint = ? AND client_id IN ({placeholders(len(names))})",
        [endpoint, *names],
    )
    return dict(rows)


def _retire_entries(entry_ids: set, rules: dict, key) -> None:
    """Entries whose records all moved to another client id (an address made coarser): their
    counts past the records' horizon go to the entry their id now maps to, and they go."""
    for entry, endpoint, client_id, ip, ip_ts in query(
        f"SELECT id, endpoint, client_id, ip, ip_ts FROM client WHERE id IN ({placeholders(len(entry_ids))})"
        f" AND NOT {freezing.has_records_sql('client')} AND unlogged IS NULL",
        sorted(entry_ids),
    ).fetchall():
        target_id = retire(entry, endpoint, client_id, ip, ip_ts, rules, key)
        dims = placeholders(len(_CLIENT_DIMS))
        query(
            "INSERT INTO rollup (dim, period, endpoint, value, n)"
            f" SELECT dim, period, endpoint, ?, n FROM rollup WHERE dim IN ({dims}) AND value = ?"
            " ON CONFLICT (dim, period, endpoint, value) DO UPDATE SET n = rollup.n + excluded.n",
            [target_id, *_CLIENT_DIMS, entry],
        )
        query(f"DELETE FROM rollup WHERE dim IN ({dims}) AND value = ?", [*_CLIENT_DIMS, entry])


def retire(entry: int, endpoint: int, client_id: str, ip: str, ip_ts, rules: dict, key) -> int:
    """An entry whose records all moved to the client id `rules` keep of its own deleted, what
    it said of its address handed to that one's entry (made when missing); that entry's id."""
    target = entries(endpoint, {privacy.client_kept(client_id, rules, key)})
    (target_id,) = target.values()
    query("DELETE FROM client WHERE id = ?", [entry])
    if ip:  # what the address entry said of its address, as coarse as the records say it now
        query(
            "UPDATE client SET ip = ?, ip_ts = ? WHERE id = ? AND ip = ''",
            [privacy.address_kept(ip, rules, key) or "", ip_ts, target_id],
        )
    return target_id


def coarser_entries(endpoint: int, rules: dict, key, after: int, upto: int) -> None:
    """What the endpoint's client entries last saw in (after, upto], made as coarse as the
    records were (what they saw before `after`, an earlier task did)."""
    if rules["client_metadata"] == privacy.DROP:
        for field in _METADATA:
            query(
                f"UPDATE client SET {field} = '', {field}_ts = NULL"
                f" WHERE endpoint = ? AND {field}_ts > ? AND {field}_ts <= ?",
                [endpoint, after, upto],
            )
    if rules["client_ip"] != privacy.KEEP:
        rows = query(
            "SELECT id, ip FROM client WHERE endpoint = ? AND ip <> '' AND ip_ts > ? AND ip_ts <= ?",
            [endpoint, after, upto],
        )
        update_rows(
            "client",
            ("ip",),
            "id",
            [(privacy.address_kept(ip, rules, key) or "", ident) for ident, ip in rows.fetchall()],
        )


def _coarser_names(endpoint: int, rules: dict, after: int, upto: int) -> None:
    """The endpoint's first-seen names last asked in (after, upto], as the question is now kept: a
    reduced name takes their times (the earliest first, the latest last); dropped, they go.
    The rows over all endpoints of those names are made anew from every endpoint's."""
    rows = query(
        "SELECT term, first, last FROM name_seen WHERE endpoint = ? AND last > ? AND last <= ?", [endpoint, after, upto]
    )
    rows = rows.fetchall()
    if not rows:
        return
    names = term_values(term for term, _, _ in rows)
    spans: dict[str, list] = {}
    old = []
    for term, first, last in rows:
        kept = privacy.question_kept(names[term], rules)
        if kept == names[term]:
            continue
        old.append(term)
        if kept:
            span = spans.setdefault(kept, [first, last])
            span[0], span[1] = min(span[0], first), max(span[1], last)
    if not old:
        return
    for part in statement_parts(old, 500):
        query(f"DELETE FROM name_seen WHERE endpoint = ? AND term IN ({placeholders(len(part))})", [endpoint, *part])
    unused_terms.note(old)
    ids = term_ids(spans)
    first_seen.note_spans([(ids[name], endpoint, first, last) for name, (first, last) in spans.items()])
    first_seen.renote_everywhere([*old, *ids.values()])
