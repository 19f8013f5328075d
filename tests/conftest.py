"""Fixtures: a fresh app on a database of its own per test, its client and CLI runner.

Every test that asks for a database (`database`, `new_database`, or the `app` built on it) runs
once per engine: SQLite, ClickHouse (chDB, the records only: docs/testing.md "Engines"), and
PostgreSQL on a throwaway server this session starts (see
tests/support/postgres.py). Tests of what only SQLite has do not ask for one, or are `sqlite_only`; tests of
what only PostgreSQL has are `postgres_only`.

Tiers: a test that runs a real server or program (gunicorn, nginx, Unbound, Chromium,
PostgreSQL, a feed's process) is marked `system`, by SYSTEM_MODULES or its PostgreSQL engine;
`scripts/test --fast` (pytest -m "not system") runs the rest, and then nothing may start one
(servers.py and the others refuse, so a test missing its mark fails loudly).
"""

import inspect
import os

import pytest

from app import create_app

from support import chdb, nginx, postgres, resolvers, rsyslog, stores, unbound
from support.helpers import API_KEY
from support.servers import FAST_ONLY

# The third, `clickhouse`: the records in chDB, the rest in SQLite (docs/testing.md, "Engines").
ENGINES = ("sqlite", "postgresql", "clickhouse")
# The engines whose records are kept in ANALYTICS_DATABASE: a test of the SQL store's own parts
# (its rows and blocks, its counting, its migrations) is `sql_store`.
SQL_ENGINES = ("sqlite", "postgresql")
# Real programs the suite runs (each a module with UNAVAILABLE and banner()): when one cannot
# be had, its tests skip and the run says so in red at its start and its end.
REAL_PROGRAMS = {
    "PostgreSQL": postgres,
    "nginx": nginx,
    "Unbound": unbound,
    "rsyslog": rsyslog,
    "chDB": chdb,
    **{program.name: program for program in resolvers.PROGRAMS},
}


# Test modules whose every test runs a real server or program.
SYSTEM_MODULES = {
    "test_backup",
    "test_benchmark",
    "test_browser",
    "test_chunked_bodies",
    "test_consistent_reads",
    "test_dashboard",
    "test_dnstap",
    "test_fair_shares",
    "test_faults",
    "test_feed_processes",
    "test_gunicorn",
    "test_output_delivery",
    "test_proxy",
    "test_quick_starts",
    "test_resolvers",
    "test_wal",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "sqlite_only: tests something only the SQLite store has")
    config.addinivalue_line("markers", "postgres_only: tests something only the PostgreSQL store has")
    config.addinivalue_line("markers", "sql_store: tests the SQL record store's own parts (not on ClickHouse)")
    config.addinivalue_line("markers", "second_process: another process opens the test's store (not on chDB)")
    config.addinivalue_line(
        "markers",
        "against_sqlite: holds ClickHouse to the SQL store's answers on SQLite (the suite holds SQLite and "
        "PostgreSQL to each other)",
    )
    config.addinivalue_line("markers", "system: runs a real server or program (deselect with -m 'not system')")
    config.addinivalue_line("markers", "slow: starts nothing but takes a minute of a worker (not in the fast lane)")
    if "not system" in (config.getoption("markexpr") or ""):
        os.environ[FAST_ONLY] = "1"


def pytest_collection_modifyitems(config, items):
    system = pytest.mark.system
    kept, second_process = [], []
    for item in items:
        module = item.module.__name__ if item.module else ""
        engine = getattr(item, "callspec", None) and item.callspec.params.get("engine")
        starts = _starts_a_server(item)
        if engine == "clickhouse" and starts:
            # gunicorn or a feed's process would open the test's chDB folder, which this process
            # has open (docs/testing.md, "Engines"): as `second_process`, on the SQL engines only.
            second_process.append(item)
            continue
        kept.append(item)
        if module in SYSTEM_MODULES or engine in ("postgresql", "clickhouse") or starts:
            item.add_marker(system)
    if second_process:
        config.hook.pytest_deselected(items=second_process)
        items[:] = kept


