"""The ClickHouse record store against the SQL one (docs/clickhouse.md, step 3 of the plan): the
same records stored in both, every page of the log read from each with the same filters, search
modes, windows, orders and pages, must be the same rows. The SQL store (on SQLite, rows and
frozen blocks) is the answer computed independently."""

import contextlib
import dataclasses
import random
from functools import partial
from types import SimpleNamespace

import pytest

from catalogue import GROUPABLE
from models.clickhouse import activity, csv_export, ingestion, numbers, unstored
from models.clickhouse import clients as ch_clients
from models.clickhouse import deletion as ch_deletion
from models.clickhouse import delivery as ch_delivery
from models.clickhouse import statistics as ch_statistics
from models.clickhouse import status as ch_status
from models.clickhouse.tables import RECORD_COLUMNS, TIME_COLUMNS
from models.clients import clients as sql_clients
from models.clients import deletion as sql_deletion
from models.clients import status as sql_status
from models.clients.activity import ROW_FIELDS, iter_raw_batches, page_records, records_after
from models.clients.clients import list_clients
from models.delivery import alerts as sql_alerts
from models.delivery import outputs as sql_outputs
from models.engine.database import bind, query
from models.engine.database import connection as database_connection
from models.records.filters import SEARCH_MODES, Filters
from models.records.names import value_texts
from models.runtime.clock import now_ms
from models.statistics import statistics
from schemas.csv_format import CsvEncoder
from schemas.records import parse_records

from support.chdb import record_row
from support.helpers import AUTH

HOUR_MS = 3_600_000
NAMES = [
    "example.com",
    "www.example.com",
    "api.Example.com",
    "ads.tracker.net",
    "tracker.net",
    "b\u00fccher.example.de",
    "under_score.example.org",
    "per%cent.example.org",
    "a.b.c.example.co.uk",
    "example.co.uk",
]

# The ClickHouse store held to the SQL one, on SQLite (chDB is the other side; the rest of the
# suite holds SQLite and PostgreSQL to each other, so a second reference would only double the time).
# `slow`: minutes of a worker in all, chDB statements by the thousand; the fast lane leaves them to the whole run.
pytestmark = [pytest.mark.against_sqlite, pytest.mark.slow]


def _records(now_ms: int, count: int = 240) -> list[dict]:
    rng = random.Random(45)
    made = []
    for i in range(count):
        record = {
            # Spread over three days: some past the hot horizon, frozen into blocks by the SQL store.
            "timestamp": now_ms - rng.randrange(72 * HOUR_MS) if i % 5 else now_ms - 3 * HOUR_MS,
            "endpointId": rng.choice(["home", "office", "lab"]),
            "clientId": rng.choice(["laptop", "phone", "tv", "printer"]),
            "question": rng.choice(NAMES),
            "action": rng.choice([-1, 0, 1, 1, 1, 2]),
            "rrType": rng.choice(["A", "AAAA", "HTTPS"]),
            "statusCode": rng.choice(["NOERROR", "NXDOMAIN"]),
            "protocol": "udp",
        }
        if i % 3:
            record["responseTimeMs"] = rng.choice([0.5, 12.25, 80.0])
            record["cached"] = bool(i % 2)
            record["answers"] = [{"type": "A", "data": f"192.0.2.{i % 250}"}] if i % 4 else []
        if i % 7 == 0:
            record["upstream"] = "9.9.9.9#53"
        made.append(record)
    return made


