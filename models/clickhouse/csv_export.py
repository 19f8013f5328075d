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


# Rows a statement: a day's part of the records at 1M (a slice narrower than a part still reads
# most of its granules, the key ordering by endpoint first): 133,000 lines/s a statement at
# 40,000, 72,000 at 5,000 (BENCHMARKS.md). Handed on 5,000 at a time.
_BATCH = 40_000
_CHUNK = 5_000


def lines(connection, filters: Filters, descending: bool, batch_size: int = _BATCH):
    """The export's lines, a text per 5,000 records; None when a number of the window is one
    whose repr has an exponent (rare: the caller then writes the export from the rows)."""
    where, params = activity.condition(filters, connection)
    table = f"{connection.target.database}.records"
    others = " OR ".join(f"NOT {_plain(column)}" for column in _NUMBERS)
    # One statement for where the walk goes and whether the window holds such a number.
    ((*bounds, exponent),) = connection.rows(
        f"SELECT {activity.BOUNDS}, countIf({others}) > 0 FROM {table} WHERE {where}", params
    )
    if exponent:
        return None
    return _texts(activity.walk(connection, where, params, descending, LINE, batch_size, bounds))


def _texts(batches):
    for rows in batches:
        for start in range(0, len(rows), _CHUNK):
            yield "".join(row[0] for row in rows[start : start + _CHUNK])
