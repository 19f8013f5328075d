"""The CSV form of QueryData: the export's columns, and reading an export back in."""

import json
from operator import itemgetter

from catalogue import BOOLEAN, CLIENT, CSV_FIELDS, CSV_FORMULA_START, ENDPOINT, INTEGER, JSON_FIELDS, NUMBER, TERM, TIME

from .datetimes import format_ms

# The exported fields (catalogue.CSV_FIELDS): one column per QueryData scalar field, the geoip
# fields flattened, answers as ";"-joined IPs.
CSV_COLUMNS = tuple(field.csv for field in CSV_FIELDS)
NUMERIC = tuple(field.csv for field in CSV_FIELDS if field.storage in (INTEGER, NUMBER))


class _Numbers(dict):
    """Cells of integer values, made on first sight (a column holds few distinct ones)."""

    def __missing__(self, value):
        cell = self[value] = str(value)
        return cell


def _number_cell(value) -> str:
    return "" if value is None else repr(value)


class CsvEncoder:
    """Export lines straight from the store's raw rows (models.iter_raw_batches). This is the
    hot loop of the export, so every string is escaped and quoted once per distinct value, and
    a line is a join of cached cells, by a function made from the catalogue once per export."""

    def __init__(self, row_fields, value_texts):
        self._value_texts = value_texts  # (storage, stored ids) -> {id: text}
        # Cells by stored id, one cache per kind of id: quoted as CSV wants them.
        self._cells = {TERM: {None: ""}, ENDPOINT: {}, CLIENT: {}, "ips": {None: ""}}
        self._looked_up = []  # (row position, cache kind, storage) of every cached column
        parts = []
        namespace = {"format_ms": format_ms, "number": _number_cell, "ints": _Numbers({None: ""})}
        namespace.update(booleans={None: "", 0: "false", 1: "true"}, **self._cells)
        for field in CSV_FIELDS:
            at = row_fields.index(field.sql)
            if field.storage == TIME:
                parts.append(f"format_ms(row[{at}])")
            elif field.storage == INTEGER:
                parts.append(f"ints[row[{at}]]")
            elif field.storage == NUMBER:
                parts.append(f"number(row[{at}])")
            elif field.storage == BOOLEAN:
                parts.append(f"booleans[row[{at}]]")
            else:
                kind = "ips" if field.name in JSON_FIELDS else field.storage
                parts.append(f"{kind}[row[{at}]]")
                self._looked_up.append((at, kind, field.storage))
        self._line = eval(f"lambda row: ','.join(({', '.join(parts)},)) + '\\r\\n'", namespace)  # noqa: S307

    def header(self) -> str:
        return ",".join(CSV_COLUMNS) + "\r\n"

    def lines(self, rows) -> str:
        """The CSV text of a batch of raw rows."""
        rows = self._learn(rows)
        return "".join(map(self._line, rows))

    def _learn(self, rows) -> list:
        """Cache the cells of the batch's values not met before; the rows left to export:
        those of client entries or strings deleted since the rows were read are left out (a
        record whole or not at all)."""
        if not rows:
            return rows
        gone = False
        for at, kind, storage in self._looked_up:
            cells = self._cells[kind]
            # In C (a set comprehension's loop per row cost a third of the export).
            missing = set(map(itemgetter(at), rows)).difference(cells)
            if not missing:
                continue
            texts = self._value_texts(storage, missing)
            for ident, text in texts.items():
                if kind == "ips":
                    cells[ident] = _quoted(";".join(ip for answer in json.loads(text) for ip in answer.get("ips", ())))
                else:
                    cells[ident] = _quoted(_cell(text))
            gone = gone or len(texts) < len(missing)
        if not gone:
            return rows
        return [row for row in rows if all(row[at] in self._cells[kind] for at, kind, _ in self._looked_up)]


def _quoted(text: str) -> str:
    """RFC 4180: a field holding a comma, quote or line break is quoted, quotes doubled."""
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _cell(value: str) -> str:
    if value.startswith(CSV_FORMULA_START):
        return "'" + value
    return value


def record_from_csv(row: dict) -> dict:
    """A wire record from an export row (a csv.DictReader dict)."""
    record: dict = {}
    for field in CSV_FIELDS:
        if field.derived_from:  # the service derives it again
            continue
        value = _uncell(row.get(field.csv))
        if value in ("", None):
            continue
        if field.csv in NUMERIC:
            try:
                value = int(value) if field.storage == INTEGER else float(value)
            except ValueError:
                pass  # left for the record validator to reject with its name
        elif field.storage == BOOLEAN:
            value = {"true": True, "false": False}.get(value, value)
        elif field.name in JSON_FIELDS:
            value = [{"ips": value.split(";")}]
        if len(field.path) == 1:
            record[field.path[0]] = value
        else:
            record.setdefault(field.path[0], {})[field.path[1]] = value
    return record


def _uncell(value):
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value
