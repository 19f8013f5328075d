"""The SQL store's statistics carried into ClickHouse by the copy command, after its records
(docs/clickhouse.md "Moving an existing store into ClickHouse"): what its daily rollups and its
names' first and last times hold past the records copied (days whose records retention took,
clients no longer logged), and its statistics' expiry mark; then the two held to each other.

The records copied are counted in `daily_counts` by its view, so what is carried is, per day,
the SQL store's daily rollups minus what ClickHouse counts already: a run again finds no
difference and adds nothing. The SQL store's 4- and 16-day blocks are sums of its daily rows,
which it keeps: the days are carried, not the blocks."""

import hashlib
from dataclasses import dataclass

from catalogue import BOOLEAN, CLIENT, ENDPOINT, FIELDS_BY_SQL, TERM
from models.clickhouse import copying, deletion
from models.clickhouse.dims import COLUMNS, DAY_MS, DIMS, day_text, field
from models.engine.database import query, write_transaction
from models.records.domains import registrable_domain
from models.records.names import value_texts
from models.statistics import counting, rollups

_BY_ID = {dim.id: dim for dim in DIMS}
_IDS = ", ".join(str(dim.id) for dim in DIMS)
# The daily counts' fields: ClickHouse's hours and quarter hours are of the records copied, and
# the SQL store's go with its records too (nothing to carry past them).
_DAILY = {"daily": [field(dim) for dim in DIMS]}
# Names' spans sent at a time.
_NAMES_BATCH = 50_000


@dataclass(frozen=True)
class Carried:
    """What one run carried: the `days` whose counts it completed with `rows` of counts, and
    the names' spans sent (`names`)."""

    days: int
    rows: int
    names: int


def carry(connection) -> Carried:
    """Carry the statistics: the SQL store's records all counted first (those not counted yet
    are in no rollup, and ClickHouse counts them already), its names' spans, its expiry mark,
    then each day's counts that ClickHouse lacks."""
    with write_transaction():
        counting.catch_up()
    names = _carry_names(connection)
    mark = rollups.statistics_from()
    if mark is not None:
        # Also drops what the records copied from before it counted, as the SQL store's expiry did.
        deletion.expire_statistics(connection, mark)
    days = rows = 0
    for day in _days(connection, mark):
        added = _carry_day(connection, day)
        days += bool(added)
        rows += added
    return Carried(days, rows, names)


def _days(connection, mark: int | None) -> list[int]:
    """The days (since 1970) either side counts anything for, from the expiry mark on."""
    first = 0 if mark is None else mark // DAY_MS
    sql = {int(day) for (day,) in query(f"SELECT DISTINCT period FROM rollup WHERE dim IN ({_IDS})").fetchall()}
    found = connection.rows(
        f"SELECT DISTINCT toInt32(day) FROM {connection.target.database}.daily_counts "
        "WHERE day >= toDate32({first:Int32})",
        {"first": first},
    )
    return sorted(day for day in sql | {int(day) for (day,) in found} if day >= first)


def _carry_day(connection, day: int) -> int:
    """Add to ClickHouse's counts of `day` what the SQL store's daily rollups count more (or
    less); how many rows. Stored once under a token naming the day and the rows: sent again
    after an answer lost, they are not added twice."""
    expected = _sql_day(day)
    found = {
        (name, endpoint, value, second): (domain, int(n))
        for name, endpoint, value, second, domain, n in connection.rows(
            f"SELECT field, endpoint, value, second, any(domain), sum(n) AS n FROM "
            f"{connection.target.database}.daily_counts WHERE day = toDate32({{day:Int32}}) "
            "AND field IN {daily:Array(String)} GROUP BY field, endpoint, value, second HAVING n != 0",
            {"day": day, **_DAILY},
        )
    }
    rows = []
    for key in sorted(expected.keys() | found.keys()):
        have = found.get(key, ("", 0))
        more = expected.get(key, 0) - have[1]
        if more:
            domain = _domain(key) if key in expected else have[0]
            rows.append((day, 0, *key, domain, more))
    if rows:
        digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:32]
        connection.insert(
            f"{connection.target.database}.daily_counts",
            COLUMNS,
            rows,
            days=("day",),
            token=f"copy statistics {day} {digest}",
        )
    return len(rows)


def _domain(key: tuple) -> str:
    """The registrable domain a count of a name carries (`domain`), as ClickHouse fills it."""
    name, _, value, _ = key
    return registrable_domain(value) if value and "question" in name.split("+") else ""


