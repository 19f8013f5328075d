"""chDB, ClickHouse inside the test's own process (PyPI `chdb`, setup.cfg's `clickhouse` extra,
which the test command installs): the record store's ClickHouse tests run on it. Where it cannot
be imported (a platform with no wheel), those tests skip and the run says so in red."""

import atexit
import shutil
import tempfile
import uuid

import pytest

UNAVAILABLE = None  # why chDB cannot run here, if it cannot
VERSION = None
name = "chDB"


def probe():
    """Import chDB once and ask its engine's version (conftest calls this at the session's start)."""
    global UNAVAILABLE, VERSION
    if UNAVAILABLE is not None or VERSION is not None:
        return
    try:
        import chdb

        engine = chdb.query("SELECT version()", "TSV").bytes().decode().strip()
        VERSION = f"chdb {chdb.__version__} (ClickHouse {engine})"
    except Exception as exc:  # an import error, or an engine that cannot start here
        UNAVAILABLE = f"{type(exc).__name__}: {exc}"


def needed():
    """Skip the calling test when chDB cannot run here."""
    probe()
    if UNAVAILABLE:
        pytest.skip(banner())


def banner() -> str:
    return f"chDB UNAVAILABLE - every ClickHouse record-store test SKIPPED: {UNAVAILABLE}"


# chDB opens one folder a process (models/clickhouse/connection.py): a test process keeps one
# for its whole run, each test's stores a database of their own in it.
_folder = None


def folder() -> str:
    """This process's chDB folder, made at first use and removed when the process ends."""
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix="analytics-chdb-")
        atexit.register(shutil.rmtree, _folder, True)
    return _folder


def new_store() -> str:
    """An ANALYTICS_RECORD_STORE value naming a new, empty database in this process's folder."""
    needed()
    return f"chdb://{folder()}?database=t{uuid.uuid4().hex}"


def drop(store: str) -> None:
    """Drop the database a store made by new_store() (or a Target) has in the folder."""
    from models.clickhouse import connection
    from models.clickhouse.target import Target, parse

    target = store if isinstance(store, Target) else parse(store)
    connection.connect(target).command(f"DROP DATABASE IF EXISTS {target.database} SYNC")


def record_row(number, ts, **values) -> tuple:
    """A row of the records table (tables.RECORD_COLUMNS' order): record `number` at `ts` (ms),
    home's laptop asking example.com, action 1; keyword arguments replace columns."""
    from models.clickhouse import tables

    row = dict.fromkeys(tables.RECORD_COLUMNS, "")
    row.update({"id": number, "ts": ts, "endpoint": "home", "client": "laptop", "question": "example.com", "action": 1})
    row.update({column: None for column in ("response_time_ms", "cached", "src_asn", "dst_asn")})
    row["registrable_domain"] = row["question"]
    row.update(values)
    return tuple(row[column] for column in tables.RECORD_COLUMNS)
