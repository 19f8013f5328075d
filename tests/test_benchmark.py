"""The benchmark still runs end to end, in its small configuration; no timing is asserted."""

import os
import subprocess
import sys

from support import chdb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Rows the report must hold, whatever the figures are.
EXPECTED_ROWS = (
    "| HTTP ingest: POST /v2/ingest |",
    "| raw sqlite3.executemany, same schema and indexes |",
    "| HTTP ingest / raw executemany |",
    "| CSV export: GET /v2/activity-log/csv",
    "| CSV export memory: serving worker's RSS |",
    "| database bytes per record (served database, after checkpoint) |",
    "| GET /v2/client (all) |",
    "| GET /v2/client?endpointId (one endpoint) |",
    "| GET /v2/client?clientId[] (2 clients) |",
    "| activity-log page 0 (endpoint + 30 d + action) |",
    "| activity-log page 1,000 (same) |",
    "| activity-log searchQuestion apex",
    "| count (24 h) |",
    "| count/question (30 d) |",
    "| timeseries/action (30 d) |",
    "| trend/question (24 h vs the 24 h before) |",
    "| DELETE /v2/client of a median client |",
    "| retention of one day:",
)


def _bench(script: str, *arguments, timeout: float = 120) -> str:
    """Run `bench/SCRIPT ARGUMENTS` from the project's root; its standard output (it must succeed)."""
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *arguments], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_benchmark_runs_in_its_smoke_configuration(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    _bench(
        "run.py", "--records", "20000", "--quick", "--calls", "1", "--out", str(out), "--dir", str(tmp_path), "--keep"
    )
    table = out.read_text()
    for row in EXPECTED_ROWS:
        assert row in table, row
    assert "- none: every request answered as expected." in table
    # The measurement of records packed in blocks reads the database the run kept.
    blocks = _bench("record_blocks.py", str(tmp_path / "served.db"), "--hours", "24")
    assert "| 24 h |" in blocks


# Rows the ClickHouse benchmark's report must hold, whatever the figures are.
CLICKHOUSE_ROWS = (
    "| load through the store's batch path (`store_records`, no HTTP) |",
    "| HTTP ingest, gunicorn -w 1, chDB: POST /v2/ingest, 3,000 records |",
    "| HTTP ingest, gunicorn -w 1, SQLite: POST /v2/ingest, 3,000 records |",
    "| HTTP ingest chDB / SQLite |",
    "| CSV export: GET /v2/activity-log/csv, 5,000 rows",
    "| bytes a record on disk, every table (after OPTIMIZE ... FINAL) |",
    "| count/question (30 d) |",
    "| trend/clientId (24 h vs the 24 h before) |",
    "| `records` | 5,000 |",
    "| `question` | LowCardinality(String) |",
)


def test_clickhouse_benchmark_runs_in_its_smoke_configuration(tmp_path):
    chdb.needed()
    out = tmp_path / "clickhouse.md"
    _bench(
        "clickhouse.py",
        *("--records", "5000", "--ingest-records", "3000", "--batch", "1000", "--quick", "--calls", "1"),
        *("--out", str(out), "--dir", str(tmp_path / "work")),
        timeout=300,
    )
    table = out.read_text()
    for row in CLICKHOUSE_ROWS:
        assert row in table, row
    assert "Errors: none: every request answered as expected." in table
