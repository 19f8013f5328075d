"""Reading records back from ClickHouse as the log's rows: the filters as a ClickHouse condition,
and a page of the log (the same rows, in the same order, as models.clients.activity's)."""

from catalogue import BOOLEAN, FIELDS_BY_SQL, INTEGER, NUMBER, TERM
from models.clickhouse import numbers
from models.clickhouse.tables import RECORD_COLUMNS
from models.clients.activity import RecordRow
from models.records.filters import Filters
from models.runtime.clock import request_now_ms
from models.runtime.config import DAY_MS

_PARAMETER_TYPES = {INTEGER: "Array(Int64)", NUMBER: "Array(Float64)", BOOLEAN: "Array(Bool)"}
# A RecordRow's columns as ClickHouse selects them (the time as epoch milliseconds).
_SELECTED = ", ".join("toUnixTimestamp64Milli(ts)" if column == "ts" else column for column in RecordRow._fields)


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


def condition(filters: Filters) -> tuple[str, dict]:
    """(a ClickHouse condition on the records, its parameters) for `filters`: of the records
    committed (numbered up to the counter's top: a batch is in ClickHouse a moment before its
    transaction commits, and one whose transaction failed is erased after)."""
    parts, params = ["id <= {committed:UInt64}"], {"committed": numbers.top()}
    if filters.start_ms is not None:
        parts.append("ts >= fromUnixTimestamp64Milli({start:Int64})")
        params["start"] = filters.start_ms
    if filters.end_ms is not None:
        parts.append("ts <= fromUnixTimestamp64Milli({end:Int64})")
        params["end"] = filters.end_ms
    for i, (column, values) in enumerate(sorted(filters.values.items())):
        if values:
            kind = _PARAMETER_TYPES.get(FIELDS_BY_SQL[column].storage, "Array(String)")
            parts.append(f"{column} IN {{v{i}:{kind}}}")
            params[f"v{i}"] = list(values)
    if filters.endpoint_limit is not None:
        parts.append("endpoint IN {allowed:Array(String)}")
        params["allowed"] = sorted(filters.endpoint_limit)
    if filters.search:
        search, named = _search(filters.search, filters.search_mode)
        parts.append(search)
        params.update(named)
    return " AND ".join(parts), params


def _search(text: str, mode: str) -> tuple[str, dict]:
    """The question search with the meaning the SQL store gives it (models.records.filters.
    name_pattern: the text lowered by Python, then compared ignoring the case of ASCII letters
    only, `apex` the name itself or a name ending in "." and it), in ClickHouse's own string
    functions, whose `lower` folds ASCII letters only; RE2 (`match`) runs only `regex`, as its
    case-folding character classes cost 1.5-3 times these (docs/clickhouse.md)."""
    if mode == "regex":
        return "match(question, {pattern:String})", {"pattern": text}
    named = {"text": text.lower()}
    if mode == "apex":
        return "(question = {text:String} OR endsWith(lower(question), concat('.', {text:String})))", named
    if mode in ("startsWith", "endsWith"):
        return f"{mode}(lower(question), {{text:String}})", named
    return f"position(lower(question), {{text:String}}) {'=' if mode == 'excludes' else '>'} 0", named


def page_records(connection, filters: Filters, page: int, page_size: int, descending: bool = True) -> list[RecordRow]:
    """One page of the log, ordered by (ts, id), newest first unless ascending. Newest first,
    the window's last day is asked alone first: ClickHouse sorts every day of the window it is
    given for a page (a 30-day page 0 at 1M: 31 ms; its newest day alone: 10 ms, BENCHMARKS.md),
    and a page that day fills is the window's same page, as its records come before all others."""
    where, params = condition(filters)
    order = "DESC" if descending else "ASC"
    params = {**params, "page_size": page_size, "offset": page * page_size}
    tail = f" ORDER BY ts {order}, id {order} LIMIT {{page_size:UInt64}} OFFSET {{offset:UInt64}}"
    select = f"SELECT {_SELECTED} FROM {connection.target.database}.records WHERE {where}"
    cut = _newest_day(filters) if descending else None
    if cut is not None:
        newest = " AND ts >= fromUnixTimestamp64Milli({newest:Int64})"
        rows = connection.rows(select + newest + tail, {**params, "newest": cut})
        if len(rows) == page_size:
            return [_row(row) for row in rows]
    return [_row(row) for row in connection.rows(select + tail, params)]


def _newest_day(filters: Filters) -> int | None:
    """Where the window's last day starts, or None when the window is no longer than a day."""
    cut = (filters.end_ms if filters.end_ms is not None else request_now_ms()) - DAY_MS
    return None if filters.start_ms is not None and filters.start_ms >= cut else cut


def iter_batches(connection, filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as RecordRows (texts), a list per batch, memory flat, in the order
    of models.clients.activity.iter_raw_batches (a record deleted before its step reads it is
    left out)."""
    for rows in walk(connection, *condition(filters), descending, _SELECTED, batch_size):
        yield [_row(row[:-2]) for row in rows]


def walk(connection, where: str, params: dict, descending: bool, selected: str, batch_size: int):
    """The `selected` columns of every record `where` selects (a condition(): the records
    committed when it was made), then its time (ms) and number, a list of at most `batch_size`
    per step, in (ts, id) order. Each step is a statement over a slice of time alone (the
    records are ordered by time within an endpoint), as wide as should hold a batch: the span
    the last full batch took, or the last slice's width scaled by what it held. Past a full
    batch the walk goes on from its last record, by (ts, id). (A cursor over the whole window
    read all of it again at every step: 1M records in batches of 5,000 took 200 statements
    over the whole window.)"""
    table = f"{connection.target.database}.records"
    ((low, high, count),) = connection.rows(
        f"SELECT toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)), count() FROM {table} WHERE {where}",
        params,
    )
    if not count:
        return
    order, past = ("DESC", "<") if descending else ("ASC", ">")
    inside = "ts >= fromUnixTimestamp64Milli({slice_from:Int64}) AND ts < fromUnixTimestamp64Milli({slice_to:Int64})"
    seek = f"(ts, id) {past} (fromUnixTimestamp64Milli({{at:Int64}}), {{at_id:UInt64}})"
    tail = f"ORDER BY ts {order}, id {order} LIMIT {{batch:UInt64}}"
    statements = [
        f"SELECT {selected}, toUnixTimestamp64Milli(ts), id FROM {table} WHERE {where} AND {inside}{more} {tail}"
        for more in ("", f" AND {seek}")
    ]
    width = max(1, (high - low + 1) * batch_size // count)
    done = high + 1 if descending else low  # the edge of the time walked (the last record's ms: the cursor's)
    after = None  # the last record handed on, once a batch was full
    while low < done if descending else done <= high:
        edges = (max(low, done - width), done) if descending else (done, min(high + 1, done + width))
        named = {**params, "slice_from": edges[0], "slice_to": edges[1], "batch": batch_size}
        cursor = {"at": after[0], "at_id": after[1]} if after else {}
        rows = connection.rows(statements[after is not None], {**named, **cursor})
        if rows:
            yield rows
        if len(rows) == batch_size:
            after = rows[-1][-2:]
            width = max(1, done - after[0] if descending else after[0] - done + 1)
            done = after[0] + 1 if descending else after[0]
        else:
            done = edges[0] if descending else edges[1]
            # Growing at most eightfold: an empty stretch says little of what follows it.
            width = max(1, min(width * 8, width * batch_size // max(len(rows), 1)))


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
