"""The rollups counted behind the records (models/statistics/rollups.py, app/jobs/counting.py): the
service's counting process catches up with what was stored (and is started again when it dies),
a batch counts the waiting records itself once they pass ANALYTICS_COUNT_BEHIND, and records
that expire are counted before they go. That every answer is exact whatever is waiting:
tests/test_statistics_agree.py."""

import fcntl
import os
import signal
import time
from contextlib import contextmanager

import pytest

import models.engine.database
import models.statistics.counting
import models.statistics.rollups as rollups
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import API_KEY, AUTH, ingest, record, samples, wait_for
from support.stores import is_postgres, records_scalar, run_sql, scalar

DAY = 86_400_000
COUNTED = "SELECT CAST(value AS BIGINT) FROM store_setting WHERE name = 'rollups_counted_through'"
NEWEST = "SELECT COALESCE(MAX(id), 0) FROM {records}"

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


@pytest.fixture
def app_behind(make_app):
    """Apps whose stored records wait to be counted until more than `behind` of them do."""

    def make(behind: int, **config):
        models.statistics.counting.behind_limit = behind  # as a web worker sets it (conftest resets it)
        return make_app(ANALYTICS_COUNT_BEHIND=behind, **config)

    return make


def batch(first: int, n: int, day: str = "2024-05-01") -> list[dict]:
    return [record("home", f"c{i % 3}", f"{day}T10:{(first + i) % 60:02d}:00Z", f"n{i}.example") for i in range(n)]


def count(client, start: str, end: str) -> int:
    response = client.get(f"/v2/statistic/count?startTime={start}&endTime={end}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["count"]


def test_a_batch_counts_the_waiting_records_once_they_pass_the_bound(app_behind, database):
    client = app_behind(behind=10).test_client()
    ingest(client, *batch(0, 8))
    assert scalar(database, COUNTED) == 0, "8 records may wait"
    assert scalar(database, "SELECT COUNT(*) FROM rollup") == 0
    assert count(client, "2024-05-01T00:00:00Z", "2024-05-02T23:59:59.999Z") == 8, "counted from the records"

    ingest(client, *batch(8, 8))
    assert scalar(database, COUNTED) == records_scalar(database, NEWEST) == 16, "16 may not: the batch counted them all"
    assert scalar(database, "SELECT SUM(n) FROM rollup WHERE dim = 0") == 16, "the daily totals hold them"
    assert count(client, "2024-05-01T00:00:00Z", "2024-05-02T23:59:59.999Z") == 16, "and are not counted twice"


def test_metrics_show_the_records_waiting_to_be_counted(app_behind, database):
    """/metrics says how many stored records wait for the counting process: an operator sees it
    fall behind before the requests must count for it."""
    client = app_behind(behind=10).test_client()

    def waiting():
        response = client.get("/metrics", headers=AUTH)
        assert response.status_code == 200, response.get_data(as_text=True)
        return samples(response.get_data(as_text=True))[("dns_analytics_records_not_counted", ())]

    assert waiting() == 0
    ingest(client, *batch(0, 8))
    assert waiting() == 8
    ingest(client, *batch(8, 8))  # past the bound: the batch counted them all
    assert waiting() == 0


def test_records_that_expire_are_counted_into_the_statistics_first(app_behind, database):
    app = app_behind(behind=1_000_000, ANALYTICS_RETENTION_DAYS=30)
    client, runner = app.test_client(), app.test_cli_runner()
    old_day = now_ms() // DAY * DAY - 40 * DAY
    old = format_ms(old_day)[:10]
    ingest(client, *batch(0, 12, old), *batch(0, 5, format_ms(now_ms() - DAY)[:10]))
    assert scalar(database, COUNTED) == 0, "nothing counted yet"

    result = runner.invoke(args=["retention"])
    assert result.exit_code == 0, result.output
    assert records_scalar(database, "SELECT COUNT(*) FROM {records}") == 5, "the old day's records expired"
    # Past the records' horizon only the daily statistics answer: they were counted before the
    # records went, with the rest of what was waiting.
    assert count(client, format_ms(old_day), format_ms(old_day + DAY - 1)) == 12
    assert scalar(database, COUNTED) == records_scalar(database, NEWEST)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_service_counts_what_it_stores(tmp_path, database, workers):
    from support.servers import Gunicorn

    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=workers)
    try:
        for i in range(20):
            status, body = server.call("POST", "/v2/ingest", batch(i, 10), AUTH)
            assert (status, body["accepted"]) == (200, 10)
        # Far under ANALYTICS_COUNT_BEHIND: only the counting process counts them.
        wait_for(lambda: scalar(database, COUNTED) >= 200, 20, "the counting process to count 200 records")
        assert scalar(database, COUNTED) == records_scalar(database, NEWEST) == 200, server.log_path.read_text()
        assert scalar(database, "SELECT SUM(n) FROM rollup WHERE dim = 0") == 200
        status, body = server.call("GET", "/v2/statistic/count?startTime=2024-05-01T00:00:00Z", headers=AUTH)
        assert (status, body["count"]) == (200, 200)
    finally:
        server.stop()


