"""Copying the records of ANALYTICS_DATABASE (rows and frozen blocks) into a ClickHouse with their
numbers, resumable, then their counts held to each other per endpoint and day (docs/clickhouse.md
"Moving an existing store into ClickHouse")."""

from dataclasses import dataclass

from catalogue import FIELDS_BY_SQL, TERM
from models.clickhouse import numbers, tables
from models.clickhouse.dims import DAY_MS, day_text
from models.clickhouse.tables import RECORD_COLUMNS, TIME_COLUMNS
from models.clients.activity import ROW_FIELDS, iter_raw_batches, texts
from models.engine.database import query, snapshot, write_transaction
from models.records.domains import registrable_domain
from models.records.filters import Filters
from models.records.thawing import newest_id

# Records a batch holds at most (and one day's at most: see _days).
BATCH = 50_000
# Mismatches an error names, of all it found.
SHOWN = 10
_TS, _QUESTION, _DOMAIN = ROW_FIELDS.index("ts"), ROW_FIELDS.index("question"), ROW_FIELDS.index("registrable_domain")
# A string ClickHouse keeps is never NULL: an unknown one is '', as ingestion stores it.
_STRINGS_AT = [i for i, column in enumerate(ROW_FIELDS) if column != "id" and FIELDS_BY_SQL[column].storage == TERM]
assert ROW_FIELDS == RECORD_COLUMNS, "a row of the log is a row of ClickHouse's records, column for column"


@dataclass(frozen=True)
class Copied:
    """What one run did: `records` and `batches` copied, whether the walk reached the newest
    record (`done`), and the last (ts, id) ClickHouse holds (None: none)."""

    records: int
    batches: int
    done: bool
    last: tuple[int, int] | None


@dataclass(frozen=True)
class Counted:
    """The counts found equal: `records` in all, of `endpoints` over `days`."""

    records: int
    endpoints: int
    days: int


class CountsDiffer(RuntimeError):
    """The two stores hold different numbers of records for some endpoints and days."""


def prepare(connection) -> None:
    """Make what is missing of the record store's tables: the first statement a copy sends,
    so that a ClickHouse that cannot be used is found before anything is read."""
    tables.create(connection)


