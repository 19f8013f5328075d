"""The ClickHouse store's statistics past the records' horizon against the SQL store's
(docs/clickhouse.md, steps 4 and 5): the same records, over ten days, in both; retention, a
client no longer logged, deletions and the statistics' own expiry applied to both; every
statistic over windows reaching past the records' horizon must be the SQL store's (on SQLite,
rows and frozen blocks), the answer computed independently."""

import contextlib
import dataclasses
import random

import pytest

from models.clickhouse import clients as ch_clients
from models.clickhouse import deletion as ch_deletion
from models.clickhouse import ingestion, tables
from models.clickhouse import rewrites as ch_rewrites
from models.clickhouse import statistics as ch_statistics
from models.clickhouse.dims import COUNTED, WITH_RECORDS, counted, field
from models.clients import clients as sql_clients
from models.clients import deletion as sql_deletion
from models.engine.database import bind, write_transaction
from models.engine.database import connection as database_connection
from models.privacy import rewrites as privacy_rewrites
from models.records.filters import Filters
from models.runtime.clock import now_ms
from models.schema import settings
from models.statistics import statistics
from schemas.records import parse_records

from support.helpers import AUTH

DAY = 86_400_000
HOUR = 3_600_000
MINUTE = 60_000
NAMES = ["www.x.com", "mail.x.com", "y.org", "ads.tracker.net", "z.co.uk"]

# The ClickHouse store held to the SQL one, on SQLite (chDB is the other side; the rest of the
# suite holds SQLite and PostgreSQL to each other, so a second reference would only double the time).
# `slow`: minutes of a worker in all, chDB statements by the thousand; the fast lane leaves them to the whole run.
pytestmark = [pytest.mark.against_sqlite, pytest.mark.slow]


def _records(start: int, end: int, count: int, seed: int, clients="abc") -> list[dict]:
    rng = random.Random(seed)
    return [
        {
            "timestamp": rng.randrange(start, end),
            "endpointId": rng.choice(["e1", "e2"]),
            "clientId": rng.choice(clients),
            "question": rng.choice(NAMES),
            "action": rng.choice([-1, 0, 1, 1, 2]),
            "rrType": rng.choice(["A", "AAAA"]),
            "responseTimeMs": rng.choice([1.5, 20.0]),
            "cached": rng.random() < 0.5,
        }
        for _ in range(count)
    ]


@contextlib.contextmanager
def inside(app):
    """The app's context, its database bound (the two apps of a test each have their own)."""
    with app.app_context():
        bind(app.extensions["database"])
        with database_connection():
            yield


@dataclasses.dataclass
class Stores:
    sql: object  # the app of the SQL store
    ch: object  # the app whose database keeps ClickHouse's client entries and marks
    clickhouse: object
    now: int
    today: int  # the start of today's UTC day

    def store(self, records: list[dict]):
        for start in range(0, len(records), 100):
            batch = records[start : start + 100]
            assert self.sql.test_client().post("/v2/ingest", json=batch, headers=AUTH).status_code == 200
            with inside(self.ch):
                ingestion.store_records(self.clickhouse, parse_records(batch, now_ms()))

    def both(self, sql, ch, *args, **kwargs):
        """(what `sql(*args, **kwargs)` answers on the SQL store, what `ch(clickhouse, *args,
        **kwargs)` answers on ClickHouse)."""
        with inside(self.sql):
            expected = sql(*args, **kwargs)
        with inside(self.ch):
            got = ch(self.clickhouse, *args, **kwargs)
        return expected, got


