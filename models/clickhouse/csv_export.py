"""The CSV export written by ClickHouse itself: each record's line made in the statement that
reads it, the same bytes as schemas/csv_format.py writes from the SQL store's rows (the Python
encoder was three quarters of an export from ClickHouse: BENCHMARKS.md)."""

from catalogue import BOOLEAN, CSV_FIELDS, CSV_FORMULA_START, INTEGER, JSON_FIELDS, NUMBER, TIME
from models.clickhouse import activity
from models.records.filters import Filters


def _literal(text: str) -> str:
    """`text` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\t", "\\t").replace("\r", "\\r") + "'"


def _quoted(expression: str) -> str:
    """RFC 4180: a cell holding a comma, quote or line break is quoted, its quotes doubled."""
    return (
        f"if(multiSearchAny({expression}, [',', '\"', '\\r', '\\n']), "
        f"concat('\"', replaceAll({expression}, '\"', '\"\"'), '\"'), {expression})"
    )


def _text(column: str) -> str:
    """A text cell: '' for unknown, and a leading "'" where a spreadsheet would see a formula."""
    starts = ", ".join(_literal(start) for start in CSV_FORMULA_START)
    return _quoted(f"if(has([{starts}], substring({column}, 1, 1)), concat('''', {column}), {column})")


def _number(column: str) -> str:
    """Python's repr of a float, for those `lines` lets ClickHouse write (_plain): ClickHouse
    writes the same shortest digits, and without an exponent there too, but a whole number
    without repr's ".0"."""
    plain = f"toString({column})"
    whole = f"if(position({plain}, '.') > 0, {plain}, concat({plain}, '.0'))"
    # -0.0 comes back from the SQL store as 0.0.
    return f"multiIf(isNull({column}), '', {column} = 0, '0.0', {whole})"


def _plain(column: str) -> str:
    """The numbers whose repr has no exponent (0, and from 1e-4 to 1e16), or unknown."""
    return f"(isNull({column}) OR {column} = 0 OR (abs({column}) >= 1e-4 AND abs({column}) < 1e16))"


def _cell(field) -> str:
    column = field.sql
    if field.storage == TIME:
        return f"concat(replaceOne(toString({column}), ' ', 'T'), 'Z')"
    if field.storage == INTEGER:
        return f"ifNull(toString({column}), '')"
    if field.storage == NUMBER:
        return _number(column)
    if field.storage == BOOLEAN:
        return f"multiIf(isNull({column}), '', {column}, 'true', 'false')"
    if field.name in JSON_FIELDS:
        ips = f"arrayFlatten(arrayMap(a -> JSONExtract(a, 'ips', 'Array(String)'), JSONExtractArrayRaw({column})))"
        return _quoted(f"arrayStringConcat({ips}, ';')")
    return _text(column)


# A record's line (its "\r\n" included) as ClickHouse makes it.
LINE = "concat(" + ", ',', ".join(_cell(field) for field in CSV_FIELDS) + ", '\\r\\n')"


_NUMBERS = [field.sql for field in CSV_FIELDS if field.storage == NUMBER]
assert _NUMBERS, "lines() asks whether any number needs an exponent"


# Records a step: a statement sorts its lines (ClickHouse then writes them as one text), and each
# statement reads most of the granules of the days it touches, as the records are ordered by
# endpoint first. At 1M, in this process: 297,000 lines/s at 40,000 a step, 401,000 at 100,000,
# 510,000 at 200,000 (BENCHMARKS.md); a step's text is some 35 MB.
_BATCH = 200_000
# ClickHouse would make each line after sorting the records, on one thread; before, the threads
# share the work (1M lines sorted: 4.3 s made after, 1.8 s before).
_LINES_FIRST = {"query_plan_execute_functions_after_sorting": 0}


def lines(connection, filters: Filters, descending: bool, batch_size: int = _BATCH):
    """The export's lines as UTF-8, a text per step of the walk; None when a number of the
    window is one whose repr has an exponent (rare: the caller then writes the export from the
    rows)."""
    where, params = activity.condition(filters, connection)
    table = f"{connection.target.database}.records"
    others = " OR ".join(f"NOT {_plain(column)}" for column in _NUMBERS)
    # One statement for where the walk goes and whether the window holds such a number.
    ((*bounds, exponent),) = connection.rows(
        f"SELECT {activity.BOUNDS}, countIf({others}) > 0 FROM {table} WHERE {where}", params
    )
    if exponent:
        return None

    def take(within: str, named: dict, order: str):
        # Which records the step takes, from their times and numbers alone; then their lines,
        # as ClickHouse writes them.
        last = f"{'min' if order == 'DESC' else 'max'}((ts, id))"
        ((held, ms, number),) = connection.rows(
            f"SELECT count(), toUnixTimestamp64Milli({last}.1), {last}.2 FROM (SELECT ts, id FROM {table} "
            f"WHERE {within} ORDER BY ts {order}, id {order} LIMIT {{batch:UInt64}})",
            named,
        )
        if not held:
            return b"", 0, None
        upto = ""
        if held == named["batch"]:
            reached = ">=" if order == "DESC" else "<="
            upto = f" AND (ts, id) {reached} (fromUnixTimestamp64Milli({{to:Int64}}), {{to_id:UInt64}})"
        text = connection.text(
            f"SELECT {LINE} FROM {table} WHERE {within}{upto} ORDER BY ts {order}, id {order}",
            {**named, "to": ms, "to_id": number},
            _LINES_FIRST,
        )
        return text, held, (ms, number)

    return _pieces(activity.walk(connection, where, params, descending, batch_size, take, bounds))


# The size a step's text is handed on in: the response streams, and each piece ends a line.
_PIECE = 1 << 18


def _pieces(texts):
    for text in texts:
        start = 0
        while start < len(text):
            end = len(text)
            if end - start > _PIECE:
                cut = text.rfind(b"\r\n", start, start + _PIECE)
                if cut < 0:  # a line longer than a piece
                    cut = text.find(b"\r\n", start + _PIECE)
                end = cut + 2 if cut >= 0 else end
            yield text[start:end]
            start = end
