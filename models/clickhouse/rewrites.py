"""Privacy rewrites on ClickHouse (docs/clickhouse.md "Deletions, rewrites, retention"): records
stored before a setting was made stricter, and records reaching an age step, made coarser by
`ALTER TABLE records UPDATE` mutations, a day partition at a time, each waited for.

The settings, the tasks with their cursors and the "still to rewrite" figures stay in
ANALYTICS_DATABASE, kept by models.privacy.rewrites as for the SQL store: only where the records
are counted differs (`_kept`). A task's cursor is the end of the last day rewritten.

An old value never goes into a mutation's text (ClickHouse keeps the text of its last mutations
beside the table, in `mutation_N.txt` and system.mutations): values computed outside ClickHouse
(truncated and hashed addresses, by the same functions as the SQL store's) are handed over in a
memory-only Join table, `rewrite_map` (kind, old, kept), which each mutation reads with
joinGetOrNull and which is emptied after each day. Rewriting is idempotent (a coarse value maps
to itself), so a day cut short is simply done again.

What holds the rewritten values besides the records, in one place (`TOUCHED`): `last_activity`
(client ids, made again for the clients a day moved), `names_seen` (names, as the SQL store's
first-seen names: reduced names take the times of theirs, dropped ones go), `daily_counts` (the
day's counts moved from the old values to the new, and the day merged so the old ones are gone).
"""

import json
from datetime import date

from models.clickhouse import counts, derived, numbers, tables
from models.clickhouse.dims import counted
from models.engine.database import query, write_transaction
from models.engine.sql import placeholders
from models.privacy import privacy, rewrites
from models.records.domains import registrable_domain

DAY_MS = 86_400_000
# No timestamp ClickHouse's DateTime64(3) can hold is later (tasks of "every record" say 2**62).
_LATEST_MS = 9_000_000_000_000
# The tables (and their columns) a rewrite changes besides the records' own: a table that keeps a
# value of a record (a count keyed by it, a sighting of it) must be made to follow it.
TOUCHED = {
    "last_activity": ("client",),
    "names_seen": ("question", "registrable_domain"),
    "daily_counts": ("value", "second", "domain"),
}
# The map's kinds: what client ids, source addresses and names become; and those they become (a
# value kept now may be rewritten away later, so it stays out of a mutation's text too).
_CLIENT, _SOURCE, _QUESTION = "client", "source", "question"
_NEW_CLIENT, _NEW_QUESTION = "new client", "new question"


def change_privacy(connection, endpoint: str, fields: dict, now: int) -> tuple[dict, int]:
    """As models.privacy.rewrites.change: the settings changed, and tasks for the records stored
    in ClickHouse of every endpoint made stricter. Inside the caller's write transaction."""
    return rewrites.change_kept(_kept(connection), endpoint, fields, now)


def privacy_in_force(connection, endpoint_limit=None) -> dict[str, tuple[dict, int]]:
    """As models.privacy.rewrites.in_force (settings and tasks are the SQL database's)."""
    return rewrites.in_force(endpoint_limit)


def plan_ages(connection, now: int) -> None:
    """As models.privacy.rewrites.plan_ages, the records counted in ClickHouse. Inside the
    caller's write transaction."""
    rewrites.plan_ages_kept(_kept(connection), now)


def clean_unused_terms(connection, deadline) -> tuple[int, int]:
    """(0, 0): ClickHouse keeps each string in the rows that hold it, with no table of strings to
    clean, so a value a rewrite's mutation replaced is in no row once the mutation is done (the
    part it was read from stays on disk, inactive, until ClickHouse removes it:
    docs/clickhouse.md says when)."""
    return 0, 0


def run_rewrites(connection, deadline, on_finished=None) -> int:
    """As models.privacy.rewrites.run: the tasks worked through, oldest first, a day partition
    at a time, until none is left or `deadline()` is true; the records that changed.
    `on_finished(endpoint, kind, detail, records gone through)` is called inside the
    transaction that ends a task."""
    rewritten = 0
    while not deadline():
        task = rewrites.next_task()
        if task is None:
            break
        rewritten += _step(connection, task, on_finished)
    return rewritten