def last_copied(connection) -> tuple[int, int] | None:
    """The (ts, id) of the last record copied: the newest in ClickHouse, as the walk goes in
    (ts, id) order and each batch is stored whole or not at all."""
    rows = connection.rows(
        f"SELECT toUnixTimestamp64Milli(ts), id FROM {connection.target.database}.records "
        "ORDER BY ts DESC, id DESC LIMIT 1"
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else None


def copy(connection, batch_size: int = BATCH, most_batches: int | None = None, each=None) -> Copied:
    """Copy the records past the last one copied, oldest first, in batches of at most
    `batch_size` (stopping after `most_batches`, when given); `each(records copied so far)`
    after each batch. The records go as ANALYTICS_DATABASE holds them (already enriched and
    made private), with their numbers and registrable domains; once the walk is done the
    record counter is moved past every number the SQL store handed out."""
    last = last_copied(connection)
    copied = batches = 0
    # From the last record's ms on (the walk's own cursor is not exposed), what is not past it
    # left out below: the rows of one ms are few.
    walk = iter_raw_batches(Filters(start_ms=last[0]) if last else Filters(), descending=False, batch_size=batch_size)
    for raw in walk:
        if last is not None:
            raw = [row for row in raw if (row[_TS], row[0]) > last]
        for day in _days(raw):
            if most_batches is not None and batches >= most_batches:
                walk.close()
                return Copied(copied, batches, False, last)
            rows = _rows(day)
            first = day[0]
            last = (day[-1][_TS], day[-1][0])
            # Its numbers name the batch: sent again (a retry after a lost answer), it is stored once.
            token = f"copy {first[0]}-{last[1]} {len(day)}"
            connection.insert(
                f"{connection.target.database}.records", RECORD_COLUMNS, rows, times=TIME_COLUMNS, token=token
            )
            # Numbers above the counter are taken for a batch that never committed (the next
            # batch stored erases them: ingestion.py), so the counter follows every batch.
            with write_transaction():
                numbers.raise_to(max(row[0] for row in rows))
            copied += len(rows)
            batches += 1
            if each is not None:
                each(copied)
    _number_past_everything(connection)
    return Copied(copied, batches, True, last)


def _days(raw: list) -> list[list]:
    """The batch cut where a UTC day ends: ClickHouse stores an insert of one partition (a day)
    whole or not at all, but one across partitions part by part, and a crash between two parts
    would leave a later record in without an earlier one, which the resumption would skip."""
    found, start = [], 0
    for i in range(1, len(raw) + 1):
        if i == len(raw) or raw[i][_TS] // DAY_MS != raw[start][_TS] // DAY_MS:
            found.append(raw[start:i])
            start = i
    return found


def _rows(raw: list) -> list[list]:
    """Raw rows as ClickHouse's records: texts for the ids, '' for an unknown string, the
    registrable domain by the code ClickHouse's ingestion fills it with (a store whose names
    were never mapped to their domains has none to read). A row whose client entry is gone is
    left out, as every read of the SQL store leaves it out."""
    rows = []
    for record in texts(raw):
        row = list(record)
        row[_DOMAIN] = registrable_domain(row[_QUESTION])
        for at in _STRINGS_AT:
            if row[at] is None:
                row[at] = ""
        rows.append(row)
    return rows


def _number_past_everything(connection) -> None:
    """Raise the ClickHouse store's record counter to the highest number the SQL store handed
    out, or that an output's or alert rule's cursor has reached (the records at the top may
    have been deleted since): new records are numbered after it, so every cursor kept in
    ANALYTICS_DATABASE stays valid."""
    held = connection.rows(f"SELECT max(id) FROM {connection.target.database}.records")
    cursors = query(
        "SELECT MAX(m) FROM (SELECT MAX(cursor) AS m FROM output UNION ALL SELECT MAX(cursor) FROM alert_rule) t"
    )
    highest = max(newest_id(), int(held[0][0] or 0) if held else 0, cursors.fetchone()[0] or 0)
    with write_transaction():
        numbers.raise_to(highest)


def check_counts(connection) -> Counted:
    """Hold the records ANALYTICS_DATABASE holds to those ClickHouse holds, per endpoint and
    UTC day; CountsDiffer naming where they differ."""
    with snapshot():  # rows and blocks at one moment: freezing moves records between them
        expected = _sql_counts()
    found = {
        (endpoint, int(day)): int(n)
        for endpoint, day, n in connection.rows(
            "SELECT endpoint, intDiv(toUnixTimestamp64Milli(ts), {day_ms:Int64}) AS day, count() "
            f"FROM {connection.target.database}.records GROUP BY endpoint, day",
            {"day_ms": DAY_MS},
        )
    }
    hold_equal("the record counts", "endpoint-days", expected, found, lambda key: f"{key[0]} {day_text(key[1])}")
    return Counted(sum(expected.values()), len({key[0] for key in expected}), len({key[1] for key in expected}))


def _sql_counts() -> dict[tuple[str, int], int]:
    """{(endpoint, day): records} of ANALYTICS_DATABASE, read from its tables rather than its
    rollups (which keep the counts of records expired or no longer logged), nor by the walk the
    copy made (whose misses the check is there to catch)."""
    counts: dict[tuple[str, int], int] = {}
    for statement in (
        f"SELECT e.name, r.ts / {DAY_MS}, COUNT(*) FROM record r JOIN endpoint e ON e.id = r.endpoint "
        f"GROUP BY e.name, r.ts / {DAY_MS}",
        "SELECT e.name, b.hour / 24, SUM(b.n) FROM record_block b JOIN endpoint e ON e.id = b.endpoint "
        "GROUP BY e.name, b.hour / 24",
    ):
        for endpoint, day, n in query(statement).fetchall():
            counts[(endpoint, int(day))] = counts.get((endpoint, int(day)), 0) + int(n)
    return counts


def hold_equal(what: str, unit: str, expected: dict, found: dict, describe) -> None:
    """CountsDiffer naming the keys (`describe(key)` says one) whose counts differ between
    ANALYTICS_DATABASE's (`expected`) and ClickHouse's (`found`), the first SHOWN of them."""
    differ = sorted(key for key in expected.keys() | found.keys() if expected.get(key, 0) != found.get(key, 0))
    if differ:
        shown = "; ".join(
            f"{describe(key)}: {expected.get(key, 0)} in ANALYTICS_DATABASE, {found.get(key, 0)} in ClickHouse"
            for key in differ[:SHOWN]
        )
        more = f" (and {len(differ) - SHOWN} more)" if len(differ) > SHOWN else ""
        raise CountsDiffer(f"{what} differ on {len(differ)} {unit}: {shown}{more}")