def _starts_a_server(item) -> bool:
    """Tests in mixed modules that run gunicorn or a feed's process name it in their source, or
    in the source of a fixture they use."""
    functions = [item.function]
    for definitions in item._fixtureinfo.name2fixturedefs.values():
        functions += [definition.func for definition in definitions]
    for function in functions:
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            continue
        if any(name in source for name in ("Gunicorn(", "subprocess.", "single_worker(", "Popen(", "Nginx(")):
            return True
    return False


def pytest_sessionstart(session):
    """A parallel run (pytest-xdist, scripts/test) probes the real programs in its controller,
    which runs no test, before it starts its workers: a missing one is said at the start, and
    the workers share the PostgreSQL server it starts (they are given its address)."""
    if not _parallel_controller(session.config) or os.environ.get(FAST_ONLY):
        return
    _probe()
    if postgres.CLUSTER.url:
        os.environ["ANALYTICS_TEST_POSTGRES"] = postgres.CLUSTER.url
    _announce(session.config)


def pytest_collection_finish(session):
    """The real programs the selected tests need, probed now: so a missing one is known (and
    said in red) at the start, and a fast run probes nothing."""
    if os.environ.get(FAST_ONLY):
        return
    if any(item.get_closest_marker("system") for item in session.items):
        _probe()
    _announce(session.config)