@pytest.mark.parametrize("stopped", ["counting process", "its arbiter"])
def test_counting_goes_on_when_the_counting_process_dies(tmp_path, database, stopped):
    """Killed, the counting process is started again by gunicorn's dirty arbiter; with its
    arbiter killed, it stops by itself (an orphan would count on with what it started with)
    and the master starts both again."""
    from support.servers import Gunicorn, alive

    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    try:
        wait_for(lambda: server.counting_pid() is not None, 20, "the counting process")
        first, arbiter = server.counting_pid(), server.counting_arbiter_pid()
        os.kill(first if stopped == "counting process" else arbiter, signal.SIGKILL)
        wait_for(lambda: not alive(first), 10, "the first counting process to end")
        for i in range(10):
            status, body = server.call("POST", "/v2/ingest", batch(i, 10), AUTH)
            assert (status, body["accepted"]) == (200, 10)
        wait_for(lambda: scalar(database, COUNTED) >= 100, 30, "a new counting process to count")
        assert scalar(database, "SELECT SUM(n) FROM rollup WHERE dim = 0") == 100
        assert server.counting_pid() not in (None, first)
    finally:
        server.stop()


def test_a_reload_starts_the_counting_process_again(tmp_path, database):
    """A reload (HUP) gives the service a new counting process, as it does new workers (on the
    code and configuration on disk), under the same arbiter; that one counts on."""
    from support.servers import Gunicorn, alive, children

    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    try:
        wait_for(lambda: server.counting_pid() is not None, 20, "the counting process")
        first, arbiter = server.counting_pid(), server.counting_arbiter_pid()
        os.kill(server.process.pid, signal.SIGHUP)
        wait_for(lambda: not alive(first), 10, "the first counting process to end")
        wait_for(lambda: server.counting_pid() is not None, 20, "a new counting process")
        time.sleep(1.5)  # a surplus process would be stopped within a second by its arbiter
        after = children(arbiter)
        assert len(after) == 1 and after[0] != first, server.log_path.read_text()
        for i in range(10):
            status, body = server.call("POST", "/v2/ingest", batch(i, 10), AUTH)
            assert (status, body["accepted"]) == (200, 10)
        wait_for(lambda: scalar(database, COUNTED) >= 100, 30, "the new counting process to count")
        assert scalar(database, "SELECT SUM(n) FROM rollup WHERE dim = 0") == 100
        assert children(arbiter) == after, server.log_path.read_text()
    finally:
        server.stop()


@contextmanager
def counting_turn_held(database):
    """Hold the counting's turn as a counting process would: the flock on `<database>-counting`,
    or PostgreSQL's advisory lock of the test's schema."""
    if not is_postgres(database):
        with open(f"{database}-counting", "a") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            yield
        return
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f"SELECT pg_advisory_lock({0x444E5343}, hashtext(current_schema()))")
        yield


