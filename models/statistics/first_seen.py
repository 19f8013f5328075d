"""When each question name was first and last asked on each endpoint: newly observed names.

One row per (name, endpoint), and one per name over all endpoints (endpoint 0, as in the
rollups: the question asked without an endpoint filter reads only those), kept like the
statistics (past the records' horizon, until the name was last asked before the statistics
horizon), so "names first seen this week" does not need the records of every earlier week.
Noted behind the records, with the rollups (models/statistics/counting.py); reads add the records not
counted yet. A client's newly observed names come from its records.
"""

from dataclasses import replace

from models.engine.database import db, insert_rows, query
from models.engine.sql import placeholders, statement_parts
from models.records import blocks, counted, thawing
from models.records.domains import TABLE as DOMAINS
from models.records.filters import Resolved, column_sql

_INSERT = "INSERT INTO name_seen (term, endpoint, first, last)"
_WIDEN = (
    "ON CONFLICT (endpoint, term) DO UPDATE SET"
    " first = CASE WHEN excluded.first < name_seen.first THEN excluded.first ELSE name_seen.first END,"
    " last = CASE WHEN excluded.last > name_seen.last THEN excluded.last ELSE name_seen.last END"
)


def spans(endpoints, questions, stamps) -> dict[tuple, tuple]:
    """{(endpoint, question): (first ts, last ts)} of records given column by column (ids, as
    stored), with endpoint None for all endpoints."""
    # In time order, a dict keeps each key's last time, and the reversed order its first: made
    # in C (a batch is nearly in time order already, so the sort is almost a pass), where a
    # loop comparing each record's time cost ~4 us a record.
    order = sorted(range(len(stamps)), key=stamps.__getitem__)
    times = [stamps[i] for i in order]
    found = {}
    for keys in ([(endpoints[i], questions[i]) for i in order], [(None, questions[i]) for i in order]):
        first = dict(zip(reversed(keys), reversed(times), strict=True))
        found.update((key, (first[key], last)) for key, last in dict(zip(keys, times, strict=True)).items())
    return found


def note_spans(rows: list[tuple]) -> None:
    """Widen (or add) the spans of names: rows of (term id, endpoint id or 0, first, last)."""
    insert_rows(_INSERT, 4, rows, _WIDEN)


def note_stored_names(endpoint_ids: list | None = None) -> None:
    """Note every name of the stored records (of `endpoint_ids`; None: all) not noted yet, and
    the rows over all endpoints: for a database made before the table existed, or after a
    deletion forgot some."""
    where = f"WHERE endpoint IN ({placeholders(len(endpoint_ids))})" if endpoint_ids else ""
    query(
        "INSERT INTO name_seen (term, endpoint, first, last)"
        f" SELECT question, endpoint, MIN(ts), MAX(ts) FROM record {where} GROUP BY question, endpoint"
        " ON CONFLICT (endpoint, term) DO NOTHING",
        list(endpoint_ids or []),
    )
    scope = endpoint_ids or None
    for run in thawing.runs(scope, None, None, False):  # and of the frozen ones, a run at a time
        thawing.stage(run, blocks.KEY)
        query(
            f"{_INSERT} SELECT question, endpoint, MIN(ts), MAX(ts) FROM {thawing.STAGING}"
            f" GROUP BY question, endpoint {_WIDEN}"
        )
    _note_everywhere()


def _note_everywhere() -> None:
    """The rows over all endpoints missing, from the per-endpoint ones."""
    query(
        "INSERT INTO name_seen (term, endpoint, first, last)"
        " SELECT term, 0, MIN(first), MAX(last) FROM name_seen WHERE endpoint <> 0 GROUP BY term"
        " ON CONFLICT (endpoint, term) DO NOTHING"
    )


def renote_everywhere(terms: list[int]) -> None:
    """The rows over all endpoints of `terms` made anew from the endpoints' rows (a name one
    endpoint no longer keeps leaves them when no other endpoint has it)."""
    for part in statement_parts(terms, 500):
        marks = placeholders(len(part))
        query(f"DELETE FROM name_seen WHERE endpoint = 0 AND term IN ({marks})", part)
        query(
            "INSERT INTO name_seen (term, endpoint, first, last)"
            f" SELECT term, 0, MIN(first), MAX(last) FROM name_seen WHERE endpoint <> 0 AND term IN ({marks})"
            " GROUP BY term",
            part,
        )


def forget(end_ms: int | None, endpoint_ids: list | None = None) -> None:
    """A deletion of whole endpoints' records (`endpoint_ids`; None: everyone's) up to `end_ms`
    (None: all): the names first seen up to then are noted again from the records left, and
    over all endpoints from what every endpoint still remembers."""
    if endpoint_ids is not None and not endpoint_ids:
        return
    up_to = " AND first <= ?" if end_ms is not None else ""
    bound = [end_ms] if end_ms is not None else []
    if endpoint_ids is None:
        query(f"DELETE FROM name_seen WHERE 1 = 1{up_to}", bound)
    else:
        query(
            f"DELETE FROM name_seen WHERE endpoint IN ({placeholders(len(endpoint_ids))}){up_to}", endpoint_ids + bound
        )
        query(f"DELETE FROM name_seen WHERE endpoint = 0{up_to}", bound)
    if end_ms is not None:
        note_stored_names(endpoint_ids)
    elif endpoint_ids is not None:
        _note_everywhere()


