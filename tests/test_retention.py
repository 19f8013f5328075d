"""Retention: expired records are deleted in batches, by the CLI or by one worker's job."""

import os
import sqlite3
import time

import pytest

import models.engine.database
import models.schema.jobs
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import API_KEY, AUTH, clients, ingest, record
from support.servers import Gunicorn

DAY = 86_400_000


def ago(days: float) -> str:
    return format_ms(now_ms() - int(days * DAY))


@pytest.fixture
def app30(make_app, tmp_path, database):
    return make_app(INSTANCE_PATH=str(tmp_path / "i"), ANALYTICS_RETENTION_DAYS=30)


def retention_entries(client):
    response = client.get("/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=retention.run", headers=AUTH)
    return response.json["actions"]


def test_cli_deletes_exactly_the_expired_records(app30):
    client = app30.test_client()
    ingest(
        client,
        record("e1", "old", ago(31), "expired.com"),
        record("e1", "old", ago(30.01), "expired2.com"),
        record("e1", "mixed", ago(40), "expired3.com"),
        record("e1", "mixed", ago(29.99), "kept.com"),
        record("e2", "new", ago(1), "kept2.com"),
    )
    before = clients(client)
    result = app30.test_cli_runner().invoke(args=["retention"])
    assert result.exit_code == 0, result.output
    assert "Deleted 3 records older than 30 days; their statistics are kept 400 days." in result.output

    window = f"startTime={ago(60)}"
    left = client.get(f"/v2/activity-log?{window}", headers=AUTH).json["queries"]
    assert sorted(q["question"] for q in left) == ["kept.com", "kept2.com"]
    after = clients(client)
    assert after["e1"]["clients"]["old"]["lastActivityTime"] is None, "the entry stays, without records"
    assert after["e1"]["clients"]["mixed"]["lastActivityTime"] == before["e1"]["clients"]["mixed"]["lastActivityTime"]
    assert after["e1"]["lastActivityTime"] == before["e1"]["lastActivityTime"], "endpoints never move back"

    entries = retention_entries(client)
    assert len(entries) == 1
    assert entries[0]["keyName"] == "cli"
    assert entries[0]["metadata"]["result"] == {"deletedCount": 3, "expiredStatisticRows": 0}
    assert entries[0]["metadata"]["retentionDays"] == 30

    again = app30.test_cli_runner().invoke(args=["retention"])
    assert "Deleted 0 records" in again.output
    assert len(retention_entries(client)) == 1, "a run that deletes nothing is not logged"


def test_zero_days_keeps_everything(client, runner, app):
    app.config["ANALYTICS_RETENTION_DAYS"] = 0
    ingest(client, record(timestamp=ago(3000)))
    assert "Retention is off" in runner.invoke(args=["retention"]).output
    assert client.get("/v2/data-availability", headers=AUTH).json["recordCount"] == 1


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@pytest.mark.sqlite_only  # PostgreSQL's autovacuum does this on its own schedule
def test_freed_space_is_given_back(app30, database):
    app30.config["ANALYTICS_STATISTICS_RETENTION_DAYS"] = 30  # the statistics go too
    client = app30.test_client()
    for batch in range(4):
        ingest(client, *[record("e1", f"c{i % 20}", ago(40), f"d{batch}-{i}.example.com") for i in range(5000)])
    ingest(client, record(timestamp=ago(1)))
    path = database
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    full = os.path.getsize(path)
    assert app30.test_cli_runner().invoke(args=["retention"]).exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert os.path.getsize(path) < full / 2


def test_the_job_lease_lets_one_holder_run_per_period(app30):
    with app30.app_context(), models.engine.database.connection():
        assert models.schema.jobs.claim("job", "a", 1_000, period_ms=100, lease_ms=50)
        assert not models.schema.jobs.claim("job", "b", 1_010, period_ms=100, lease_ms=50), "a holds it"
        models.schema.jobs.finish("job", "a", 1_020)
        assert not models.schema.jobs.claim("job", "b", 1_030, period_ms=100, lease_ms=50), "not due yet"
        assert models.schema.jobs.claim("job", "b", 1_120, period_ms=100, lease_ms=50), "due again"
        # b dies without finishing: once its lease runs out, someone else may take over.
        assert not models.schema.jobs.claim("job", "a", 1_160, period_ms=100, lease_ms=50)
        assert models.schema.jobs.claim("job", "a", 1_171, period_ms=100, lease_ms=50)


def test_background_job_under_gunicorn_runs_once(tmp_path):
    env = {
        "ANALYTICS_DATABASE": str(tmp_path / "bg.db"),
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_RETENTION_DAYS": "30",
        "ANALYTICS_RETENTION_INTERVAL": "1",
    }
    server = Gunicorn(tmp_path, env, workers=2)
    try:
        batch = [record("e1", "old", ago(45), f"x{i}.com") for i in range(30)] + [record("e1", "new", ago(2))]
        assert server.call("POST", "/v2/ingest", batch, AUTH) == (200, {"accepted": 31, "pastRetention": 30})
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            count = server.call("GET", "/v2/data-availability", headers=AUTH)[1]["recordCount"]
            if count == 1:
                break
            time.sleep(0.2)
        assert count == 1, "the expired records went"
        time.sleep(2.5)  # a few more periods: later runs find nothing
        status, body = server.call(
            "GET", "/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=retention.run", headers=AUTH
        )
        assert [a["metadata"]["result"]["deletedCount"] for a in body["actions"]] == [30]
        assert body["actions"][0]["keyName"] == "retention"
        # The operator sees in gunicorn's own log why records went.
        log = server.log_path.read_text()
        assert "[INFO] retention: deleted 30 records older than" in log, log
        assert "(ANALYTICS_RETENTION_DAYS=30)" in log
    finally:
        server.stop()
