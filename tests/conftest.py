"""Fixtures: a fresh app on a database of its own per test, its client and CLI runner.

Every test that asks for a database (`database`, `new_database`, or the `app` built on it) runs
once per engine: SQLite, and PostgreSQL on a throwaway server this session starts (see
tests/postgres.py). Tests of what only SQLite has do not ask for one, or are `sqlite_only`.
"""

import nginx
import postgres
import pytest
import stores
import unbound

from app import create_app

from helpers import API_KEY

ENGINES = ("sqlite", "postgresql")
# Real programs the suite runs (each a module with UNAVAILABLE and banner()): when one cannot
# be had, its tests skip and the run says so in red at its start and its end.
REAL_PROGRAMS = {"PostgreSQL": postgres, "nginx": nginx, "Unbound": unbound}


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only: tests something only the SQLite store has")
    postgres.start_once()
    nginx.probe_once()
    unbound.probe()


def pytest_unconfigure(config):
    postgres.CLUSTER.stop()


def pytest_report_header(config):
    lines = []
    if not postgres.UNAVAILABLE:
        lines.append(f"PostgreSQL: {postgres.CLUSTER.version} at {postgres.CLUSTER.url}")
    if not unbound.UNAVAILABLE:
        lines.append(f"Unbound: {unbound.VERSION}")
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_sessionstart(session):
    """The missing programs in red, right below the header (printed by the inner hooks)."""
    yield
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for module in REAL_PROGRAMS.values():
        if module.UNAVAILABLE and reporter is not None:
            reporter.write_line(module.banner(), red=True, bold=True)


def pytest_terminal_summary(terminalreporter):
    # Read at the end: a program may also have failed to start during the run.
    for name, module in REAL_PROGRAMS.items():
        if module.UNAVAILABLE:
            terminalreporter.section(f"{name} NOT TESTED", sep="!", red=True, bold=True)
            terminalreporter.line(module.banner(), red=True, bold=True)


def pytest_generate_tests(metafunc):
    if "engine" in metafunc.fixturenames:
        only_sqlite = metafunc.definition.get_closest_marker("sqlite_only") is not None
        metafunc.parametrize("engine", ENGINES[:1] if only_sqlite else ENGINES)


@pytest.fixture
def new_database(engine, tmp_path):
    """A factory of fresh, empty databases of the test's engine (ANALYTICS_DATABASE values)."""
    if engine == "postgresql" and postgres.UNAVAILABLE:
        pytest.skip(postgres.banner())
    made = []

    def make(name: str = "analytics.db") -> str:
        target = str(tmp_path / name) if engine == "sqlite" else postgres.CLUSTER.new_database()
        made.append(target)
        return target

    yield make
    for target in made:
        stores.drop(target)


@pytest.fixture
def database(new_database):
    return new_database()


@pytest.fixture
def app(tmp_path, database):
    return create_app(
        {
            "TESTING": True,
            # Unexpected exceptions go through the error handler, as in production.
            "PROPAGATE_EXCEPTIONS": False,
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "ANALYTICS_DATABASE": database,
            "ANALYTICS_API_KEY": API_KEY,
        }
    )


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()
