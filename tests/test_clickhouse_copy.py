"""`flask copy-to-clickhouse` (docs/clickhouse.md "Moving an existing store into ClickHouse"): the
records of the SQL store (SQLite and PostgreSQL, rows and frozen blocks), stored over HTTP, copied
into chDB; every page of the log then read from each store must be the same rows, and every
statistic, past the records' horizon too, the same answer, which the SQL store computes
independently."""

import os
import re
import signal
import subprocess
import sys

import pytest
from test_clickhouse_records import _records, every_page_the_same
from test_clickhouse_statistics import DAY, Stores, _every_statistic, inside
from test_clickhouse_statistics import _records as ten_days

from models.clickhouse import copied_statistics, copying, counts, numbers
from models.clickhouse.dims import day_text
from models.clients import clients as sql_clients
from models.clients import deletion as sql_deletion
from models.engine.database import connection as database_connection
from models.engine.database import query, write_transaction
from models.runtime.clock import now_ms
from models.statistics import rollups

from support import processes
from support.helpers import API_KEY, AUTH
from support.servers import ROOT

HOUR_MS = 3_600_000

# The ClickHouse store held to the SQL one: the `engine` is the SQL store's (chDB is the other side).
# `slow`: minutes of a worker in all; the fast lane leaves them to the whole run.
pytestmark = [pytest.mark.sql_store, pytest.mark.slow]


@pytest.fixture
def stored(make_app, database, clickhouse):
    """The app with the test records in its SQL store, some frozen; (the app, ClickHouse, the
    target that names it, the time the records were made at)."""
    app, now = _sql_store(make_app)
    return app, clickhouse, f"chdb://{clickhouse.target.folder}", now


def _sql_store(make_app):
    """(an app with the test records in its SQL store, some frozen; the time they were made at)."""
    app = make_app(ANALYTICS_HOT_HOURS=2)
    now = now_ms()
    records = _records(now)
    for start in range(0, len(records), 60):
        assert app.test_client().post("/v2/ingest", json=records[start : start + 60], headers=AUTH).status_code == 200
    with app.app_context(), database_connection():
        assert query("SELECT count(*) FROM record_block").fetchone()[0] > 0
        assert query("SELECT count(*) FROM record").fetchone()[0] > 0
    return app, now


def _copy(app, target, *options):
    return app.test_cli_runner().invoke(args=["copy-to-clickhouse", target, *options])


def _held(clickhouse) -> tuple[int, int]:
    """(records, distinct numbers) in ClickHouse."""
    return tuple(clickhouse.rows(f"SELECT count(), uniqExact(id) FROM {clickhouse.target.database}.records")[0])


def _same_log(app, clickhouse, now):
    """Every page of the log, with every filter, order and search mode, the SQL store's (the
    records' differential test, on these stores: imported by a name pytest does not collect)."""
    with app.app_context(), database_connection():
        every_page_the_same((app, clickhouse, now))


def test_a_copy_holds_every_page_of_the_log_and_a_second_copies_nothing(stored):
    app, clickhouse, target, now = stored
    result = _copy(app, target)
    assert result.exit_code == 0, result.output
    assert "Copied 240 records" in result.output
    assert "Counts checked: 240 records of 3 endpoints over" in result.output
    _same_log(app, clickhouse, now)  # rows equal, their numbers with them
    with app.app_context(), database_connection():
        # New records are numbered after every number the SQL store handed out.
        assert numbers.top() == 240
    again = _copy(app, target)
    assert again.exit_code == 0, again.output
    assert "Copied 0 records in 0 batches" in again.output and "Counts checked: 240 records" in again.output
    assert _held(clickhouse) == (240, 240)


def test_new_numbers_come_after_every_cursor_kept_in_the_sql_database(make_app, database, clickhouse, tmp_path):
    """An output started "now" keeps the highest number as its cursor; the records at the top
    deleted since, the copy's counter still goes past the cursor, so the output misses nothing
    ClickHouse numbers next."""
    app, now = _sql_store(make_app)
    client = app.test_client()
    made = client.post(
        "/v2/output", json={"kind": "file", "url": f"file://{tmp_path}/out.jsonl", "start": "now"}, headers=AUTH
    )
    assert made.status_code == 201 and made.get_json()["cursor"] == 240, made.get_json()
    newest = _records(now)[-1]  # numbered 240: its client's records on its endpoint go
    chosen = {"endpointId": newest["endpointId"], "clientId[]": [newest["clientId"]]}
    response = client.delete("/v2/activity-log", query_string=chosen, headers=AUTH)
    assert response.status_code == 200, response.get_json()
    result = _copy(app, f"chdb://{clickhouse.target.folder}")
    assert result.exit_code == 0, result.output
    with app.app_context(), database_connection():
        assert query("SELECT MAX(id) FROM record").fetchone()[0] < 240
        assert numbers.top() == 240