def _parallel_controller(config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _probe():
    postgres.start_once()
    nginx.probe_once()
    unbound.probe()
    rsyslog.probe()
    chdb.probe()
    for program in resolvers.PROGRAMS:
        program.probe()


def _announce(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:  # a parallel run's worker: its controller says it
        return
    if postgres.CLUSTER.url:
        reporter.write_line(f"PostgreSQL: {postgres.CLUSTER.version} at {postgres.CLUSTER.url}")
    if unbound.VERSION and not unbound.UNAVAILABLE:
        reporter.write_line(f"Unbound: {unbound.VERSION}")
    if rsyslog.VERSION and not rsyslog.UNAVAILABLE:
        reporter.write_line(f"rsyslog: {rsyslog.VERSION}")
    if chdb.VERSION and not chdb.UNAVAILABLE:
        reporter.write_line(f"chDB: {chdb.VERSION}")
    for program in resolvers.PROGRAMS:
        if program.VERSION and not program.UNAVAILABLE:
            reporter.write_line(f"{program.name}: {program.VERSION}")
    for module in REAL_PROGRAMS.values():
        if module.UNAVAILABLE:
            reporter.write_line(module.banner(), red=True, bold=True)


def pytest_sessionfinish(session):
    """A parallel run's worker tells its controller which programs it could not start."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["unavailable"] = {
            name: module.UNAVAILABLE for name, module in REAL_PROGRAMS.items() if module.UNAVAILABLE
        }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """In a parallel run's controller: a worker's programs that could not start are the run's."""
    for name, why in getattr(node, "workeroutput", {}).get("unavailable", {}).items():
        if not REAL_PROGRAMS[name].UNAVAILABLE:
            REAL_PROGRAMS[name].UNAVAILABLE = why


def pytest_unconfigure(config):
    postgres.CLUSTER.stop()


def pytest_terminal_summary(terminalreporter):
    # Read at the end: a program may also have failed to start during the run.
    for name, module in REAL_PROGRAMS.items():
        if module.UNAVAILABLE:
            terminalreporter.section(f"{name} NOT TESTED", sep="!", red=True, bold=True)
            terminalreporter.line(module.banner(), red=True, bold=True)


def pytest_generate_tests(metafunc):
    # A test that pairs the engine with values of its own (e.g. releases that had it) says so.
    chosen = any("engine" in marker.args[0] for marker in metafunc.definition.iter_markers("parametrize"))
    if "engine" in metafunc.fixturenames and not chosen:
        only_sqlite = any(metafunc.definition.get_closest_marker(mark) for mark in ("sqlite_only", "against_sqlite"))
        only_postgres = metafunc.definition.get_closest_marker("postgres_only") is not None
        only_sql = any(metafunc.definition.get_closest_marker(mark) for mark in ("sql_store", "second_process"))
        chosen = ENGINES[:1] if only_sqlite else ENGINES[1:2] if only_postgres else SQL_ENGINES if only_sql else ENGINES
        metafunc.parametrize("engine", chosen)


@pytest.fixture
def new_database(engine, tmp_path):
    """A factory of fresh, empty databases of the test's engine (ANALYTICS_DATABASE values). On
    `clickhouse`, a SQLite database for what stays in ANALYTICS_DATABASE, with a chDB database of
    its own for its records (stores.RECORD_STORES)."""
    if engine == "postgresql":
        postgres.start_once()
        if postgres.UNAVAILABLE:
            pytest.skip(postgres.banner())
    if engine == "clickhouse":
        chdb.needed()
    made = []

    def make(name: str = "analytics.db") -> str:
        target = postgres.CLUSTER.new_database() if engine == "postgresql" else str(tmp_path / name)
        if engine == "clickhouse":
            stores.RECORD_STORES[target] = chdb.new_store()
        made.append(target)
        return target

    yield make
    for target in made:
        stores.drop(target)
        if target in stores.RECORD_STORES:
            chdb.drop(stores.RECORD_STORES.pop(target))


@pytest.fixture(autouse=True)
def counted_as_stored():
    """Records counted as they are stored, as outside a gunicorn worker (models/statistics/counting.py);
    a test that lets them wait sets it, and it is set back after."""
    import models.statistics.counting

    models.statistics.counting.behind_limit = 0
    yield
    models.statistics.counting.behind_limit = 0


@pytest.fixture
def database(new_database):
    return new_database()


@pytest.fixture
def make_app(request, tmp_path):
    """Apps for the test: `make_app(**settings)` is the test's app (on its database, under
    tmp_path/instance, with the test's key) with these settings besides the test's own. Any of
    those can be given too (`ANALYTICS_DATABASE=` a second database, `INSTANCE_PATH=` another
    folder); a setting given as None is the installation's (instance/config.py, the environment,
    the default), as for an app started without it. The test's database is the `database`
    fixture's: a test that uses it asks for `database` (or `app`, `client`), so it runs on both
    engines."""

    def make(**settings):
        if "ANALYTICS_DATABASE" not in settings:
            if "engine" not in request.fixturenames:
                raise LookupError("make_app() on the test's database: ask for `database` (or give ANALYTICS_DATABASE)")
            settings["ANALYTICS_DATABASE"] = request.getfixturevalue("database")
        if settings["ANALYTICS_DATABASE"] in stores.RECORD_STORES:
            settings.setdefault("ANALYTICS_RECORD_STORE", stores.RECORD_STORES[settings["ANALYTICS_DATABASE"]])
        config = {
            "TESTING": True,
            # Unexpected exceptions go through the error handler, as in production.
            "PROPAGATE_EXCEPTIONS": False,
            "INSTANCE_PATH": str(tmp_path / "instance"),
            "ANALYTICS_API_KEY": API_KEY,
            **settings,
        }
        return create_app({name: value for name, value in config.items() if value is not None})

    return make


@pytest.fixture
def app(make_app, database):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def clickhouse(tmp_path):
    """chDB (the process's folder: tests/support/chdb.py) with the record store's tables in a
    database `analytics`, dropped after the test (skipped, and said in red, where chDB cannot run)."""
    from models.clickhouse import connection, tables
    from models.clickhouse.target import Target

    chdb.needed()
    opened = connection.connect(Target(database="analytics", folder=chdb.folder()))
    try:
        tables.create(opened)
        yield opened
    finally:
        chdb.drop(opened.target)