def test_counting_waits_while_another_process_has_the_turn(tmp_path, database):
    from support.servers import Gunicorn

    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    try:
        with counting_turn_held(database):
            for i in range(10):
                status, body = server.call("POST", "/v2/ingest", batch(i, 10), AUTH)
                assert (status, body["accepted"]) == (200, 10)
            time.sleep(1.0)  # twenty of the counting process's looks
            assert scalar(database, COUNTED) == 0, "counted while another process had the turn"
            status, body = server.call("GET", "/v2/statistic/count?startTime=2024-05-01T00:00:00Z", headers=AUTH)
            assert (status, body["count"]) == (200, 100), "answers are exact all the same"
        wait_for(lambda: scalar(database, COUNTED) >= 100, 20, "counting once the turn is free")
        assert scalar(database, "SELECT SUM(n) FROM rollup WHERE dim = 0") == 100
    finally:
        server.stop()


def test_names_first_seen_read_what_is_counted_and_what_waits_together(app_behind, database):
    app = app_behind(behind=0)
    client = app.test_client()
    week = "startTime=2024-05-08T00:00:00Z&endTime=2024-05-14T23:59:59.999Z"

    def seen(query=""):
        response = client.get(f"/v2/statistic/first-seen/question?{week}{query}", headers=AUTH)
        assert response.status_code == 200, response.json
        return [(item["value"], item["firstSeen"][:19]) for item in response.json["names"]]

    ingest(
        client,
        record("e1", "a", "2024-05-10T10:00:00Z", "late.example"),
        record("e1", "a", "2024-05-11T10:00:00Z", "x.example"),
    )
    assert scalar(database, COUNTED) == 2, "counted as stored"
    models.statistics.counting.behind_limit = 1_000_000
    ingest(
        client,
        record("e1", "b", "2024-05-01T10:00:00Z", "late.example"),  # came late: asked before the week
        record("e2", "b", "2024-05-12T10:00:00Z", "x.example"),  # new on e2, old on e1
        record("e2", "b", "2024-05-13T10:00:00Z", "new.example"),
    )
    assert scalar(database, COUNTED) == 2, "these wait"
    assert seen() == [("new.example", "2024-05-13T10:00:00"), ("x.example", "2024-05-11T10:00:00")]
    assert seen("&endpointId=e2") == [("new.example", "2024-05-13T10:00:00"), ("x.example", "2024-05-12T10:00:00")]
    assert seen("&endpointId=e1") == [("x.example", "2024-05-11T10:00:00")]


def test_a_count_of_many_thousand_rows_holds_every_record_once_in_every_dim(app_behind, database):
    """One count writes tens of thousands of rollup rows, several statements' worth on SQLite
    (models.engine.sqlite.SQLite.insert_rows): every record is in every dim once, and every name has
    its spans."""
    client = app_behind(behind=0).test_client()
    n = 8_000
    when = [f"2024-05-0{1 + i % 3}T{i % 24:02d}:{i % 60:02d}:00Z" for i in range(n)]
    ingest(client, *[record(f"e{i % 2}", f"c{i}", when[i], f"n{i}.example", action=i % 3) for i in range(n)])
    # On SQLite a statement takes 256 rows: these are the rows of dozens.
    assert scalar(database, "SELECT COUNT(*) FROM rollup") > 3 * 6_553, "rows of several statements"
    counted = [dim.id for dim in rollups.DIMS if dim.built_from is None]
    sums = run_sql(database, "SELECT dim, SUM(n) FROM rollup GROUP BY dim")
    assert {dim: total for dim, total in sums if dim in counted} == dict.fromkeys(counted, n)
    assert scalar(database, "SELECT COUNT(*) FROM name_seen") == 2 * n, "per endpoint and over all endpoints"


