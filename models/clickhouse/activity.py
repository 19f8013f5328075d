"""Reading records back from ClickHouse as the log's rows: the filters as a ClickHouse condition,
and a page of the log (the same rows, in the same order, as models.clients.activity's)."""

from catalogue import BOOLEAN, FIELDS_BY_SQL, INTEGER, NUMBER, TERM
from models.clickhouse import numbers, tables
from models.clickhouse.tables import RECORD_COLUMNS
from models.clients.activity import RecordRow
from models.records.filters import Filters
from models.runtime.clock import request_now_ms
from models.runtime.config import DAY_MS

_PARAMETER_TYPES = {INTEGER: "Array(Int64)", NUMBER: "Array(Float64)", BOOLEAN: "Array(Bool)"}
# A RecordRow's columns as ClickHouse selects them (the time as epoch milliseconds).
_SELECTED = ", ".join("toUnixTimestamp64Milli(ts)" if column == "ts" else column for column in RecordRow._fields)
_TS_AT = RecordRow._fields.index("ts")
assert RecordRow._fields[0] == "id", "a row's number comes first"


# Strings ClickHouse keeps as '' for unknown, which a RecordRow holds as None (as the SQL store's);
# a question is never unknown: '' is one a privacy setting dropped, and so is its domain.
_STRINGS_AT = [
    i
    for i, column in enumerate(RecordRow._fields)
    if column not in ("id", "question", "registrable_domain") and FIELDS_BY_SQL[column].storage == TERM
]
# Numbers ClickHouse's JSON writes without a fraction when they have none (80.0 as 80).
_NUMBERS_AT = [
    i for i, column in enumerate(RecordRow._fields) if column != "id" and FIELDS_BY_SQL[column].storage == NUMBER
]
assert set(RecordRow._fields) <= set(RECORD_COLUMNS), "every column a row shows is a column of the records"


def condition(filters: Filters, connection=None) -> tuple[str, dict]:
    """(a ClickHouse condition on the records, its parameters) for `filters`: of the records
    committed (numbered up to the counter's top: a batch is in ClickHouse a moment before its
    transaction commits, and one whose transaction failed is erased after). Given the
    `connection`, a search that finds few names asks for those (`named`)."""
    window, params = _window(filters, "ts", "ts")
    parts, params = ["id <= {committed:UInt64}", *window], {"committed": numbers.top(), **params}
    for i, (column, values) in enumerate(sorted(filters.values.items())):
        if values:
            kind = _PARAMETER_TYPES.get(FIELDS_BY_SQL[column].storage, "Array(String)")
            parts.append(f"{column} IN {{v{i}:{kind}}}")
            params[f"v{i}"] = list(values)
    if filters.endpoint_limit is not None:
        parts.append("endpoint IN {allowed:Array(String)}")
        params["allowed"] = sorted(filters.endpoint_limit)
    if filters.search:
        found = named(connection, filters) if connection is not None else None
        if found is not None:
            parts.append("question IN {named:Array(String)}")
            params["named"] = found
        else:
            search, texts = _search(filters.search, filters.search_mode)
            parts.append(search)
            params.update(texts)
    return " AND ".join(parts), params


# A search that finds at most this many names in the window is asked by them: the records'
# bloom filter on the question skips every granule holding none (models/clickhouse/tables.py).
# One finding more matches the text on every record it reads instead: names that many are
# in most granules, and a page fills from its first stretch.
NAMED_AT_MOST = 1_000


def named(connection, filters: Filters) -> list[str] | None:
    """The names the search finds among those the window's records may hold, when at most
    NAMED_AT_MOST (None: more, or `excludes`, which finds most names). From `names_seen`: every
    record's name was sighted, from its first record to its last, when it went in (its view);
    a privacy rewrite since may have made it its registrable domain, which the sighting holds
    too, or '', which a search finds or not whatever was sighted (docs/clickhouse.md "A search
    finds its names first")."""
    if filters.search_mode == "excludes":
        return None
    search, params = _search(filters.search, filters.search_mode, "name")
    where, bounds = _window(filters, "last", "first")
    params.update(bounds)
    endpoints = filters.values.get("endpoint") or (sorted(filters.endpoint_limit) if filters.endpoint_limit else None)
    if endpoints:
        where.append("endpoint IN {endpoints:Array(String)}")
        params["endpoints"] = list(endpoints)
    else:
        where.append("endpoint = ''")
    # '' whenever the search finds it: a name dropped by a rewrite may have no sighting left.
    found = connection.rows(
        f"SELECT DISTINCT name FROM (SELECT name FROM {connection.target.database}.names_seen "
        f"ARRAY JOIN [question, registrable_domain] AS name WHERE {' AND '.join(where)} UNION ALL SELECT '' AS name) "
        f"WHERE {search} LIMIT {NAMED_AT_MOST + 1}",
        params,
    )
    return None if len(found) > NAMED_AT_MOST else [name for (name,) in found]