def _kept(connection) -> rewrites.Kept:
    def total(endpoint: int, name: str, after: int, upto: int, id_upto: int) -> int:
        where, params = _scope(name, after, upto, id_upto)
        return connection.rows(f"SELECT count() FROM {_table(connection, 'records')} WHERE {where}", params)[0][0]

    return rewrites.Kept(numbers.top, total)


def _scope(name: str, after: int, upto: int, id_upto: int) -> tuple[str, dict]:
    where = (
        "endpoint = {endpoint:String} AND ts > fromUnixTimestamp64Milli({after:Int64})"
        " AND ts <= fromUnixTimestamp64Milli({upto:Int64}) AND id <= {id_upto:UInt64}"
    )
    params = {"endpoint": name, "after": max(after, -1), "upto": min(upto, _LATEST_MS), "id_upto": id_upto}
    return where, params


def _table(connection, name: str) -> str:
    return f"{connection.target.database}.{name}"


def _step(connection, task, on_finished) -> int:
    """One day of a task (or its end); the records that changed (on a cluster, on each replica)."""
    ident, endpoint, name, detail_text, kind, ts_after, ts_upto, id_upto, cursor_ts, _, done = task
    detail = json.loads(detail_text)
    rules = rewrites.detail_rules(detail)
    key = privacy.hash_keys([name])[name] if rules["client_ip"] == privacy.HASH else None
    where, params = _scope(name, max(cursor_ts, ts_after), ts_upto, id_upto)
    records = _table(connection, "records")
    day, found = connection.rows(f"SELECT toString(min(toDate(ts))), count() FROM {records} WHERE {where}", params)[0]
    if not found:
        _coarser_names(connection, name, rules, ts_after, ts_upto)
        with write_transaction():
            rewrites.coarser_entries(endpoint, rules, key, ts_after, ts_upto)
            rewrites.finish(ident, name, kind, detail, done, on_finished)
        return 0
    params = {**params, "day": day}
    where += " AND toDate(ts) = toDate({day:String})"
    try:
        moved = _fill_map(connection, where, params, rules, key)
        changes = _assignments(connection, rules)
        changed = " OR ".join(f"NOT ifNull({c} = {e}, isNull({c}) AND isNull({e}))" for c, e in changes.items())
        (gone_through,) = connection.rows(f"SELECT count() FROM {records} WHERE {where}", params)[0]
        # A task's id may be used again once it is done: its token names what it rewrites too.
        token = f"rewrite {ident} {name} {kind} {detail_text} {ts_after} {ts_upto} {id_upto} {day}"
        _counts_out(connection, where, params, token)
        rewritten = _unchanged(connection, where, changed, params)
        if rewritten:
            connection.command(
                f"ALTER TABLE {tables.changing(connection.target, 'records')} "
                f"UPDATE {', '.join(f'{c} = {e}' for c, e in changes.items())} "
                f"IN PARTITION {{day:String}} WHERE {where} AND ({changed}) SETTINGS mutations_sync = 2",
                params,
            )
            # Before the counts come back from the records as they now are: a replica that
            # has not run its share (a cluster's, past the statement's wait) would give them its
            # old values, and once counted under the day's token they stay.
            if left := _unchanged(connection, where, changed, params):
                raise RuntimeError(f"{left} records of {day} not rewritten on every replica yet: done again next run")
        _counts_in(connection, where, params, token)
        if moved:
            _last_activity_again(connection, name)
        with write_transaction():
            if moved:
                _move_entries(connection, endpoint, name, moved, rules, key)
            day_end = (date.fromisoformat(day) - date(1970, 1, 1)).days * DAY_MS + DAY_MS - 1
            rewrites.advance(ident, min(day_end, ts_upto), 0, gone_through)
    finally:
        _empty_map(connection)
    return rewritten


def _unchanged(connection, where: str, changed: str, params: dict) -> int:
    """How many of the day's records `changed` says the rewrite would still change, on any
    replica (one behind the others keeps old values the Distributed table may not show)."""
    every = tables.every_replica(connection.target, "records")
    return connection.rows(f"SELECT countIf({changed}) FROM {every} WHERE {where}", params)[0][0]