def _filters(now_ms: int) -> list[tuple[Filters, str]]:
    window = {"start_ms": now_ms - 48 * HOUR_MS, "end_ms": now_ms - HOUR_MS}
    found = [
        (Filters(), "everything"),
        (Filters(**window), "a window"),
        (Filters(values={"endpoint": ["home", "lab"]}), "two endpoints"),
        (Filters(values={"client": ["tv"]}, **window), "a client in a window"),
        (Filters(values={"action": [0, -1]}), "actions"),
        (Filters(values={"rr_type": ["AAAA"], "status": ["NXDOMAIN"]}), "two columns"),
        (Filters(values={"registrable_domain": ["tracker.net", "example.co.uk"]}), "registrable domains"),
        (Filters(values={"cached": [1]}), "a boolean"),
        (Filters(values={"upstream": ["9.9.9.9#53"]}), "an upstream"),
        (Filters(values={"client": ["nobody"]}), "nothing"),
        (Filters(endpoint_limit=frozenset({"office"})), "an endpoint limit"),
        (Filters(values={"endpoint": ["home"]}, endpoint_limit=frozenset({"office"})), "a limit excluding"),
    ]
    searches = {
        "includes": ["EXAMPLE", "%", "_", "b\u00fcch", "zzz"],
        "startsWith": ["api.", "ads"],
        "endsWith": [".co.uk", "NET"],
        "excludes": ["example"],
        "apex": ["example.co.uk", "tracker.net", "EXAMPLE.COM"],
        "regex": [r"^a.*\.net$", r"(?i)api\.example", r"co\.uk$"],
    }
    assert set(searches) == set(SEARCH_MODES)
    for mode, patterns in searches.items():
        for pattern in patterns:
            found.append((Filters(search=pattern, search_mode=mode), f"{mode} {pattern!r}"))
    # Searches whose names are found on an endpoint's sightings, or in a window's.
    found += [
        (Filters(search="example", values={"endpoint": ["home", "lab"]}, **window), "a search of two endpoints"),
        (Filters(search="net", search_mode="endsWith", endpoint_limit=frozenset({"office"})), "a search, limited"),
        (Filters(search="tracker.net", search_mode="apex", **window), "a search in a window"),
    ]
    return found


@pytest.fixture
def both(make_app, database, clickhouse):
    """The same records stored in the SQL store (through POST /v2/ingest) and in ClickHouse;
    (the app, ClickHouse, the time they were made at)."""
    app = make_app(ANALYTICS_HOT_HOURS=2)
    now = now_ms()
    records = _records(now)
    _store_both(app, clickhouse, records, now)
    with app.app_context(), database_connection():
        assert numbers.top() == len(records)
        # The SQL store answers from rows and from frozen blocks both.
        assert query("SELECT count(*) FROM record_block").fetchone()[0] > 0
        assert query("SELECT count(*) FROM record").fetchone()[0] > 0
        yield app, clickhouse, now


def _store_both(app, clickhouse, records: list[dict], now: int) -> None:
    """`records` stored in the SQL store (through POST /v2/ingest) and in ClickHouse, 60 a batch."""
    for start in range(0, len(records), 60):
        batch = records[start : start + 60]
        response = app.test_client().post("/v2/ingest", json=batch, headers=AUTH)
        assert response.status_code == 200, response.get_json()
        with app.app_context(), database_connection():
            ingestion.store_records(clickhouse, parse_records(batch, now))


@pytest.mark.parametrize("first_records", [None, 7])
def test_every_page_of_the_log_is_the_sql_stores(both, monkeypatch, first_records):
    # 7: each page asked in many stretches (a first one of some 7 records of the 240), as a
    # large store's page is; by default these few records are one stretch. Then too, a search
    # that finds more than two names matches every record read, as one finding a thousand does;
    # by default each is asked by the names it finds (activity.named).
    if first_records:
        monkeypatch.setattr(activity, "_FIRST_RECORDS", first_records)
        monkeypatch.setattr(activity, "NAMED_AT_MOST", 2)
    else:  # the names' sightings merged, one a name, as a store's are once ClickHouse merges them
        both[1].command("OPTIMIZE TABLE analytics.names_seen FINAL")
    every_page_the_same(both)


def every_page_the_same(both):
    """Every page of the log, with every filter, order and search mode, the SQL store's."""
    _, clickhouse, now = both
    for filters, said in _filters(now):
        for descending in (True, False):
            for page in range(4):
                expected = page_records(filters, page, 25, descending=descending)
                got = activity.page_records(clickhouse, filters, page, 25, descending=descending)
                assert got == expected, (said, descending, page)


def test_the_live_tail_reads_what_the_sql_store_does(both):
    """Walked to the end in small steps, each store hands on every matching record once, in
    number order (how much one call hands on may differ: the SQL store matches a search after
    its LIMIT)."""
    _, clickhouse, now = both
    walks = {"sql": lambda f, after: records_after(f, after, 12, 50), "clickhouse": partial(_tail, clickhouse)}
    for filters, said in _filters(now):
        live = dataclasses.replace(filters, start_ms=None, end_ms=None)  # a stream has no window
        seen = {}
        for store, walk in walks.items():
            seen[store], after = [], 0
            while after < 240:
                rows, after = walk(live, after)
                seen[store] += rows
            assert walk(live, after) == ([], 240)
        assert seen["clickhouse"] == seen["sql"], said
        assert seen["sql"] == sorted(seen["sql"], key=lambda row: row.id)


