"""The CSV form of QueryData: the export's columns, and reading an export back in."""

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


def csv_row(record: dict) -> list:
    """One export row from a QueryData dict (as models.activity decodes it)."""
    geo = record["sourceGeoip"]
    ips = [ip for answer in record["answers"] for ip in answer.get("ips", [])]
    values = {
        **{name: record[name] for name in CSV_COLUMNS[:13]},
        "timestamp": format_ms(record["timestamp"]),
        "sourceCountry": geo["countryCode"],
        "sourceCity": geo["city"],
        "sourceIsp": geo["isp"],
        "sourceAsn": geo["asn"],
        "answers": ";".join(ips),
    }
    return [_cell(values[name]) for name in CSV_COLUMNS]


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
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