def _window(filters: Filters, until: str, since: str) -> tuple[list[str], dict]:
    """(conditions, parameters) that the time column `until` is not before the window's start,
    and `since` not after its end."""
    parts, params = [], {}
    if filters.start_ms is not None:
        parts.append(f"{until} >= fromUnixTimestamp64Milli({{start:Int64}})")
        params["start"] = filters.start_ms
    if filters.end_ms is not None:
        parts.append(f"{since} <= fromUnixTimestamp64Milli({{end:Int64}})")
        params["end"] = filters.end_ms
    return parts, params


def _search(text: str, mode: str, column: str = "question") -> tuple[str, dict]:
    """The question search with the meaning the SQL store gives it (models.records.filters.
    name_pattern: the text lowered by Python, then compared ignoring the case of ASCII letters
    only, `apex` the name itself or a name ending in "." and it), in ClickHouse's own string
    functions, whose `lower` folds ASCII letters only; RE2 (`match`) runs only `regex`, as its
    case-folding character classes cost 1.5-3 times these (docs/clickhouse.md)."""
    if mode == "regex":
        return f"match({column}, {{pattern:String}})", {"pattern": text}
    named = {"text": text.lower()}
    if mode == "apex":
        return f"({column} = {{text:String}} OR endsWith(lower({column}), concat('.', {{text:String}})))", named
    if mode in ("startsWith", "endsWith"):
        return f"{mode}(lower({column}), {{text:String}})", named
    return f"position(lower({column}), {{text:String}}) {'=' if mode == 'excludes' else '>'} 0", named


def page_records(connection, filters: Filters, page: int, page_size: int, descending: bool = True) -> list[RecordRow]:
    """One page of the log, ordered by (ts, id), newest first unless ascending. ClickHouse
    sorts every record of the time it is given for a page (a 30-day page 0 at 1M: 31 ms; its
    newest day alone: 10 ms, BENCHMARKS.md), so a page is asked of the window in stretches from
    its newest end (its oldest, oldest first, when it has a start): the first as wide as holds
    some 30,000 of the store's records (`_first_width`), then each as wide as should hold what
    is still needed by what the last one held. The stretches do not overlap, so a page that
    needs the whole window reads it once, and one its newest hours fill reads those alone,
    whatever the store holds beyond them. A later page counts the records of each stretch
    until it reaches the stretch its first record is in, which it reads from there: page 1,000
    of an endpoint's month at 100M counted a few hours of it instead of sorting it all (1,018
    ms, BENCHMARKS.md). The statements see the same records (`condition`: those committed)."""
    where, params = condition(filters, connection)
    order = "DESC" if descending else "ASC"
    table = f"{connection.target.database}.records"
    select = f"SELECT {_SELECTED} FROM {table} WHERE {where}"
    tail = f" ORDER BY ts {order}, id {order} LIMIT {{most:UInt64}} OFFSET {{skip:UInt64}}"
    edge, span = _edge(filters, descending)
    # (from no edge the one stretch is the whole window: no width to find)
    got, width, walked = [], _first_width(connection, filters, span) if edge is not None else 0, 0
    skip = page * page_size  # the records of the window before the page, not passed yet
    while len(got) < page_size and walked is not None:
        within, bounds = _stretch(edge, walked, width, span, descending)
        named = {**params, **bounds}
        if skip and edge is not None:
            (held,) = connection.rows(f"SELECT count() FROM {table} WHERE {where}{within}", named)[0]
            if held <= skip:  # the page starts past this stretch
                skip -= held
                walked, width = _next(walked, width, span, skip + page_size, held)
                continue
        rows = connection.rows(select + within + tail, {**named, "most": page_size - len(got), "skip": skip})
        got.extend(_row(row) for row in rows)
        walked, width = _next(walked, width, span, page_size - len(got), len(rows))
        skip = 0
    return got