def _tail(clickhouse, filters, after):
    return activity.records_after(clickhouse, filters, after, 12, 50)


def test_the_statistics_are_the_sql_stores(both):
    _, clickhouse, now = both
    for i, (filters, said) in enumerate(_filters(now)):
        # The API's statistics always have a window (endTime defaults to now).
        if filters.start_ms is None:
            filters = dataclasses.replace(filters, start_ms=now - 100 * HOUR_MS, end_ms=now)
        assert ch_statistics.count(clickhouse, filters) == statistics.count(filters), said
        assert ch_statistics.series(clickhouse, filters, HOUR_MS) == statistics.series(filters, HOUR_MS), said
        assert ch_statistics.availability(clickhouse, filters) == statistics.availability(filters), said
        for column in ("question", "registrable_domain"):
            expected = statistics.newly_seen(filters, column, 4)
            assert ch_statistics.newly_seen(clickhouse, filters, column, 4) == expected, (said, column)
        for column, limit in ((None, 1), ("client", 2), ("cached", 3)):
            expected = statistics.latency(filters, column, limit)
            assert ch_statistics.latency(clickhouse, filters, column, limit) == _close(expected), (said, column)
        if i % 4:  # every column's lists for a few of the filters: the SQL store's take seconds
            continue
        for column in (field.sql for field in GROUPABLE):
            expected = statistics.top(filters, column, 3)
            assert ch_statistics.top(clickhouse, filters, column, 3) == expected, (said, column)
        for column in ("question", "client", "action", "registrable_domain"):
            expected = statistics.top(filters, column, 3, descending=False)
            assert ch_statistics.top(clickhouse, filters, column, 3, descending=False) == expected, (said, column)
            expected = statistics.top_series(filters, 15 * 60_000, column, 2)
            assert ch_statistics.top_series(clickhouse, filters, 15 * 60_000, column, 2) == expected, (said, column)
            baseline = dataclasses.replace(filters, start_ms=now - 72 * HOUR_MS, end_ms=now - 24 * HOUR_MS)
            expected = statistics.trend(filters, baseline, column, 4)
            assert ch_statistics.trend(clickhouse, filters, baseline, column, 4) == expected, (said, column)


def _close(rows):
    """Latency rows with their mean as ClickHouse's float sum makes it (the order of additions
    differs from the SQL store's by a rounding)."""
    return [row._replace(mean=pytest.approx(row.mean)) if row.mean is not None else row for row in rows]


def test_the_clients_last_activity_is_the_sql_stores(both):
    _, clickhouse, _ = both
    selections = [
        {},
        {"endpoint": "home"},
        {"client_ids": ["tv", "phone"]},
        {"endpoint": "lab", "client_ids": ["printer"]},
        {"endpoint_limit": frozenset({"office", "lab"})},
        {"endpoint": "nowhere"},
    ]
    for selection in selections:
        assert ch_clients.list_clients(clickhouse, **selection) == list_clients(**selection), selection


@contextlib.contextmanager
def inside(app):
    """The app's context, its database bound (two apps of a test each have their own)."""
    with app.app_context():
        bind(app.extensions["database"])
        with database_connection():
            yield