def test_rows_counted_down_to_nothing_go(app_behind, database):
    """Records that expire take their hourly counts with them: thousands of rollup rows
    counted down to 0 are deleted (on SQLite 256 keys a statement), and none is left at 0."""
    app = app_behind(behind=0, ANALYTICS_RETENTION_DAYS=30)
    client, runner = app.test_client(), app.test_cli_runner()
    old_day = now_ms() // DAY * DAY - 40 * DAY
    n = 3_000
    ingest(client, *[record("home", f"c{i}", format_ms(old_day + i * 28_000), f"n{i}.example") for i in range(n)])
    hourly = ", ".join(str(dim.id) for dim in rollups.WITH_RECORDS)
    assert scalar(database, f"SELECT COUNT(*) FROM rollup WHERE dim IN ({hourly})") > 4 * 256

    result = runner.invoke(args=["retention"])
    assert result.exit_code == 0, result.output
    assert records_scalar(database, "SELECT COUNT(*) FROM {records}") == 0
    assert scalar(database, f"SELECT COUNT(*) FROM rollup WHERE dim IN ({hourly})") == 0
    assert scalar(database, "SELECT COUNT(*) FROM rollup WHERE n = 0") == 0
    assert count(client, format_ms(old_day), format_ms(old_day + DAY - 1)) == n, "the day's statistics stay"


@pytest.mark.sqlite_only
def test_rows_many_to_a_statement_are_looked_up_by_their_whole_key(app_behind, database):
    """With the planner's statistics (ANALYZE, as reclaiming space runs it), SQLite looks up
    each key of a deletion of rollup rows by the whole primary key, and each row of an UPDATE
    from a list of values by the record's id, not a scan or a part of the key."""
    import sqlite3

    from models.engine.sqlite import SQLite

    client = app_behind(behind=0).test_client()
    ingest(
        client, *[record(f"e{i % 3}", f"c{i % 50}", format_ms(i * 60_000), f"n{i % 700}.example") for i in range(3_000)]
    )
    with sqlite3.connect(database) as conn:
        conn.execute("ANALYZE")
    dialect = SQLite()
    key = ("dim", "period", "endpoint", "value")
    columns = ("client", "src_ip", "question")
    for table, statements, lookup in (
        (
            "rollup",
            dialect.delete_keyed("rollup", key, [(1, i, 1, i) for i in range(256)], "n = 0"),
            "PRIMARY KEY (dim=? AND period=? AND endpoint=? AND value=?)",
        ),
        (
            "record",
            dialect.update_rows("record", columns, "id", [(1, 1, 1, i) for i in range(3_000)]),
            "INTEGER PRIMARY KEY (rowid=?)",
        ),
    ):
        statement, (parameters,) = statements[0]
        plan = [row[3] for row in run_sql(database, f"EXPLAIN QUERY PLAN {statement}", parameters)]
        searches = [step for step in plan if step.startswith(("SEARCH", "SCAN")) and table in step]
        assert searches and all(step == f"SEARCH {table} USING {lookup}" for step in searches), plan


def test_a_long_tail_counted_aside_in_parts_gives_the_counts_of_counting_as_stored(app_behind, tmp_path, new_database):
    """A tail longer than one part of the counting (10,000 records) is counted part by part and
    merged: the same rollup rows and name spans as counting every batch as it is stored."""
    counted_as_stored, counted_aside = new_database("stored.db"), new_database("aside.db")

    def varied(i: int) -> dict:
        when = f"2024-05-0{1 + i % 4}T{i % 24:02d}:{i % 60:02d}:00Z"
        return record(f"e{i % 3}", f"c{i % 37}", when, f"n{i % 997}.example")

    batches = [[varied(i) for i in range(first, first + 4_200)] for first in range(0, 12_600, 4_200)]
    for name, database, behind in (("stored", counted_as_stored, 0), ("aside", counted_aside, 1_000_000)):
        app = app_behind(behind, ANALYTICS_DATABASE=database, INSTANCE_PATH=str(tmp_path / name / "instance"))
        client = app.test_client()
        for records in batches:
            ingest(client, *records)
        if behind:
            assert scalar(database, COUNTED) == 0
            with app.app_context(), models.engine.database.connection():
                assert models.statistics.counting.catch_up_aside() == 12_600
        assert scalar(database, COUNTED) == records_scalar(database, NEWEST) == 12_600
    rows = "SELECT dim, period, endpoint, value, n FROM rollup ORDER BY dim, period, endpoint, value"
    assert run_sql(counted_aside, rows) == run_sql(counted_as_stored, rows)
    names = "SELECT term, endpoint, first, last FROM name_seen ORDER BY term, endpoint"
    assert run_sql(counted_aside, names) == run_sql(counted_as_stored, names)