def test_a_copy_cut_short_goes_on_where_it_stopped(stored):
    app, clickhouse, target, now = stored
    first = _copy(app, target, "--batch-size", "7", "--batches", "3")
    assert first.exit_code == 0, first.output
    assert "in 3 batches" in first.output and "run the command again" in first.output
    assert "Counts checked" not in first.output
    held, _ = _held(clickhouse)
    assert 3 <= held <= 21  # a batch holds one day's records at most
    second = _copy(app, target, "--batch-size", "7", "--batches", "5")
    assert second.exit_code == 0, second.output
    assert _held(clickhouse)[0] > held
    rest = _copy(app, target, "--batch-size", "50")
    assert rest.exit_code == 0, rest.output
    assert "Counts checked: 240 records" in rest.output
    assert _held(clickhouse) == (240, 240)  # nothing stored twice
    _same_log(app, clickhouse, now)


def test_a_copy_killed_midway_goes_on_and_stores_nothing_twice(make_app, database, tmp_path):
    """The command in a process of its own, SIGKILLed after a few batches, then run again in
    another (chDB lets one process open a folder, and this one keeps its own open): it copies
    only the rest, and the counts check finds every endpoint's days equal, nothing twice."""
    _sql_store(make_app)
    target = f"chdb://{tmp_path / 'clickhouse'}"
    environment = {**os.environ, "ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}
    command = [os.path.join(os.path.dirname(sys.executable), "flask"), "--app", "wsgi", "copy-to-clickhouse", target]
    process = subprocess.Popen(
        [*command, "--batch-size", "4"],
        cwd=ROOT,
        env=environment,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        said = [process.stderr.readline() for _ in range(3)]
        assert all(line.endswith(" records copied\n") for line in said), said
    finally:
        processes.stop(process, signal.SIGKILL)
    rest = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    output = rest.stdout + rest.stderr
    assert rest.returncode == 0, output
    copied = int(re.search(r"Copied (\d+) records", output).group(1))
    assert 0 < copied <= 240 - 3, "killed after three batches, before the end"
    assert "Counts checked: 240 records" in output


def test_records_deleted_after_the_copy_are_named_by_endpoint_and_day(stored):
    app, clickhouse, target, now = stored
    assert _copy(app, target).exit_code == 0
    end = now - 3 * HOUR_MS  # the records made at that very time (every fifth): some of "home"'s
    response = app.test_client().delete(
        "/v2/activity-log", query_string={"endpointId": "home", "endTime": end}, headers=AUTH
    )
    assert response.status_code == 200, response.get_json()
    again = _copy(app, target)
    assert again.exit_code != 0
    assert "the record counts differ on" in again.output
    assert "home 20" in again.output and "in ANALYTICS_DATABASE" in again.output and "in ClickHouse" in again.output
    assert "office" not in again.output and "lab" not in again.output


@pytest.mark.parametrize(
    "target, said",
    [
        ("chdb://relative/folder", "chdb:// takes a folder, not a host"),
        ("chdb:///", "needs an absolute folder"),
        ("postgresql://me@localhost/analytics", "is not a ClickHouse"),
        ("clickhouse://default@127.0.0.1:1/analytics", "cannot use the ClickHouse at clickhouse://default@127.0.0.1:1"),
        ("clickhouse://default@127.0.0.1:1/two-words", "is not a plain name"),
    ],
)
def test_a_bad_target_is_a_clear_error_that_writes_nothing(stored, target, said):
    app, clickhouse, _, _ = stored
    result = _copy(app, target)
    assert result.exit_code != 0
    assert said in result.output and "Traceback" not in result.output
    assert _held(clickhouse) == (0, 0)
    with app.app_context(), database_connection():
        assert numbers.top() == 0


@pytest.fixture
def past_horizon(make_app, database, clickhouse):
    """The SQL store with ten days of records (some frozen), a client no longer logged whose
    queries it then counts anonymously, retention past a ragged edge, a client's deletion that
    forgets its counts past the records' horizon, and the statistics' expiry: its statistics
    hold days and counts its records no longer give. Stores whose two sides are the one app
    (ClickHouse keeps its client entries and marks in that app's database)."""
    app = make_app(ANALYTICS_HOT_HOURS=2)
    now = now_ms()
    stores = Stores(app, app, clickhouse, now, now // DAY * DAY)
    # One record at "now" whatever the time of day: just after midnight the random ones would
    # leave today empty, and the statistics would hold nine days, not ten.
    _post(app, ten_days(stores.today - 10 * DAY, now, 600, 46) + ten_days(now, now + 1, 1, 48))
    with inside(app):
        assert sql_clients.set_logged("e1", "a", False)[1] > 0
    _post(app, ten_days(stores.today - 3 * DAY, now, 60, 47, clients="a"))
    with inside(app):
        assert sql_deletion.delete_records(end_ms=now - 4 * DAY - 5 * HOUR_MS, batch_size=250, expire=True) > 0
        with write_transaction():
            sql_deletion.delete_records(endpoints=["e2"], client_ids=["b"], end_ms=stores.today - 2 * DAY + HOUR_MS)
        assert sql_deletion.expire_statistics(stores.today - 8 * DAY - 5 * HOUR_MS) > 0
        assert query("SELECT count(*) FROM record_block").fetchone()[0] > 0
        assert query("SELECT MIN(ts) FROM record").fetchone()[0] > stores.today - 4 * DAY
    return stores


def _post(app, records: list[dict]):
    for start in range(0, len(records), 100):
        response = app.test_client().post("/v2/ingest", json=records[start : start + 100], headers=AUTH)
        assert response.status_code == 200, response.get_json()


def test_the_statistics_past_the_records_horizon_are_copied_and_a_second_run_adds_nothing(past_horizon):
    stores = past_horizon
    target = f"chdb://{stores.clickhouse.target.folder}"
    result = _copy(stores.sql, target)
    assert result.exit_code == 0, result.output
    assert re.search(r"Statistics carried: [1-9]\d* counts added over [1-9]\d* days", result.output), result.output
    assert "and the daily statistics of 10 days, equal per endpoint and day" in result.output, result.output
    _every_statistic(stores)
    with inside(stores.sql):
        # A record stamped before the expiry stored later is counted by neither store's reads.
        assert counts.statistics_from() == rollups.statistics_from() == stores.today - 9 * DAY
    again = _copy(stores.sql, target)
    assert again.exit_code == 0, again.output
    assert "Copied 0 records" in again.output and "Statistics carried: 0 counts added over 0 days" in again.output


class _AnswersLost:
    """A connection whose inserts into the counts are each sent twice (a retry after an answer
    lost), and whose third one, once stored, fails (the process stopped before it heard back)."""

    def __init__(self, connection):
        self.connection = connection
        self.sent = 0

    def insert(self, table, *args, **kwargs):
        self.connection.insert(table, *args, **kwargs)
        if table.endswith(".daily_counts"):
            self.connection.insert(table, *args, **kwargs)
            self.sent += 1
            if self.sent == 3:
                raise RuntimeError("stopped")

    def __getattr__(self, name):
        return getattr(self.connection, name)


def test_statistics_sent_twice_and_a_carry_cut_short_count_each_day_once(past_horizon):
    stores = past_horizon
    lost = _AnswersLost(stores.clickhouse)
    with inside(stores.sql):
        assert copying.copy(stores.clickhouse).done
        with pytest.raises(RuntimeError, match="stopped"):
            copied_statistics.carry(lost)
    assert lost.sent == 3
    result = _copy(stores.sql, f"chdb://{stores.clickhouse.target.folder}")
    assert result.exit_code == 0, result.output
    # Its check held every day's counts per endpoint to the SQL store's rollups: none twice.
    assert "Copied 0 records" in result.output and "the daily statistics of 10 days, equal" in result.output


@pytest.mark.against_sqlite  # the check's wording: the same on both SQL engines
def test_a_statistics_day_that_differs_is_named(past_horizon):
    stores = past_horizon
    assert _copy(stores.sql, f"chdb://{stores.clickhouse.target.folder}").exit_code == 0
    day = stores.today // DAY - 6
    stores.clickhouse.insert(
        f"{stores.clickhouse.target.database}.daily_counts",
        ("day", "field", "endpoint", "value", "second", "domain", "n"),
        [(day, "", "e1", "", "", "", 5), (day, "rr_type", "e2", "A", "", "", -2)],
        days=("day",),
    )
    with inside(stores.sql), pytest.raises(copying.CountsDiffer) as raised:
        copied_statistics.check(stores.clickhouse)
    said = str(raised.value)
    assert said.startswith("the daily statistics differ on 2 counts of a day: "), said
    assert f"records of e1 {day_text(day)}: " in said and f"rr_type of e2 {day_text(day)}: " in said