def test_deletions_leave_what_the_sql_stores_leave(make_app, database, clickhouse, tmp_path):
    """The same deletions, one after the other, on two stores holding the same records (each
    with its own SQL database: the lost marks and client entries are theirs): the log, the
    counts, the clients with their last activity and lost marks, and the names first seen stay
    the SQL store's."""
    sql_app = make_app(ANALYTICS_HOT_HOURS=2)
    ch_app = make_app(ANALYTICS_HOT_HOURS=2, ANALYTICS_DATABASE=str(tmp_path / "beside.db"))
    now = now_ms()
    records = _records(now)
    for start in range(0, len(records), 60):
        batch = records[start : start + 60]
        assert sql_app.test_client().post("/v2/ingest", json=batch, headers=AUTH).status_code == 200
        with inside(ch_app):
            ingestion.store_records(clickhouse, parse_records(batch, now))
    deletions = [
        ("records", {"endpoints": ["home"], "client_ids": ["tv"], "end_ms": now - 24 * HOUR_MS}),
        ("records", {"endpoints": ["lab"], "end_ms": now - 48 * HOUR_MS}),
        ("clients", {"endpoints": ["office"], "client_ids": ["phone"], "end_ms": now}),
        ("clients", {"client_ids": ["printer"], "end_ms": now - 30 * HOUR_MS}),
        ("records", {"endpoint_limit": frozenset({"office"}), "end_ms": now - 10 * HOUR_MS}),
        ("records", {"end_ms": now - 60 * HOUR_MS}),
        ("records", {"endpoints": ["home"]}),
        ("clients", {"endpoints": ["nowhere"], "end_ms": now}),
    ]
    window = Filters(start_ms=now - 100 * HOUR_MS, end_ms=now)
    for kind, selection in deletions:
        with inside(sql_app):
            if kind == "records":
                expected = sql_deletion.delete_records(**selection)
            else:
                expected = sql_clients.delete_clients(**selection)
            seen = _what_is_left(window, page_records, statistics.count, statistics.newly_seen, list_clients)
        with inside(ch_app):
            if kind == "records":
                got = ch_deletion.delete_records(clickhouse, **selection)
            else:
                got = ch_deletion.delete_clients(clickhouse, **selection)
            left = _what_is_left(
                window,
                partial(activity.page_records, clickhouse),
                partial(ch_statistics.count, clickhouse),
                partial(ch_statistics.newly_seen, clickhouse),
                partial(ch_clients.list_clients, clickhouse),
            )
        assert got == expected, selection
        assert left == seen, selection


def _what_is_left(window, pages, count, newly_seen, clients):
    return {
        "pages": [pages(window, page, 50) for page in range(5)],
        "count": count(window),
        "new": [newly_seen(window, column, 20) for column in ("question", "registrable_domain")],
        "clients": clients(),
    }


def _exports(clickhouse, filters, descending, batch_size) -> tuple[str, str, str]:
    """The CSV lines of the SQL store, and of ClickHouse, written by ClickHouse and from its rows."""
    sql = CsvEncoder(ROW_FIELDS, value_texts)
    expected = "".join(sql.lines(rows) for rows in iter_raw_batches(filters, descending, batch_size=batch_size))
    written = b"".join(csv_export.lines(clickhouse, filters, descending, batch_size) or [b"(none)"]).decode()
    ch = CsvEncoder(ROW_FIELDS, activity.texts)
    from_rows = "".join(ch.lines(rows) for rows in activity.iter_batches(clickhouse, filters, descending, batch_size))
    return expected, written, from_rows


def test_the_export_is_the_sql_stores(both):
    _, clickhouse, now = both
    for filters, said in _filters(now)[:12] + [(Filters(search="tracker", search_mode="includes"), "a search")]:
        for descending in (True, False):
            expected, written, from_rows = _exports(clickhouse, filters, descending, 40)
            assert written == expected, (said, descending)
            assert from_rows == expected, (said, descending)
            assert written.count("\r\n") == statistics.count(filters) if filters.start_ms else True


# Numbers whose Python repr has no exponent, some ClickHouse would write otherwise ("80" for 80.0),
# and texts each cell rule applies to: a formula's first character, quotes, commas, non-ASCII.
_PLAIN_NUMBERS = [0.0, -0.0, 80.0, 0.0001, 0.000123456789, 12.25, 1234567.0, 86399999.99999999, 86400000.0, 0.1 + 0.2]
_TEXTS = ["=SUM(A1)", "+1", "-x", "@me", "'quoted", 'say "hi"', "a,b", "Zürich", "plain", "it's"]