# The records of the store the first stretch of a page should hold: a filter that leaves one
# record in 300 fills a page of 100 from it, and reading it costs a few milliseconds.
_FIRST_RECORDS = 30_000
# A window with no start, newest first, is asked in stretches up to this far; the last one
# reaches back to the oldest record.
_OPEN_SPAN_MS = 366 * DAY_MS
_SHORTEST_STRETCH_MS = 60_000


def _edge(filters: Filters, descending: bool) -> tuple[int | None, int]:
    """(where the stretches start: the window's end newest first, its start oldest first, or
    None for a window with no start oldest first; how far they go: the stretch that reaches it
    is the last, and the only one from no edge)."""
    if filters.start_ms is None and not descending:
        return None, 0
    end = filters.end_ms if filters.end_ms is not None else request_now_ms()
    span = _OPEN_SPAN_MS if filters.start_ms is None else end - filters.start_ms + 1
    return (end + 1 if descending else filters.start_ms), span


def _first_width(connection, filters: Filters, span: int) -> int:
    """How wide a stretch holds _FIRST_RECORDS of the store's records, whatever the filters
    leave, by the parts of the records table the window's days have (their rows and their
    times, which ClickHouse keeps beside each part: no record is read). On a cluster these are
    one shard's parts, so the stretch is as much wider as there are shards."""
    ((rows, earliest, latest),) = connection.rows(
        "SELECT sum(rows), toUnixTimestamp(min(min_time)), toUnixTimestamp(max(max_time)) FROM system.parts "
        "WHERE database = {database:String} AND table = {table:String} AND active "
        "AND max_time >= toDateTime(intDiv({start:Int64}, 1000)) AND min_time <= toDateTime(intDiv({end:Int64}, 1000))",
        {
            "database": connection.target.database,
            "table": tables.local(connection.target, "records"),
            "start": filters.start_ms or 0,
            "end": filters.end_ms if filters.end_ms is not None else request_now_ms(),
        },
    )
    held = max(1_000, (latest - earliest + 1) * 1_000) if rows else span
    return max(_SHORTEST_STRETCH_MS, min(span, held * _FIRST_RECORDS // max(rows, 1)))


def _stretch(edge, walked: int, width: int, span: int, descending: bool) -> tuple[str, dict]:
    """(the condition on ts of the stretch `walked` from the edge and `width` wide, with its
    parameters): the last one reaches to the window's far end, whatever its width."""
    if edge is None:
        return "", {}
    sign = -1 if descending else 1
    newer, older = ("ts < ", "ts >= ") if descending else ("ts >= ", "ts < ")
    condition = f" AND {newer}fromUnixTimestamp64Milli({{near:Int64}})" if walked else ""
    if walked + width < span:
        condition += f" AND {older}fromUnixTimestamp64Milli({{far:Int64}})"
    return condition, {"near": edge + sign * walked, "far": edge + sign * (walked + width)}


def _next(walked: int, width: int, span: int, needed: int, held: int) -> tuple[int | None, int]:
    """(how far the walk is from the edge after this stretch, None once it has reached the
    far end; the next stretch's width: as wide as should hold the records still `needed` by the
    `held` of this one, a quarter more, at least twice and at most sixteen times this one)."""
    walked += width
    if walked >= span:
        return None, width
    return walked, min(width * 16, max(width * 2, width * needed * 5 // (4 * max(held, 1))))


def iter_batches(connection, filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as RecordRows (texts), a list per batch, memory flat, in the order
    of models.clients.activity.iter_raw_batches (a record deleted before its step reads it is
    left out)."""
    table = f"{connection.target.database}.records"

    def take(within: str, named: dict, order: str):
        rows = connection.rows(
            f"SELECT {_SELECTED} FROM {table} WHERE {within} ORDER BY ts {order}, id {order} LIMIT {{batch:UInt64}}",
            named,
        )
        return [_row(row) for row in rows], len(rows), (rows[-1][_TS_AT], rows[-1][0]) if rows else None

    yield from walk(connection, *condition(filters, connection), descending, batch_size, take)


# The first and last time (ms) of the records a condition selects, and how many: where a walk goes.
BOUNDS = "toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)), count()"


def walk(connection, where: str, params: dict, descending: bool, batch_size: int, take, bounds=None):
    """What `take` reads of every record `where` selects (a condition(): the records committed
    when it was made), in (ts, id) order, at most `batch_size` records a step. Each step is a
    slice of time alone (the records are ordered by time within an endpoint), as wide as should
    hold a batch: the span the last full batch took, or the last slice's width scaled by what
    it held. Past a full batch the walk goes on from its last record, by (ts, id). (A cursor
    over the whole window read all of it again at every step: 1M records in batches of 5,000
    took 200 statements over the whole window.)

    `take(within, named, order)`: the step's records, those the condition `within` selects
    with the parameters `named` (the first `named["batch"]` of them by ts and id, `order` ASC
    or DESC), as (what it hands on, how many records, the time (ms) and number of the last);
    what it hands on is yielded when it holds any. `bounds`: the BOUNDS of the records `where`
    selects, when the caller has them."""
    table = f"{connection.target.database}.records"
    low, high, count = bounds or connection.rows(f"SELECT {BOUNDS} FROM {table} WHERE {where}", params)[0]
    if not count:
        return
    order, past = ("DESC", "<") if descending else ("ASC", ">")
    inside = "ts >= fromUnixTimestamp64Milli({slice_from:Int64}) AND ts < fromUnixTimestamp64Milli({slice_to:Int64})"
    seek = f" AND (ts, id) {past} (fromUnixTimestamp64Milli({{at:Int64}}), {{at_id:UInt64}})"
    width = max(1, (high - low + 1) * batch_size // count)
    done = high + 1 if descending else low  # the edge of the time walked (the last record's ms: the cursor's)
    after = None  # the last record handed on, once a batch was full
    while low < done if descending else done <= high:
        edges = (max(low, done - width), done) if descending else (done, min(high + 1, done + width))
        named = {**params, "slice_from": edges[0], "slice_to": edges[1], "batch": batch_size}
        if after:
            named.update(at=after[0], at_id=after[1])
        got, held, last = take(f"{where} AND {inside}{seek if after else ''}", named, order)
        if held:
            yield got
        if held == batch_size:
            after = last
            width = max(1, done - after[0] if descending else after[0] - done + 1)
            done = after[0] + 1 if descending else after[0]
        else:
            done = edges[0] if descending else edges[1]
            # Growing at most eightfold: an empty stretch says little of what follows it.
            width = max(1, min(width * 8, width * batch_size // max(held, 1)))


def texts(storage: str, values) -> dict:
    """The text of each value a RecordRow of this store holds: the value itself (the export's
    encoder asks the SQL store's rows for the texts of their ids)."""
    return {value: value for value in values}


def records_after(connection, filters: Filters, last_id: int, limit: int = 500, scan: int = 20_000):
    """Matching records among the numbers (last_id, last_id + scan], lowest first, and the
    number the next call starts after, as models.clients.activity.records_after: numbers are
    handed out in the writers' turn and the counter moves once ClickHouse has a batch
    (models/clickhouse/numbers.py), so nothing at or below the top can still arrive."""
    bound = min(last_id + scan, numbers.top())
    if bound <= last_id:
        return [], last_id
    where, params = condition(filters)
    rows = connection.rows(
        f"SELECT {_SELECTED} FROM {connection.target.database}.records "
        f"WHERE id > {{after:UInt64}} AND id <= {{bound:UInt64}} AND {where} ORDER BY id LIMIT {{most:UInt64}}",
        {**params, "after": last_id, "bound": bound, "most": limit},
    )
    return [_row(row) for row in rows], rows[-1][0] if len(rows) == limit else bound


def _row(values: tuple) -> RecordRow:
    values = list(values)
    for at in _STRINGS_AT:
        if values[at] == "":
            values[at] = None
    for at in _NUMBERS_AT:
        if values[at] is not None:
            values[at] = float(values[at])
    return RecordRow(*values)
