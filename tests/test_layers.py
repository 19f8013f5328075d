"""The layers' import rules and the store's vocabulary, read from the source (see docs/layout.md)."""

import ast
import importlib
import inspect
import pathlib

import marshmallow as ma
import pytest

import models.schema.tables
from catalogue import FIELDS, READ_FIELDS

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROJECT = {"app", "feeds", "models", "schemas", "catalogue", "wsgi"}
WEB = {"flask", "flask_smorest", "werkzeug", "webargs", "flask_swagger_ui", "gunicorn"}


def modules(*parts) -> list[pathlib.Path]:
    found = []
    for part in parts:
        path = ROOT / part
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def imported(path: pathlib.Path) -> set[str]:
    """Top-level names of the packages a module imports (relative imports as their package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.add(path.relative_to(ROOT).parts[0].removesuffix(".py"))
            else:
                names.add(node.module.split(".")[0])
    return names


def offenders(paths, forbidden) -> dict:
    return {str(p.relative_to(ROOT)): sorted(imported(p) & forbidden) for p in paths if imported(p) & forbidden}


def test_the_catalogue_imports_nothing_of_the_project():
    assert imported(ROOT / "catalogue.py") & PROJECT == set()


def test_the_store_imports_neither_the_web_nor_the_wire():
    assert offenders(modules("models"), WEB | {"schemas", "app", "marshmallow"}) == {}


def test_the_wire_imports_neither_the_web_nor_the_app():
    assert offenders(modules("schemas"), WEB | {"app"}) == {}


def test_feeds_need_neither_the_web_nor_the_app():
    feeds = modules("feeds")
    assert len(feeds) > 5, "the feeds package exists"
    assert offenders(feeds, WEB | {"app", "wsgi", "prometheus_client"}) == {}


def test_the_store_and_the_wire_need_no_feed():
    assert offenders(modules("models", "schemas", "catalogue.py"), {"feeds"}) == {}


def test_the_feed_program_starts_without_the_web_framework():
    """Importing the program pulls in no web module at all, not even indirectly."""
    import subprocess
    import sys

    forbidden = sorted(WEB | {"app", "wsgi", "prometheus_client"})
    probe = f"import sys, feeds.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in {forbidden!r}))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout


def test_the_store_is_reached_through_its_modules():
    """`models` re-exports nothing: a call names the module it lands in (models.ingest.ingestion...)."""
    tree = ast.parse((ROOT / "models" / "__init__.py").read_text())
    assert [type(node).__name__ for node in tree.body] == ["Expr"], "only its docstring"


def _wire_names() -> set[str]:
    """Every key the API reads or writes: schema fields (by their data keys) and catalogue names."""
    import schemas.access_log
    import schemas.activity_log
    import schemas.admin_actions
    import schemas.auth
    import schemas.clients
    import schemas.errors
    import schemas.privacy
    import schemas.records
    import schemas.statistics

    names = set()
    for module in (
        schemas.activity_log,
        schemas.admin_actions,
        schemas.auth,
        schemas.access_log,
        schemas.clients,
        schemas.errors,
        schemas.privacy,
        schemas.records,
        schemas.statistics,
    ):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, ma.Schema):
                for name, field in cls._declared_fields.items():
                    names.add((field.data_key or name).removesuffix("[]"))
    for field in READ_FIELDS:
        names.add(field.name)
        names.update(field.path or ())
        names.add(field.csv or field.name)
    return names


def _store_names() -> set[str]:
    """Table and column names: where the store's words and the wire's coincide, the store
    may of course use them."""
    names = set()
    for table in models.schema.tables.TABLES:
        names.add(table._meta.table_name)
        names.update(field.column_name for field in table._meta.sorted_fields)
    return names


def test_the_store_uses_no_wire_names():
    wire_only = _wire_names() - _store_names()
    assert {"items", "clients", "clientId", "sourceGeoip", "countryCode", "lastActivityTime"} <= wire_only
    found = {}
    for path in modules("models"):
        tree = ast.parse(path.read_text())
        exported = {
            id(constant)
            for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets)
            for constant in ast.walk(node)
        }  # __all__ names the store's own functions
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in wire_only and id(node) not in exported:
                found.setdefault(str(path.relative_to(ROOT)), set()).add(node.value)
    assert found == {}


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_catalogue_field_has_its_column(field):
    columns = {f.column_name: f for f in models.schema.tables.Record._meta.sorted_fields}
    assert field.sql in columns


# The store's rooms, lowest first: a module imports only from its own room and the rooms before
# it (docs/layout.md says what each holds).
ROOMS = (
    "runtime",
    "engine",
    "schema",
    "access",
    "records",
    "statistics",
    "privacy",
    "ingest",
    "clients",
    "delivery",
    "clickhouse",
    "stores",
    "migrations",
)


def _store_modules() -> dict[str, pathlib.Path]:
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): path
        for path in modules("models")
        if path.name != "__init__.py"
    }


def _store_imports(path: pathlib.Path, known) -> list[tuple[ast.AST, str, bool]]:
    """(import node, module of the store it names, whether at the top) for every import of the
    store in `path`."""
    tree = ast.parse(path.read_text())
    top = {id(statement) for statement in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append((node, "relative", id(node) in top))
        elif isinstance(node, ast.ImportFrom) and node.module.startswith("models"):
            found += [
                (
                    node,
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module,
                    id(node) in top,
                )
                for a in node.names
            ]
        elif isinstance(node, ast.Import):
            found += [(node, alias.name, id(node) in top) for alias in node.names if alias.name.startswith("models")]
    return found


def test_the_store_lives_in_its_rooms():
    for name in _store_modules():
        parts = name.split(".")
        assert len(parts) == 3 and parts[1] in ROOMS, f"{name} is not in a room of {ROOMS}"


def test_the_store_imports_at_the_top_and_absolutely():
    """No import inside a function (which would hide a circle) and no relative import."""
    known = _store_modules()
    hidden = []
    for name, path in known.items():
        for node, target, top_level in _store_imports(path, known):
            if target == "relative" or not top_level:
                hidden.append((name, node.lineno, target))
    assert hidden == []


def test_each_room_imports_only_the_rooms_below_it():
    known = _store_modules()
    upward = []
    for name, path in known.items():
        room = ROOMS.index(name.split(".")[1])
        for node, target, _ in _store_imports(path, known):
            if target.count(".") >= 1 and ROOMS.index(target.split(".")[1]) > room:
                upward.append((name, node.lineno, target))
    assert upward == []


def test_the_store_has_no_import_circle():
    known = _store_modules()
    edges = {name: {t for _, t, _ in _store_imports(path, known) if t in known} for name, path in known.items()}
    finished, path = set(), []

    def visit(name):
        if name in path:
            raise AssertionError(f"import circle: {' -> '.join([*path[path.index(name) :], name])}")
        if name in finished:
            return
        path.append(name)
        for target in sorted(edges[name]):
            visit(target)
        path.pop()
        finished.add(name)

    for name in sorted(edges):
        visit(name)


# The engine seam (docs/layout.md, "The engine seam"): what differs per engine is an Engine's.
ENGINE_SCHEMES = {"sqlite", "postgres", "postgresql", "sqlite://", "sqlite:///", "postgres://", "postgresql://"}
ENGINE_CLASSES = {
    "SqliteDatabase",
    "PostgresqlDatabase",
    "PooledSqliteDatabase",
    "PooledPostgresqlDatabase",
    "SqliteExtDatabase",
    "CockroachDatabase",
}
ENGINE_DRIVERS = {"sqlite3", "psycopg", "psycopg2", "apsw"}
# Modules that open SQLite files which are not the store, and may import sqlite3 for them.
OTHER_SQLITE_FILES = {"feeds/pihole.py": "Pi-hole's own database"}


def _engine_modules():
    """The classes implementing models.engine.interface.Engine, read from models/engine/."""
    import importlib

    from models.engine.interface import Engine

    found = set()
    for path in modules("models/engine"):
        module = importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
        found |= {
            c for _, c in inspect.getmembers(module, inspect.isclass) if issubclass(c, Engine) and c is not Engine
        }
    return found


def test_every_engine_implements_the_interface_and_is_registered():
    from models.engine.database import ENGINES
    from models.engine.interface import Engine

    engines = _engine_modules()
    assert len(engines) >= 2 and set(ENGINES) == engines, "every engine has its entry in database.ENGINES"
    attributes = set(Engine.__annotations__)
    assert {"name", "schemes", "read_makes_tables"} <= attributes
    for engine in engines:
        assert engine.__abstractmethods__ == frozenset(), f"{engine.__name__} leaves {engine.__abstractmethods__}"
        assert engine.__bases__ == (Engine,), f"{engine.__name__} builds on another engine"
        missing = {name for name in attributes if not hasattr(engine, name)}
        assert missing == set(), f"{engine.__name__} lacks {missing}"
        engine()  # nothing abstract is left to stop it
    schemes = [scheme for engine in engines for scheme in engine.schemes]
    assert len(schemes) == len(set(schemes)), "a scheme names one engine"
    assert sum(engine.takes_paths for engine in engines) == 1, "a plain path names one engine"


def _names_an_engine(path: pathlib.Path) -> list[tuple[int, str]]:
    found = []
    relative = str(path.relative_to(ROOT))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [alias.name for alias in node.names]
            imported_modules = names if isinstance(node, ast.Import) else [node.module or ""]
            for module in imported_modules:
                if module.split(".")[0] in ENGINE_DRIVERS and relative not in OTHER_SQLITE_FILES:
                    found.append((node.lineno, f"imports {module}"))
                if module.startswith("models.engine.") and module not in ENGINE_NEUTRAL:
                    found.append((node.lineno, f"imports {module}"))
            if isinstance(node, ast.ImportFrom) and node.module == "models.engine":
                found += [
                    (node.lineno, f"imports models.engine.{n}")
                    for n in names
                    if f"models.engine.{n}" not in ENGINE_NEUTRAL
                ]
            found += [(node.lineno, f"imports {n}") for n in names if n in ENGINE_CLASSES | {"is_sqlite"}]
        elif isinstance(node, ast.Name) and node.id in ENGINE_CLASSES | {"is_sqlite"}:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in ENGINE_CLASSES | {"is_sqlite"}:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Attribute) and node.attr == "name" and "dialect" in ast.unparse(node.value):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in ENGINE_SCHEMES:
            found.append((node.lineno, repr(node.value)))
    return found


# The modules of models/engine/ that name no engine: what the rest of the store may import.
ENGINE_NEUTRAL = {"models.engine.database", "models.engine.interface", "models.engine.sql"}


def test_nothing_outside_the_engines_asks_which_engine_it_runs_on():
    """Outside models/engine/ (and the schema's history, models/migrations/), no module imports
    an engine's module or driver, names peewee's engine classes, calls is_sqlite or reads the
    engine's name: it calls the engine's interface instead."""
    outside = [
        path
        for path in modules("models", "app", "feeds", "schemas", "catalogue.py", "wsgi.py")
        if not path.is_relative_to(ROOT / "models" / "engine")
        and not path.is_relative_to(ROOT / "models" / "migrations")
    ]
    assert len(outside) > 50
    found = {str(p.relative_to(ROOT)): hits for p in outside if (hits := _names_an_engine(p))}
    assert found == {}


# The record store's seam (docs/layout.md, "The record store's seam"): the app reaches records,
# and what is derived from them, only through models.stores.bound.records().
# Modules whose every function the app may need is an operation on records: app/ imports none.
WHOLLY_BEHIND_THE_SEAM = {
    "models.clients.activity",
    "models.clients.deletion",
    "models.clients.status",
    "models.statistics.statistics",
    "models.statistics.counting",
    "models.records.freezing",
    "models.records.names",
    "models.privacy.unused_terms",
}
# Modules that hold record operations beside the small transactional data the app still calls
# directly (what stays in ANALYTICS_DATABASE whichever store keeps the records): app/ names none
# of their functions that SqlStore binds.
PARTLY_BEHIND_THE_SEAM = {
    "models.ingest.ingestion": "the feeds' batch keys (forget_batch_keys)",
    "models.clients.clients": "a client's alias",
    "models.privacy.rewrites": "the names of the rewrites' kinds",
    "models.delivery.alerts": "alert rules, their marks, alerts and their deliveries",
    "models.delivery.outputs": "outputs, their cursors and leases",
}
# What the wire needs of those modules besides their operations, re-exposed by the interface
# (models.stores.interface) so that app/ takes it from there.
REEXPOSED = {"ROW_FIELDS": "models.clients.activity", "AlreadyStored": "models.ingest.ingestion"}


def _bound_functions() -> dict[str, tuple[str, str]]:
    """{store operation: (module, function)} of every operation SqlStore binds to a function."""
    from models.stores.interface import RecordStore
    from models.stores.sql import SqlStore

    found = {}
    for name in RecordStore.__abstractmethods__:
        bound = SqlStore.__dict__[name]
        if isinstance(bound, staticmethod):
            found[name] = (bound.__func__.__module__, bound.__func__.__name__)
    return found


def test_the_sql_store_implements_every_operation_as_the_interface_promises_it():
    import models.stores.interface
    from models.stores.interface import RecordStore
    from models.stores.sql import SqlStore

    assert len(RecordStore.__abstractmethods__) > 40
    SqlStore()  # nothing abstract is left to stop it
    undocumented = sorted(name for name in RecordStore.__abstractmethods__ if not getattr(RecordStore, name).__doc__)
    assert undocumented == []
    differ = {}
    for name, (module, function) in _bound_functions().items():
        promised = list(inspect.signature(getattr(RecordStore, name)).parameters.values())[1:]
        bound = inspect.signature(getattr(importlib.import_module(module), function)).parameters.values()
        if [(p.name, p.kind, p.default) for p in promised] != [(p.name, p.kind, p.default) for p in bound]:
            differ[name] = f"{module}.{function}"
    assert differ == {}
    modules_bound = {module for module, _ in _bound_functions().values()}
    assert modules_bound == WHOLLY_BEHIND_THE_SEAM | set(PARTLY_BEHIND_THE_SEAM)
    for name, module in REEXPOSED.items():
        assert getattr(models.stores.interface, name) is getattr(importlib.import_module(module), name)


def _reached(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module imported and every dotted name used in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_app_reaches_records_only_through_the_record_store():
    forbidden = {f"{module}.{function}" for module, function in _bound_functions().values()}
    assert {"models.delivery.outputs.backlog", "models.ingest.ingestion.store_records"} <= forbidden
    found = {}
    for path in modules("app", "wsgi.py", "gunicorn.conf.py"):
        for line, name in _reached(path):
            if any(name == m or name.startswith(f"{m}.") for m in WHOLLY_BEHIND_THE_SEAM | forbidden):
                found.setdefault(str(path.relative_to(ROOT)), []).append((line, name))
    assert found == {}