def _cell_records(now: int, numbers: list[float]) -> list[dict]:
    made = []
    for i, number in enumerate(numbers * 3):
        text = _TEXTS[i % len(_TEXTS)]
        made.append(
            {
                # A third at one millisecond, more than the batch of 7 the test walks by.
                "timestamp": now - 5_000 if i % 3 == 0 else now - i * 61_007 - (i % 3) * HOUR_MS,
                "endpointId": ["home", "=office"][i % 2],
                "clientId": [text, "tv"][i % 2],
                "question": ["example.com", "b\u00fccher.example.de", "a.b.c.example.co.uk"][i % 3],
                "action": [-1, 0, 2][i % 3],
                "rrType": "A",
                "statusCode": "NOERROR",
                "responseTimeMs": number,
                "cached": [True, False, None][i % 3],
                "triggerValue": text,
                "sourceCity": _TEXTS[(i + 3) % len(_TEXTS)],
                "sourceAsn": [64500, None, 0][i % 3],
                "answers": [[], [{"type": "A", "data": "192.0.2.1"}, {"type": "AAAA", "data": "2001:db8::1"}]][i % 2],
            }
        )
    return [{k: v for k, v in record.items() if v is not None} for record in made]


@pytest.mark.parametrize("numbers", [_PLAIN_NUMBERS, _PLAIN_NUMBERS + [1e-05]], ids=["plain", "an exponent"])
def test_the_export_clickhouse_writes_is_the_sql_stores_byte_for_byte(make_app, database, clickhouse, numbers):
    app, now = make_app(), now_ms()
    _store_both(app, clickhouse, _cell_records(now, numbers), now)
    with app.app_context(), database_connection():
        for descending in (True, False):
            expected, written, from_rows = _exports(clickhouse, Filters(), descending, 7)
            assert from_rows == expected
            # A number whose repr has an exponent: the export is written from the rows.
            assert written == (expected if numbers == _PLAIN_NUMBERS else "(none)")
            assert expected.count("\r\n") == 3 * len(numbers)


def test_what_alerts_outputs_and_metrics_read_is_the_sql_stores(both):
    _, clickhouse, now = both
    names = ["home", "lab"]
    made = _records(now)
    for clients in (None, ["tv", "laptop"]):
        # Every record of the scope, by its number (the order both stores stored them in). The
        # SQL store's alerts read only the records stored as rows (one frozen as it arrived, past
        # the hot horizon, is never seen): ClickHouse's see them all.
        truth = [
            i + 1
            for i, r in enumerate(made)
            if r["endpointId"] in names and r["clientId"] in (clients or names + [r["clientId"]])
        ]
        for limit in (7, 100):
            seen = {"sql": [], "ch": []}
            after = {"sql": 0, "ch": 0}
            while after["ch"] < 240:
                got, upto = ch_delivery.alert_records_after(clickhouse, names, clients, after["ch"], limit)
                assert upto > after["ch"]
                seen["ch"] += got
                after["ch"] = upto
            while True:  # (to its last row: the numbers after it may all be frozen)
                expected, upto = sql_alerts.records_after(names, clients, after["sql"], limit)
                seen["sql"] += expected
                if upto == after["sql"]:
                    break
                after["sql"] = upto
            assert [row.id for row in seen["ch"]] == truth, (clients, limit)
            assert set(seen["sql"]) <= set(seen["ch"]) and seen["sql"], (clients, limit)
        # (Windows inside the hot horizon: the SQL store counts only the records kept as rows.)
        for start in (now - 100 * 60_000, now - 40 * 60_000):
            expected = sorted(sql_alerts.client_counts(names, clients, start, now))
            assert sorted(ch_delivery.client_counts(clickhouse, names, clients, start, now)) == expected
    everywhere = ["home", "lab", "office", "nowhere"]
    assert ch_delivery.endpoint_activity(clickhouse, everywhere) == sql_alerts.endpoint_activity(everywhere)
    assert ch_status.endpoints_by_age(clickhouse) == sql_status.endpoints_by_age()
    for since in (now - 100 * HOUR_MS, now - 2 * HOUR_MS):
        sql_alerts.seed_domains(1, names, since)
        ch_delivery.seed_domains(clickhouse, 2, names, since)
        marks = query("SELECT rule, subject, ts FROM alert_mark ORDER BY subject").fetchall()
        assert [row[1:] for row in marks if row[0] == 2] == [row[1:] for row in marks if row[0] == 1]
    assert ch_delivery.newest_id() == sql_outputs.newest_id() == 240
    for endpoints in (None, ["office"]):
        for cursor in (0, 100, 239, 240):
            output = SimpleNamespace(endpoints=endpoints, cursor=cursor)
            assert ch_delivery.pending(clickhouse, output, 9) == sql_outputs.pending(output, 9) or endpoints
            for at_most in (5, 1000):
                assert ch_delivery.backlog(clickhouse, output, at_most) == sql_outputs.backlog(output, at_most)
            for keep in (0, 10, 500):
                assert ch_delivery.skip_point(clickhouse, output, keep) == sql_outputs.skip_point(output, keep)
    sizes, log = ch_status.database_sizes(clickhouse)
    assert sizes > sql_status.database_sizes()[0]