def _counts_out(connection, where: str, params: dict, token: str) -> None:
    """Before a day's mutation: the daily counts of every record of the day's scope (`where`)
    taken away, stored once under `token`; _counts_in adds them back as the records then are,
    so the counts move from the old values to the new and every total stays, as the SQL store's
    rewrites move its rollups' counts. Both run whether or not the mutation changes a row: a day
    done again after the mutation (cut short before its counts came back) finds nothing to change,
    and its counts must still come back; their tokens keep each half to once."""
    counts.take_away(connection, where, params, None, f"{token} out")


def _counts_in(connection, where: str, params: dict, token: str) -> None:
    counts.add(connection, counted(_table(connection, "records"), where), params, f"{token} in")
    # Merged now: the rows under the old values sum to nothing and go (a value rewritten away
    # leaves no count naming it); a day's counts are small.
    connection.command(
        f"OPTIMIZE TABLE {tables.changing(connection.target, 'daily_counts')} PARTITION {{day:String}} FINAL",
        {"day": params["day"]},
    )


def _assignments(connection, rules: dict) -> dict[str, str]:
    """{column of the records: the ClickHouse expression of its value as `rules` keep it}, as
    models.privacy.rewrites._rewrite changes the SQL store's rows."""
    found = {}
    if rules["client_ip"] != privacy.KEEP:
        found["client"] = _mapped(connection, _CLIENT, "client")
        found["src_ip"] = _mapped(connection, _SOURCE, "src_ip")
        if rules["client_ip"] != privacy.TRUNCATE:
            found["src_city"] = "''"
    if rules["question"] != privacy.KEEP:
        if rules["question"] == privacy.DOMAIN:
            found["question"] = "registrable_domain"  # filled at insert by the same function
        else:
            found["question"] = "''"
            found["registrable_domain"] = f"'{registrable_domain('')}'"
        found["trigger_value"] = "''"
    if rules["answers"] == privacy.DROP:
        found.update(answers="''", spoof_target="''", dst_country="''", dst_isp="''", dst_asn="NULL")
    return found


def _mapped(connection, kind: str, column: str) -> str:
    """`column`'s value through the map of `kind` (unchanged where the map has none)."""
    return f"ifNull({_kept_of(connection, kind, column)}, toString({column}))"


def _kept_of(connection, kind: str, column: str) -> str:
    """The value the map keeps for `column`'s, NULL when it has none."""
    return f"joinGetOrNull('{_table(connection, 'rewrite_map')}', 'kept', '{kind}', toString({column}))"


def _fill_map(connection, where: str, params: dict, rules: dict, key) -> dict[str, str]:
    """The map filled with what the addresses (client ids and source addresses) of the selected
    records become; {old client id: kept} of those that change."""
    if rules["client_ip"] == privacy.KEEP:
        return {}
    records = _table(connection, "records")
    rows = connection.rows(
        f"SELECT DISTINCT 'c', toString(client) FROM {records} WHERE {where} "
        f"UNION ALL SELECT DISTINCT 's', toString(src_ip) FROM {records} WHERE {where} AND src_ip != ''",
        params,
    )
    moved, mapped = {}, []
    for which, old in rows:
        if which == "c":
            kept = privacy.client_kept(old, rules, key)
            if kept != old:
                moved[old] = kept
                mapped += [(_CLIENT, old, kept), (_NEW_CLIENT, kept, kept)]
        else:
            kept = privacy.address_kept(old, rules, key) or ""
            if kept != old:
                mapped.append((_SOURCE, old, kept))
    _put(connection, mapped)
    return moved


def _put(connection, mapped: list[tuple[str, str, str]]) -> None:
    """The map made `mapped` on every node: each runs its share of a cluster's mutation, reading
    its own map (a Join table lives in one server's memory)."""
    for node in connection.nodes():
        node.command(
            f"CREATE TABLE IF NOT EXISTS {_table(node, 'rewrite_map')} (kind String, old String, kept String) "
            "ENGINE = Join(ANY, LEFT, kind, old) SETTINGS persistent = 0"
        )
        node.command(f"TRUNCATE TABLE {_table(node, 'rewrite_map')}")
        node.insert(_table(node, "rewrite_map"), ("kind", "old", "kept"), mapped)