def expire(before_ms: int) -> int:
    """Forget the names last asked before `before_ms` (the statistics horizon): asked again,
    they count as new."""
    return query("DELETE FROM name_seen WHERE last < ?", [before_ms]).rowcount


def newly_seen(resolved: Resolved, column, limit: int) -> list[tuple]:
    """The names (column question, or a field derived from it) whose first appearance falls in
    the window, newest first: [(stored value, first ts)]. On the endpoints the filters allow,
    or, when they name clients, for those clients (from their records)."""
    filters = resolved.filters
    start, end = filters.start_ms, filters.end_ms
    derived = bool(column.derived_from)
    if filters.values.get("client"):
        # A client's first time: the earliest of its records, read from the records.
        values = {sql: filters.values[sql] for sql in ("endpoint", "client") if sql in filters.values}
        by_client = Resolved(replace(filters, values=values, search=None))
        condition, params = by_client.where(None, end)
        first = f"SELECT {column_sql(column)} AS v, MIN(r.ts) AS f FROM {{source}} r WHERE {condition} GROUP BY 1"
        thawing.start_counts()
        # Its condition is on clients, endpoints and time alone: a client's first record of
        # each name decides (an endpoint's entries are its own).
        hint = by_client.hint()  # {"client": entries}: the filters name clients
        if derived:  # the names' domains from SQL: the earliest record of each name staged
            staged = f"SELECT f AS b, v, 0 AS n FROM ({first.format(source=thawing.STAGING)}) AS s"
            earliest = ("client", "question")
            frozen = thawing.count_into(1, by_client.endpoint_ids(), None, end, staged, params, hint, earliest)
        else:  # the first times read from the blocks' columns in Python, without staging
            at = blocks.COLUMNS.index(column.sql)
            frozen = thawing.earliest_into(1, by_client.endpoint_ids(), end, hint["client"], at)
        more = f" UNION ALL SELECT v, b FROM {thawing.COUNTS} WHERE part = 1" if frozen else ""
        return query(
            f"SELECT v, MIN(f) AS f FROM ({first.format(source='record')}{more}) AS seen"
            " GROUP BY v HAVING MIN(f) >= ? ORDER BY f DESC LIMIT ?",
            [*params, start, limit],
        ).fetchall()
    endpoints = resolved.endpoint_ids()
    if endpoints is None:
        endpoints = [0]  # every endpoint: the rows kept over all of them
    elif not endpoints:
        return []
    scope = f" AND s.endpoint IN ({placeholders(len(endpoints))})"
    scope_params = list(endpoints)
    # The records not counted into the table yet (models/statistics/counting.py) are names' times too: read
    # in this statement, as the table is (one snapshot). A name a privacy setting dropped is none.
    everywhere = endpoints == [0]
    unnamed, unnamed_params = db.obj.dialect.term_in([""])
    source, condition, mark = counted.waiting_records()
    tail = (
        f"SELECT r.question AS term, r.ts AS first FROM {source} WHERE {condition}"
        f" AND r.question NOT IN (SELECT id FROM term WHERE {unnamed})"
        + ("" if everywhere else f" AND r.endpoint IN ({placeholders(len(endpoints))})")
    )
    tail_params = [*mark, *unnamed_params, *([] if everywhere else endpoints)]
    # Candidates first (the scope's names first seen in the window), then their earliest time
    # anywhere in scope: a name new on one endpoint may be old on another.
    value, waiting = ("d.domain", "d.domain") if derived else ("s.term", "t.term")
    join = f" JOIN {DOMAINS} d ON d.term = s.term" if derived else ""
    join_waiting = f" JOIN {DOMAINS} d ON d.term = t.term" if derived else ""
    candidates = (
        f"SELECT {value} FROM name_seen s{join} WHERE s.first BETWEEN ? AND ?{scope}"
        f" UNION SELECT {waiting} FROM tail t{join_waiting} WHERE t.first BETWEEN ? AND ?"
    )
    return query(
        f"WITH tail AS ({tail}) SELECT v, MIN(f) AS f FROM ("
        f"SELECT {value} AS v, s.first AS f FROM name_seen s{join} WHERE {value} IN ({candidates}){scope}"
        f" UNION ALL SELECT {waiting} AS v, t.first AS f FROM tail t{join_waiting} WHERE {waiting} IN ({candidates})"
        ") AS seen GROUP BY v HAVING MIN(f) >= ? ORDER BY f DESC LIMIT ?",
        [
            *tail_params,
            *([start, end, *scope_params, start, end] + scope_params),
            *[start, end, *scope_params, start, end],
            start,
            limit,
        ],
    ).fetchall()
