"""chDB, ClickHouse inside the test's own process (PyPI `chdb`, setup.cfg's `clickhouse` extra,
which the test command installs): the record store's ClickHouse tests run on it. Where it cannot
be imported (a platform with no wheel), those tests skip and the run says so in red."""

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