@pytest.fixture
def stores(make_app, database, clickhouse, tmp_path):
    """Ten days of records (and today's) in the SQL store and in ClickHouse."""
    sql = make_app(ANALYTICS_HOT_HOURS=2)
    ch = make_app(ANALYTICS_HOT_HOURS=2, ANALYTICS_DATABASE=str(tmp_path / "beside.db"))
    now = now_ms()
    made = Stores(sql, ch, clickhouse, now, now // DAY * DAY)
    made.store(_records(made.today - 10 * DAY, now, 600, 46))
    return made


def _windows(stores: Stores) -> list[Filters]:
    today, now = stores.today, stores.now
    return [
        Filters(start_ms=today - 12 * DAY, end_ms=now),
        Filters(start_ms=today - 9 * DAY + 5 * HOUR, end_ms=today - 2 * DAY - 7 * HOUR),
        Filters(start_ms=today - 8 * DAY, end_ms=today - 5 * DAY - 1),
        # Edges inside an hour and a quarter hour: the shorter counts' own edges.
        Filters(start_ms=today - 3 * DAY + 5 * HOUR + 7 * MINUTE + 123, end_ms=today - 1 * DAY - 13 * MINUTE),
    ]


FILTERS = [
    ({}, None),
    ({"endpoint": ["e1"]}, None),
    ({"client": ["a"]}, None),
    ({"action": [0]}, None),
    ({"registrable_domain": ["x.com"]}, None),
    ({"rr_type": ["A"], "action": [1]}, None),
    ({}, "x.com"),
]


def _filters(stores: Stores) -> list[Filters]:
    found = []
    for window in _windows(stores):
        for values, search in FILTERS:
            found.append(dataclasses.replace(window, values=values, search=search))
    found.append(dataclasses.replace(found[0], endpoint_limit=frozenset({"e2"})))
    return found


COLUMNS = ("question", "client", "action", "registrable_domain", "endpoint", "rr_type", "cached")
INTERVALS = (DAY, 2 * DAY, HOUR, 15 * MINUTE, 3 * HOUR)


def _every_statistic(stores: Stores):
    """Every statistic of both stores over windows reaching past the records' horizon: equal.
    Each window unfiltered is read every way; each filter (the p-th of window w) in three of
    the columns and one of the intervals, turn about, so that over the windows each filter is
    read in every column and interval (read whole, the product took 1,500 statements a call)."""
    for i, filters in enumerate(_filters(stores)):
        said = (filters.values, filters.search, filters.start_ms)
        whole = not filters.values and not filters.search
        w, p = divmod(i, len(FILTERS))
        columns = COLUMNS if whole else [COLUMNS[(p + 3 * w + k) % len(COLUMNS)] for k in range(3)]
        intervals = INTERVALS if whole else [INTERVALS[(p + w) % len(INTERVALS)]]
        expected, got = stores.both(statistics.count, ch_statistics.count, filters)
        assert got == expected, said
        for interval in intervals:
            expected, got = stores.both(statistics.series, ch_statistics.series, filters, interval)
            assert got == expected, (said, interval)
        for column in columns:
            for descending in (True, False):
                expected, got = stores.both(statistics.top, ch_statistics.top, filters, column, 3, descending)
                assert got == expected, (said, column, descending)
            for interval in (DAY, HOUR):
                reads = (statistics.top_series, ch_statistics.top_series)
                expected, got = stores.both(*reads, filters, interval, column, 2)
                assert got == expected, (said, column, interval)
            baseline = dataclasses.replace(filters, start_ms=stores.today - 11 * DAY, end_ms=stores.today - 6 * DAY)
            expected, got = stores.both(statistics.trend, ch_statistics.trend, filters, baseline, column, 4)
            assert got == expected, (said, column)
        for column in ("question", "registrable_domain"):
            expected, got = stores.both(statistics.newly_seen, ch_statistics.newly_seen, filters, column, 5)
            assert got == expected, (said, column)
        expected, got = stores.both(statistics.latency, ch_statistics.latency, filters)
        assert [(*row[:2], *row[3:]) for row in got] == [(*row[:2], *row[3:]) for row in expected], said


def _retention(stores: Stores, cutoff: int) -> int:
    """The retention job's deletion on both stores (app/jobs/retention.py); how many went."""
    expected, got = stores.both(
        sql_deletion.delete_records, ch_deletion.delete_records, end_ms=cutoff - 1, batch_size=250, expire=True
    )
    assert got == expected
    return got


def _the_old_days_count(stores: Stores) -> int:
    """What ClickHouse still counts of the days past the records' horizon."""
    old = Filters(start_ms=stores.today - 12 * DAY, end_ms=stores.today - 5 * DAY - 1)
    with inside(stores.ch):
        return ch_statistics.count(stores.clickhouse, old)


def test_past_the_records_horizon_the_statistics_are_the_sql_stores(stores):
    cutoff = stores.now - 4 * DAY - 5 * HOUR  # a ragged edge: part of a day expires
    before = _the_old_days_count(stores)
    assert _retention(stores, cutoff) > 0
    assert _the_old_days_count(stores) == before > 0, "the records' counts outlive them"
    with inside(stores.ch):
        assert ch_statistics.availability(stores.clickhouse, Filters())[0] >= cutoff, "the records are gone"
        assert ch_statistics.statistics_start(stores.clickhouse) == stores.today - 10 * DAY
    _every_statistic(stores)
    expected, got = stores.both(sql_clients.list_clients, ch_clients.list_clients)
    assert got == expected


def test_records_stored_while_retention_runs_go_with_it_as_on_the_sql_store(stores, monkeypatch):
    """Retention takes whole days whatever their numbers, in two writers' turns (the counts and
    lost marks, then the partitions dropped): late records of those days stored between the two
    go with them, their counts and marks taken too, as if they had come before (the SQL store,
    one turn, sees them so)."""
    cutoff = stores.now - 4 * DAY - 5 * HOUR
    late = _records(stores.today - 8 * DAY, stores.today - 7 * DAY, 40, 48)
    for start in range(0, len(late), 100):
        assert (
            stores.sql.test_client().post("/v2/ingest", json=late[start : start + 100], headers=AUTH).status_code == 200
        )
    turns = []
    real = ch_deletion.write_transaction

    @contextlib.contextmanager
    def turn():
        turns.append(1)
        if len(turns) == 3:  # the deletion's mark, its first turn, then (now) its second
            ingestion.store_records(stores.clickhouse, parse_records(late, now_ms()))
        with real():
            yield

    monkeypatch.setattr(ch_deletion, "write_transaction", turn)
    assert _retention(stores, cutoff) > 0
    assert len(turns) == 3
    monkeypatch.undo()
    _every_statistic(stores)
    expected, got = stores.both(statistics.availability, ch_statistics.availability, Filters())
    assert got == expected
    expected, got = stores.both(sql_clients.list_clients, ch_clients.list_clients)
    assert got == expected


def test_a_store_counting_hours_since_an_upgrade_reads_the_records_before(stores):
    """Counts made before hours and quarter hours were counted have none (tables.upgrades): they
    are counted from a day on (tables.SHORT_FROM), and every statistic of a window before it is
    read from the records, as the SQL store's."""
    database, mark = stores.clickhouse.target.database, stores.today - 4 * DAY
    stores.clickhouse.command(f"ALTER TABLE {database}.daily_counts MODIFY COMMENT '{tables.SHORT_FROM}{mark}'")
    stores.clickhouse.command(
        f"DELETE FROM {database}.daily_counts WHERE field IN {{short:Array(String)}} AND day < toDate32({{day:Int32}})",
        {"short": [field(dim) for dim in WITH_RECORDS], "day": mark // DAY},
    )
    tables.create(stores.clickhouse)  # as at a start: the mark read again
    assert tables.short_counts_from(stores.clickhouse) == mark
    _every_statistic(stores)


def test_hours_counted_since_an_upgrade_are_read_from_their_own_mark(stores):
    """A store whose view counted fewer hours (before those by client and by name) counts the
    others from the next day on (tables.upgrades marks them in the comment before the view is
    made again), and a statistic reads the records before each field's own mark."""
    connection, database = stores.clickhouse, stores.clickhouse.target.database
    newer = [dim for dim in WITH_RECORDS if "client" in dim.columns or "question" in dim.columns]
    assert newer, "the hours by client and by name are counted"
    older = tuple(dim for dim in COUNTED if dim not in newer)
    records = f"{database}.records"
    connection.command(f"ALTER TABLE {database}.daily_counts_view MODIFY QUERY {counted(records, dims=older)}")
    connection.command(f"ALTER TABLE {database}.daily_counts MODIFY COMMENT '{tables.SHORT_FROM}0'")
    tables.create(connection)
    tomorrow = (now_ms() // DAY + 1) * DAY
    assert [tables.short_counts_from(connection, field(dim)) for dim in WITH_RECORDS] == [
        tomorrow if dim in newer else 0 for dim in WITH_RECORDS
    ]
    view = connection.rows(
        "SELECT as_select FROM system.tables WHERE database = {database:String} AND name = 'daily_counts_view'",
        {"database": database},
    )[0][0]
    assert all(f"'{field(dim)}'" in view for dim in WITH_RECORDS)
    tables.create(connection)  # a second start changes nothing
    assert [tables.short_counts_from(connection, field(dim)) for dim in newer] == [tomorrow] * len(newer)

    # Their marks four days ago, their hours before gone: every statistic reads those days' records.
    mark = stores.today - 4 * DAY
    marks = "".join(f"; {field(dim)} from {mark}" for dim in newer)
    connection.command(f"ALTER TABLE {database}.daily_counts MODIFY COMMENT '{tables.SHORT_FROM}0{marks}'")
    connection.command(
        f"DELETE FROM {database}.daily_counts WHERE field IN {{newer:Array(String)}} AND day < toDate32({{day:Int32}})",
        {"newer": [field(dim) for dim in newer], "day": mark // DAY},
    )
    tables.create(connection)
    assert [tables.short_counts_from(connection, field(dim)) for dim in WITH_RECORDS] == [
        mark if dim in newer else 0 for dim in WITH_RECORDS
    ]
    _every_statistic(stores)


def test_the_command_counts_the_hours_before_an_upgrade(stores, make_app, tmp_path):
    """`flask count-clickhouse-hours` on a store whose view did not count the hours by client and
    by name: after their upgrade (counted from tomorrow), today's records since, and a deletion
    of records never counted in them, it makes those hours of every day up to the mark from the
    records, and from then on the statistics read them from the first record, equal to the SQL
    store's. It waits for a privacy rewrite under way, and says when nothing is left to count."""
    connection, database = stores.clickhouse, stores.clickhouse.target.database
    newer = [dim for dim in WITH_RECORDS if "client" in dim.columns or "question" in dim.columns]
    older = tuple(dim for dim in COUNTED if dim not in newer)
    connection.command(
        f"ALTER TABLE {database}.daily_counts_view MODIFY QUERY {counted(f'{database}.records', dims=older)}"
    )
    connection.command(f"ALTER TABLE {database}.daily_counts MODIFY COMMENT '{tables.SHORT_FROM}0'")
    connection.command(
        f"DELETE FROM {database}.daily_counts WHERE field IN {{newer:Array(String)}}",
        {"newer": [field(dim) for dim in newer]},
    )
    tables.create(connection)  # the upgrade: those hours counted from tomorrow on
    stores.store(_records(stores.today, now_ms(), 40, 48))
    deletion = {"endpoints": ["e1"], "client_ids": ["b"], "end_ms": stores.today - 2 * DAY + HOUR}
    expected, got = stores.both(_in_transaction, ch_deletion.delete_records, **deletion)
    assert got == expected and got > 0
    app = make_app(
        ANALYTICS_DATABASE=str(tmp_path / "beside.db"),
        ANALYTICS_RECORD_STORE=f"chdb://{connection.target.folder}?database={database}",
    )
    rules = {"client_ip": "truncate", "question": "domain"}
    with inside(app), write_transaction():
        ch_rewrites.change_privacy(connection, "e1", rules, now_ms())
    said = app.test_cli_runner().invoke(args=["count-clickhouse-hours"])
    assert said.exit_code == 1 and "a privacy rewrite is under way" in said.output, said.output
    with inside(app):
        ch_rewrites.run_rewrites(connection, lambda: False)
    with inside(app), write_transaction():  # a deletion between its two turns (cut short there)
        settings.write(ch_deletion.BEGUN, '{"e1 b": 7}')
    said = app.test_cli_runner().invoke(args=["count-clickhouse-hours"])
    with inside(app), write_transaction():
        settings.write(ch_deletion.BEGUN, "{}")
    assert said.exit_code == 1 and "a deletion is under way" in said.output, said.output
    with inside(stores.sql):
        with write_transaction():
            privacy_rewrites.change("e1", rules, now_ms())
        privacy_rewrites.run(lambda: False)

    said = app.test_cli_runner().invoke(args=["count-clickhouse-hours"])
    assert said.exit_code == 0, said.output
    assert "Counted 11 days:" in said.output, said.output
    assert tables.later_marks(connection) == {}
    _every_statistic(stores)
    said = app.test_cli_runner().invoke(args=["count-clickhouse-hours"])
    assert said.exit_code == 0 and "Nothing to count:" in said.output, said.output


def test_a_clients_newly_seen_names_are_the_sql_stores(stores):
    """A client's first-seen names and domains come from its names a day and then the records
    of the newest days alone (statistics._clients_newly_seen): with many names first asked at
    any time of a day (before a window's start on its first day, after its end on its last, a
    few a day or many), every window and limit answers as the SQL store."""
    rng = random.Random(49)
    names = [f"n{i}.d{i % 7}.example" for i in range(80)]
    records = [
        {
            "timestamp": rng.randrange(stores.today - 9 * DAY, stores.now),
            "endpointId": rng.choice(["e1", "e2"]),
            "clientId": "n",
            "question": rng.choice(names[: rng.randrange(1, len(names))]),
            "action": 1,
        }
        for _ in range(400)
    ]
    stores.store(records)
    today = stores.today
    windows = [
        Filters(start_ms=today - 12 * DAY, end_ms=stores.now),
        Filters(start_ms=today - 6 * DAY + 7 * HOUR, end_ms=today - 2 * DAY + 5 * HOUR),
        Filters(start_ms=today - 3 * DAY + 13 * HOUR, end_ms=today - DAY + 2 * HOUR),
        Filters(start_ms=today - 4 * DAY + 30 * MINUTE, end_ms=today - 4 * DAY + 20 * HOUR),
    ]
    answered = []
    for window in windows:
        for values in ({"client": ["n"]}, {"client": ["n"], "endpoint": ["e2"]}, {"client": ["n", "a"]}):
            filters = dataclasses.replace(window, values=values)
            for column in ("question", "registrable_domain"):
                for limit in (1, 3, 10, 100):
                    expected, got = stores.both(statistics.newly_seen, ch_statistics.newly_seen, filters, column, limit)
                    assert got == expected, (window.start_ms, values, column, limit)
                    answered.append(len(got))
    assert sum(1 for n in answered if n) > len(answered) // 2 and max(answered) >= 10, answered


def test_a_client_no_longer_logged_leaves_its_counts_as_the_sql_store_does(stores):
    _retention(stores, stores.now - 6 * DAY)
    expected, got = stores.both(sql_clients.set_logged, ch_clients.set_logged, "e1", "a", False)
    assert got == expected and got[1] > 0
    # Its queries from then on are counted, anonymously, and stored by neither.
    stores.store(_records(stores.today - 3 * DAY, stores.now, 60, 47, clients="a"))
    _every_statistic(stores)


def test_deletions_past_the_records_horizon_take_what_the_sql_stores_take(stores):
    _retention(stores, stores.now - 5 * DAY - 3 * HOUR)
    deletions = [
        {"endpoints": ["e1"], "client_ids": ["b"], "end_ms": stores.today - 3 * DAY + HOUR},
        {"client_ids": ["c"]},
        {"endpoints": ["e2"], "end_ms": stores.today - 7 * DAY - HOUR},
        # Everyone's, up to a 16-day block's start: the SQL store keeps the count of a block
        # a deletion's end falls inside (its days forgotten, the block not), which ClickHouse,
        # reading days, does not (docs/clickhouse.md "Deletions, rewrites, retention").
        {"end_ms": stores.today // (16 * DAY) * 16 * DAY - 1},
        {"endpoints": ["e1"], "end_ms": stores.today - 6 * DAY + 2 * HOUR},
    ]
    for selection in deletions:
        expected, got = stores.both(_in_transaction, ch_deletion.delete_records, **selection)
        assert got == expected, selection
        _counts(stores)
    _every_statistic(stores)


def _counts(stores: Stores):
    """Between deletions, the counts of every filter and their top lists by question: equal
    (every statistic is read after the last)."""
    for filters in _filters(stores):
        said = (filters.values, filters.search, filters.start_ms)
        expected, got = stores.both(statistics.count, ch_statistics.count, filters)
        assert got == expected, said
        expected, got = stores.both(statistics.top, ch_statistics.top, filters, "question", 5, True)
        assert got == expected, said


def _in_transaction(**selection):
    """The SQL store's deletion as DELETE /v2/activity-log runs it: in a write transaction."""
    with write_transaction():
        return sql_deletion.delete_records(**selection)


def test_expired_statistics_are_gone_from_both(stores):
    _retention(stores, stores.now - 3 * DAY)
    before = stores.now - 7 * DAY - 5 * HOUR
    expected, got = stores.both(sql_deletion.expire_statistics, ch_deletion.expire_statistics, before)
    assert got > 0 and expected > 0
    with inside(stores.ch):
        assert ch_statistics.statistics_start(stores.clickhouse) == before // DAY * DAY
    _every_statistic(stores)


class _CutShort:
    """A connection whose first DELETE of records fails, as a process stopped between a
    deletion's two turns would leave it."""

    def __init__(self, connection):
        self.connection = connection
        self.cut = False

    def command(self, sql, params=None):
        if not self.cut and sql.startswith(f"DELETE FROM {self.connection.target.database}.records "):
            self.cut = True
            raise RuntimeError("stopped")
        return self.connection.command(sql, params)

    def __getattr__(self, name):
        return getattr(self.connection, name)


def test_a_deletion_cut_short_and_run_again_counts_down_once(stores):
    _retention(stores, stores.now - 6 * DAY)
    selection = {"endpoints": ["e1"], "client_ids": ["a"], "end_ms": stores.today - DAY}
    cut = _CutShort(stores.clickhouse)
    with inside(stores.ch), pytest.raises(RuntimeError, match="stopped"):
        ch_deletion.delete_records(cut, **selection)
    assert cut.cut
    expected, got = stores.both(_in_transaction, ch_deletion.delete_records, **selection)
    assert got == expected > 0
    _every_statistic(stores)
