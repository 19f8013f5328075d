"""The CSV form of QueryData: the export's columns, and reading an export back in."""

import json

from .datetimes import format_ms

CSV_COLUMNS = (
    "timestamp", "endpointId", "clientId", "profileId", "question", "rrType", "statusCode",
    "protocol", "action", "trigger", "triggerValue", "spoofTarget", "sourceIp",
    "sourceCountry", "sourceCity", "sourceIsp", "sourceAsn", "answers",
)  # fmt: skip
NUMERIC = ("action", "sourceAsn")

# A text cell starting with one of these would run as a formula in a spreadsheet; it is
# written with a leading "'". Cells starting with "'" get one too, so reading strips exactly one.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


# The CSV text columns that come straight from one interned string of the record row.
_TERM_COLUMNS = {
    "profileId": "profile",
    "question": "question",
    "rrType": "rr_type",
    "statusCode": "status",
    "protocol": "protocol",
    "trigger": "trigger_type",
    "triggerValue": "trigger_value",
    "spoofTarget": "spoof_target",
    "sourceIp": "src_ip",
    "sourceCountry": "src_country",
    "sourceCity": "src_city",
    "sourceIsp": "src_isp",
}


class CsvEncoder:
    """Export lines straight from the store's raw rows (models.iter_raw_batches). This is the
    hot loop of the export, so every string is escaped and quoted once per distinct value,
    and a line is then a join of cached cells."""

    def __init__(self, row_fields, term_values, client_names):
        at = {name: i for i, name in enumerate(row_fields)}
        self._ts, self._client = at["ts"], at["client"]
        self._action, self._asn, self._answers = at["action"], at["src_asn"], at["answers"]
        self._before_action = [at[_TERM_COLUMNS[n]] for n in CSV_COLUMNS[3:8]]  # profileId..protocol
        self._before_asn = [at[_TERM_COLUMNS[n]] for n in CSV_COLUMNS[9:16]]  # trigger..sourceIsp
        self._terms = [i for i, name in enumerate(row_fields) if name in _TERM_COLUMNS.values()] + [self._answers]
        self._term_values = term_values  # ids -> {id: string}, for ids not seen yet
        self._cells: dict = {None: ""}  # term id -> its cell, quoted as CSV wants it
        self._client_names = client_names  # client entry ids -> {id: (endpoint, client id)}
        self._clients: dict = {}  # client entry id -> its "endpoint,client" cells (this export only)
        self._ips: dict = {None: ""}  # answers term id -> ";"-joined IPs, quoted

    def header(self) -> str:
        return ",".join(CSV_COLUMNS) + "\r\n"

    def lines(self, rows) -> str:
        """The CSV text of a batch of raw rows."""
        try:
            return "".join(map(self._line, rows))
        except KeyError:  # strings not met before: look them up for the whole batch, once
            self._learn(rows)
            return "".join(map(self._line, rows))

    def _line(self, row) -> str:
        cells = self._cells
        return (
            ",".join(
                (
                    format_ms(row[self._ts]),
                    self._clients[row[self._client]],
                    *[cells[row[i]] for i in self._before_action],
                    "" if row[self._action] is None else str(row[self._action]),
                    *[cells[row[i]] for i in self._before_asn],
                    "" if row[self._asn] is None else str(row[self._asn]),
                    self._ips[row[self._answers]],
                )
            )
            + "\r\n"
        )

    def _learn(self, rows):
        new_clients = {row[self._client] for row in rows} - self._clients.keys()
        for ident, names in self._client_names(new_clients).items():
            self._clients[ident] = ",".join(_quoted(_cell(name)) for name in names)
        cells = self._cells
        missing = {row[i] for row in rows for i in self._terms} - cells.keys()
        values = self._term_values(missing)
        for term in missing:
            cells[term] = _quoted(_cell(values[term]))
        for term in {row[self._answers] for row in rows} & missing:
            ips = (ip for answer in json.loads(values[term]) for ip in answer.get("ips", ()))
            self._ips[term] = _quoted(";".join(ips))


def _quoted(text: str) -> str:
    """RFC 4180: a field holding a comma, quote or line break is quoted, quotes doubled."""
    if any(ch in text for ch in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _cell(value: str) -> str:
    if value.startswith(_FORMULA_START):
        return "'" + value
    return value


def record_from_csv(row: dict) -> dict:
    """A wire record from an export row (a csv.DictReader dict)."""
    cells = {name: _uncell(row.get(name)) for name in CSV_COLUMNS}
    record = {name: cells[name] for name in CSV_COLUMNS[:13] if cells[name] not in ("", None)}
    for name in NUMERIC:
        if cells[name] not in ("", None):
            try:
                value = int(cells[name])
            except ValueError:
                value = cells[name]  # left for the record validator to reject with its name
            if name == "action":
                record["action"] = value
            else:
                cells[name] = value
    geo = {
        "countryCode": cells["sourceCountry"] or "",
        "city": cells["sourceCity"] or "",
        "isp": cells["sourceIsp"] or "",
        "asn": cells["sourceAsn"] if cells["sourceAsn"] not in ("", None) else None,
    }
    if any(value not in ("", None) for value in geo.values()):
        record["sourceGeoip"] = geo
    if cells["answers"]:
        record["answers"] = [{"ips": cells["answers"].split(";")}]
    return record


def _uncell(value):
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value