def _empty_map(connection) -> None:
    """Every node's map emptied, the others' too when one cannot be (the old values go from each
    node's memory that can be reached); the first failure raised after."""
    failed = None
    for node in connection.nodes():
        try:
            node.command(f"TRUNCATE TABLE IF EXISTS {_table(node, 'rewrite_map')}")
        except Exception as exc:  # noqa: BLE001 - raised once the others are emptied
            failed = failed or exc
    if failed is not None:
        raise failed


def _last_activity_again(connection, name: str) -> None:
    """The endpoint's last activity of the clients a day moved and of those they moved to (the
    map's), made again from the records."""
    moved = " OR ".join(f"isNotNull({_kept_of(connection, kind, 'client')})" for kind in (_CLIENT, _NEW_CLIENT))
    which = f"endpoint = {{endpoint:String}} AND ({moved})"
    derived.last_activity_again(connection, which, {"endpoint": name})


def _move_entries(connection, endpoint: int, name: str, moved: dict[str, str], rules: dict, key) -> None:
    """Client entries for the client ids records moved to; those moved from that have no record
    left retired into them, as the SQL store's rewrite does (`moved`: {old: kept})."""
    rewrites.entries(endpoint, set(moved.values()))
    still = {
        row[0]
        for row in connection.rows(
            f"SELECT DISTINCT client FROM {_table(connection, 'last_activity')} "
            f"WHERE endpoint = {{endpoint:String}} AND isNotNull({_kept_of(connection, _CLIENT, 'client')})",
            {"endpoint": name},
        )
    }
    gone = sorted(set(moved) - still)
    for part in range(0, len(gone), 500):
        names = gone[part : part + 500]
        rows = query(
            "SELECT id, endpoint, client_id, ip, ip_ts FROM client WHERE endpoint = ? AND unlogged IS NULL"
            f" AND client_id IN ({placeholders(len(names))})",
            [endpoint, *names],
        ).fetchall()
        for entry, at, client_id, ip, ip_ts in rows:
            rewrites.retire(entry, at, client_id, ip, ip_ts, rules, key)


def _coarser_names(connection, name: str, rules: dict, after: int, upto: int) -> None:
    """The endpoint's first-seen names last asked in (after, upto], as the question is now kept,
    as models.privacy.rewrites._coarser_names: a reduced name takes their times, dropped they go;
    the rows over all endpoints ('') of those names made anew from every endpoint's."""
    if rules["question"] == privacy.KEEP:
        return
    seen = _table(connection, "names_seen")
    rows = connection.rows(
        f"SELECT question, toUnixTimestamp64Milli(min(first)), toUnixTimestamp64Milli(max(last)) AS latest "
        f"FROM {seen} WHERE endpoint = {{endpoint:String}} GROUP BY question "
        "HAVING latest > {after:Int64} AND latest <= {upto:Int64}",
        {"endpoint": name, "after": after, "upto": min(upto, _LATEST_MS)},
    )
    spans, mapped = {}, []
    for question, first, last in rows:
        kept = privacy.question_kept(question, rules)
        if kept == question:
            continue
        mapped.append((_QUESTION, question, kept))
        if kept:
            mapped.append((_NEW_QUESTION, kept, kept))
            span = spans.setdefault(kept, [first, last])
            span[0], span[1] = min(span[0], first), max(span[1], last)
    if not mapped:
        return
    try:
        _put(connection, mapped)
        old = f"isNotNull({_kept_of(connection, _QUESTION, 'question')})"
        # The kept names in before the old ones go (a kept name is never an old one: keeping is
        # idempotent), so that a read between the two finds the names' times.
        connection.insert(
            seen,
            derived.SIGHTING,
            [(name, kept, registrable_domain(kept), first, last) for kept, (first, last) in spans.items()],
            times=("first", "last"),
        )
        changed = tables.changing(connection.target, "names_seen")
        connection.command(f"DELETE FROM {changed} WHERE endpoint = {{endpoint:String}} AND {old}", {"endpoint": name})
        which = f"({old} OR isNotNull({_kept_of(connection, _NEW_QUESTION, 'question')}))"
        derived.names_everywhere_again(connection, which)
    finally:
        _empty_map(connection)