def _sql_day(day: int) -> dict[tuple, int]:
    """{(field, endpoint, value, second): n} of the SQL store's daily rollups of `day`, named as
    daily_counts names them (dims.value_text)."""
    found = query(f"SELECT dim, endpoint, value, n FROM rollup WHERE dim IN ({_IDS}) AND period = ?", [day]).fetchall()
    # Values that name alike (an unknown string and an empty one, an entry gone) are one.
    texts = _texts(found)
    named: dict[tuple, int] = {}
    for row in found:
        dim = _BY_ID[row[0]]
        endpoint = texts[ENDPOINT].get(row[1], "") if dim.per_endpoint else ""
        key = (field(dim), endpoint, *_value(dim, row[2], texts))
        named[key] = named.get(key, 0) + int(row[3])
    return {key: n for key, n in named.items() if n}


def _texts(found: list) -> dict[str, dict]:
    """{storage: {stored value: text}} of the endpoints and values of rollup rows."""
    wanted: dict[str, set] = {ENDPOINT: {row[1] for row in found}}
    for dim_id, _, value, *_ in found:
        dim = _BY_ID[dim_id]
        if dim.columns and value != rollups.NULL_VALUE:
            first = value // rollups.PAIR if len(dim.columns) == 2 else value
            wanted.setdefault(FIELDS_BY_SQL[dim.columns[0]].storage, set()).add(first)
    return {storage: value_texts(storage, values) for storage, values in wanted.items()}


def _value(dim, value: int, texts: dict) -> tuple[str, str]:
    """(value, second) of a rollup row's `value` in `dim`, as text ('' for unknown)."""
    if not dim.columns:
        return "", ""
    storage = FIELDS_BY_SQL[dim.columns[0]].storage
    if len(dim.columns) == 2:
        first, code = divmod(value, rollups.PAIR)
        return (texts[storage].get(first, "") if first else ""), ("" if code == 0 else str(code - 2))
    if value == rollups.NULL_VALUE:
        return "", ""
    if storage in (TERM, CLIENT, BOOLEAN):
        return texts[storage].get(value, ""), ""
    return str(value), ""


def _carry_names(connection) -> int:
    """Send the SQL store's names' first and last times (per endpoint, and over all endpoints as
    endpoint ''): names_seen keeps the earliest first and the latest last of what it is sent,
    so the spans of names whose records are gone join those of the records copied, and sent
    again they change nothing. How many were sent."""
    endpoints = value_texts(ENDPOINT, [row[0] for row in query("SELECT id FROM endpoint").fetchall()])
    cursor = query("SELECT term, endpoint, first, last FROM name_seen")
    sent = 0
    while found := cursor.fetchmany(_NAMES_BATCH):
        names = value_texts(TERM, [row[0] for row in found])
        rows = []
        for term, endpoint, first, last in found:
            name = names.get(term, "")
            if name and (endpoint == 0 or endpoint in endpoints):
                rows.append((endpoints.get(endpoint, ""), name, registrable_domain(name), first, last))
        connection.insert(
            f"{connection.target.database}.names_seen",
            ("endpoint", "question", "registrable_domain", "first", "last"),
            rows,
            times=("first", "last"),
        )
        sent += len(rows)
    return sent


def check(connection) -> int:
    """Hold ClickHouse's daily counts to the SQL store's daily rollups: each daily dim's count per
    endpoint and day, over every day from the statistics' expiry mark on; how many days were
    found equal. CountsDiffer naming where they differ."""
    with write_transaction():
        counting.catch_up()
    mark = rollups.statistics_from()
    first = 0 if mark is None else mark // DAY_MS
    rows = query(
        f"SELECT dim, endpoint, period, SUM(n) FROM rollup WHERE dim IN ({_IDS}) AND period >= ? "
        "GROUP BY dim, endpoint, period",
        [first],
    ).fetchall()
    endpoints = value_texts(ENDPOINT, [row[1] for row in rows])
    expected: dict[tuple, int] = {}
    for dim_id, endpoint, day, n in rows:
        dim = _BY_ID[dim_id]
        key = (field(dim), endpoints.get(endpoint, "") if dim.per_endpoint else "", int(day))
        expected[key] = expected.get(key, 0) + int(n)
    found = {
        (name, endpoint, int(day)): int(n)
        for name, endpoint, day, n in connection.rows(
            f"SELECT field, endpoint, toInt32(day) AS d, sum(n) AS n FROM {connection.target.database}.daily_counts "
            "WHERE day >= toDate32({first:Int32}) AND field IN {daily:Array(String)} GROUP BY field, endpoint, d",
            {"first": first, **_DAILY},
        )
    }
    copying.hold_equal(
        "the daily statistics",
        "counts of a day",
        {key: n for key, n in expected.items() if n},
        {key: n for key, n in found.items() if n},
        lambda key: f"{key[0] or 'records'} of {key[1] or 'all endpoints'} {day_text(key[2])}",
    )
    return len({key[2] for key in expected})