def test_a_read_while_sightings_are_made_again_finds_them_as_before_or_after(
    make_app, database, clickhouse, monkeypatch
):
    """Deletions and an erasure make names' sightings and clients' last activity again, a
    statement at a time; a read after any of those statements (the hook below runs one, on the
    same chDB) finds every name and client that is there before and after, with its times as
    before or as after: never without them, as when the old rows were deleted before the new
    ones went in."""
    app = make_app()
    now = now_ms()
    with inside(app):
        ingestion.store_records(clickhouse, parse_records(_records(now), now))
    reads = []
    command = clickhouse.command

    def watched(sql, params=None):
        command(sql, params)
        if "names_seen" in sql.split(" WHERE")[0] or "last_activity" in sql.split(" WHERE")[0]:
            reads.append(_derived(clickhouse))

    monkeypatch.setattr(clickhouse, "command", watched)
    steps = [
        lambda: ch_deletion.delete_records(
            clickhouse, endpoints=["home"], client_ids=["tv"], end_ms=now - 24 * HOUR_MS
        ),
        lambda: ch_deletion.delete_records(clickhouse, endpoints=["lab"], end_ms=now - 48 * HOUR_MS),
        lambda: ch_deletion.delete_clients(clickhouse, client_ids=["printer"], end_ms=now - 30 * HOUR_MS),
        lambda: unstored.erase(
            clickhouse,
            "endpoint = 'office' AND ts < fromUnixTimestamp64Milli({cut:Int64})",
            {"cut": now - 20 * HOUR_MS},
        ),
    ]
    for step in steps:
        with inside(app):
            before = _derived(clickhouse)
            reads.clear()
            step()
            after = _derived(clickhouse)
        assert reads, "the step made nothing again"
        for kind in before:
            kept = before[kind].keys() & after[kind].keys()
            assert kept
            for seen in reads:
                for key in kept:
                    assert seen[kind].get(key) in (before[kind][key], after[kind][key]), (kind, key)


def _derived(clickhouse) -> dict:
    """{"names": {(endpoint, question): (first, last)}, "clients": {(endpoint, client): ts}}."""
    names = clickhouse.rows(
        "SELECT endpoint, question, toUnixTimestamp64Milli(min(first)), toUnixTimestamp64Milli(max(last)) "
        "FROM analytics.names_seen GROUP BY endpoint, question"
    )
    clients = clickhouse.rows(
        "SELECT endpoint, client, toUnixTimestamp64Milli(max(ts)) FROM analytics.last_activity "
        "GROUP BY endpoint, client"
    )
    return {
        "names": {(endpoint, question): (first, last) for endpoint, question, first, last in names},
        "clients": {(endpoint, client): ts for endpoint, client, ts in clients},
    }


def test_records_above_the_counter_are_erased_before_the_next_batch(make_app, database, clickhouse):
    """A process that is its chDB's only writer looks for records above the counter (a batch
    ClickHouse took whose transaction never committed) once, not before every batch: until an
    insert of records its batches did not commit comes between, as here."""
    app = make_app()
    now = now_ms()
    records = _records(now, 120)
    with inside(app):
        for start in (0, 30):
            ingestion.store_records(clickhouse, parse_records(records[start : start + 30], now))
        top = numbers.top()
        stray = [record_row(top + i, now, question="stray.example") for i in (1, 2, 3)]
        clickhouse.insert(f"{clickhouse.target.database}.records", RECORD_COLUMNS, stray, times=TIME_COLUMNS)
        for start in (60, 90):
            ingestion.store_records(clickhouse, parse_records(records[start : start + 30], now))
        assert numbers.top() == 120
        stored = clickhouse.rows(f"SELECT id, question FROM {clickhouse.target.database}.records ORDER BY id")
    assert [number for number, _ in stored] == list(range(1, 121))
    assert "stray.example" not in {question for _, question in stored}
