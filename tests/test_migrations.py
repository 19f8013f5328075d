"""Databases as every released schema version left them (tests/data/schemas/, made by
scripts/make-schema-fixtures from each release's own code), walked up to the newest at start: the
same schema as a new database's, their records readable through the API, nothing left to run."""

import os
import pathlib
import re
import sqlite3
import subprocess
import sys
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from feeds.cli import main as feed_program
from models.migrations.run import NewerDatabase
from models.schema.tables import SCHEMA_VERSION

from support.helpers import API_KEY
from support.servers import ROOT, free_port, refuse_in_fast_lane
from support.stores import is_postgres, run_sql, stored_rows

SCHEMAS = pathlib.Path(__file__).parent / "data" / "schemas"
RELEASED = sorted({int(path.name[1:3]) for path in SCHEMAS.glob("v*.sql")})
# (engine, version) of every saved database: PostgreSQL came with version 5.
SAVED = sorted((path.name.split(".")[1], int(path.name[1:3])) for path in SCHEMAS.glob("v*.sql"))
# What each fixture's release was sent (scripts/make-schema-fixtures' RECORDS).
SENT = {
    ("home", "laptop", "example.com", 1),
    ("home", "tv", "ads.example.net", 0),
    ("office", "printer", "www.example.org", 1),
}
WINDOW = {"startTime": "2026-11-20T00:00:00Z", "endTime": "2026-11-21T00:00:00Z"}
AUTH = {"Authorization": API_KEY}

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


def load(database: str, version: int) -> bool:
    """Fill the empty `database` with the dump of `version`; False when that release had no such
    engine."""
    engine = "postgresql" if is_postgres(database) else "sqlite"
    dump = SCHEMAS / f"v{version:02d}.{engine}.sql"
    if not dump.exists():
        return False
    text = dump.read_text()
    if engine == "sqlite":
        with sqlite3.connect(database) as conn:
            conn.executescript(text)
        return True
    import psycopg

    schema = _pg_schema(database)
    lines = [line for line in text.splitlines() if not line.startswith("\\") and line != "CREATE SCHEMA old_release;"]
    with psycopg.connect(unquote(database.split("?", 1)[0]), autocommit=True) as conn:
        conn.execute("\n".join(lines).replace("old_release.", f"{schema}."))
    return True


def _pg_schema(database: str) -> str:
    return re.search(r"search_path%3D(\w+)", database).group(1)


def schema_of(database: str) -> dict:
    """Tables with their columns (type, NULL-ability, whether they have a default), indexes (by
    columns, uniqueness and condition) and, on SQLite, WITHOUT ROWID and AUTOINCREMENT."""
    if is_postgres(database):
        return _pg_schema_of(database)
    found = {}
    tables = run_sql(database, "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    for table, sql in tables:
        columns = {
            name: (kind.upper(), bool(notnull), default is not None, pk)
            for _, name, kind, notnull, default, pk in run_sql(database, f'PRAGMA table_info("{table}")')
        }
        indexes = set()
        for _, name, unique, _origin, partial in run_sql(database, f'PRAGMA index_list("{table}")'):
            keys = tuple(row[2] for row in run_sql(database, f'PRAGMA index_info("{name}")'))
            condition = ""
            if partial:
                (index_sql,) = run_sql(database, "SELECT sql FROM sqlite_master WHERE name = ?", [name])[0]
                condition = index_sql.partition(" WHERE ")[2]
            indexes.add((keys, bool(unique), condition))
        flags = ("WITHOUT ROWID" in sql.upper(), "AUTOINCREMENT" in sql.upper())
        found[table] = {"columns": columns, "indexes": indexes, "flags": flags}
    return found


def _pg_schema_of(database: str) -> dict:
    schema = _pg_schema(database)
    found = {}
    listed = "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'"
    for (table,) in run_sql(database, listed, [schema]):
        columns = {
            name: (kind, nullable == "NO", default is not None, 0)
            for name, kind, nullable, default in run_sql(
                database,
                "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns"
                " WHERE table_schema = ? AND table_name = ?",
                [schema, table],
            )
        }
        indexes = {
            definition.replace(f"{schema}.", "").partition(" ON ")[2]
            for (definition,) in run_sql(
                database, "SELECT indexdef FROM pg_indexes WHERE schemaname = ? AND tablename = ?", [schema, table]
            )
        }
        found[table] = {"columns": columns, "indexes": indexes, "flags": ()}
    return found


def differences(walked: dict, fresh: dict) -> dict:
    """What differs, table by table (empty: the same schema)."""
    found = {}
    for table in sorted(walked.keys() | fresh.keys()):
        if table not in walked or table not in fresh:
            found[table] = "only in the walked-up database" if table in walked else "missing"
            continue
        for name in sorted(walked[table]["columns"].keys() | fresh[table]["columns"].keys()):
            if walked[table]["columns"].get(name) != fresh[table]["columns"].get(name):
                found[f"{table}.{name}"] = (walked[table]["columns"].get(name), fresh[table]["columns"].get(name))
        for part in ("indexes", "flags"):
            if walked[table][part] != fresh[table][part]:
                found[f"{table} {part}"] = (walked[table][part], fresh[table][part])
    return found


def stored_version(database: str) -> int:
    if is_postgres(database):
        return run_sql(database, "SELECT MAX(version) FROM schema_version")[0][0]
    return run_sql(database, "PRAGMA user_version")[0][0]


@pytest.mark.parametrize("engine, version", SAVED)
def test_a_released_database_walks_up_to_the_newest_schema(version, new_database, make_app, database, tmp_path):
    assert load(database, version)
    fresh = new_database("fresh.db")
    make_app(INSTANCE_PATH=str(tmp_path / "fresh"), ANALYTICS_DATABASE=fresh)
    app = make_app(ANALYTICS_RETENTION_DAYS=36500)
    assert differences(schema_of(database), schema_of(fresh)) == {}

    client = app.test_client()
    answer = client.get("/v2/activity-log", query_string={**WINDOW, "pageSize": 10}, headers=AUTH)
    assert answer.status_code == 200, answer.get_json()
    items = answer.get_json()["queries"]
    assert {(item["endpointId"], item["clientId"], item["question"], item["action"]) for item in items} == SENT
    counts = client.get("/v2/statistic/count/question", query_string=WINDOW, headers=AUTH)
    assert counts.status_code == 200, counts.get_json()
    assert {(c["value"], c["count"]) for c in counts.get_json()["counts"]} == {
        ("example.com", 1),
        ("ads.example.net", 1),
        ("www.example.org", 1),
    }


def test_a_newer_database_is_refused_and_left_as_it_was(make_app, database):
    make_app()
    newer = SCHEMA_VERSION + 1
    if is_postgres(database):
        run_sql(database, "UPDATE schema_version SET version = ?", [newer])
    else:
        run_sql(database, f"PRAGMA user_version = {newer}")
    before = (schema_of(database), stored_rows(database))

    with pytest.raises(NewerDatabase) as refused:
        make_app()
    assert str(refused.value).startswith(
        f"the database is at schema version {newer}, newer than this release knows ({SCHEMA_VERSION})"
    )
    assert "restore a backup" in str(refused.value)
    assert (schema_of(database), stored_rows(database)) == before
    assert stored_version(database) == newer


@pytest.mark.parametrize("engine, version", [saved for saved in SAVED if saved[1] in (1, 5, 11, 13)])
def test_starting_again_runs_nothing(version, make_app, database):
    assert load(database, version)
    assert make_app().extensions["schema_steps"] == list(range(version + 1, SCHEMA_VERSION + 1))
    assert stored_version(database) == SCHEMA_VERSION
    assert make_app().extensions["schema_steps"] == []


def test_records_frozen_before_version_15_are_found_by_their_names(make_app, database):
    # Version 14 left its records in blocks without block_question's rows, by which a search
    # now chooses the blocks: step 15 writes them.
    assert load(database, 14)
    assert run_sql(database, "SELECT COUNT(*) FROM record") == [(0,)], "the fixture's records are all frozen"
    client = make_app().test_client()
    for _, _, question, _ in SENT:
        for search in ({"question[]": question}, {"searchQuestion": question, "searchQuestionMode": "apex"}):
            response = client.get("/v2/activity-log", query_string={**WINDOW, **search}, headers=AUTH)
            assert response.status_code == 200, response.json
            assert [row["question"] for row in response.json["queries"]] == [question], search


def test_the_migrate_command_says_what_the_start_ran(make_app, database):
    load(database, 14) or pytest.skip("version 14 had no store on this engine")
    result = make_app().test_cli_runner().invoke(args=["migrate"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"Schema version {SCHEMA_VERSION} (this release's).",
        "Ran step 15: Version 15: which frozen blocks hold each question name (block_question, written as blocks",
    ]
    again = make_app().test_cli_runner().invoke(args=["migrate"])
    assert again.output.splitlines()[1:] == ["No step was due."]


def feed(database: str, *args):
    """`dns-analytics-feed ARGS` on `database`, through click's runner."""
    return CliRunner().invoke(feed_program, args, env={"ANALYTICS_DATABASE": database})


def newer(database: str) -> int:
    """Make `database` (a current one) look as a newer release left it; that version."""
    version = SCHEMA_VERSION + 1
    if is_postgres(database):
        run_sql(database, "UPDATE schema_version SET version = ?", [version])
    else:
        run_sql(database, f"PRAGMA user_version = {version}")
    return version


def contents(database: str) -> tuple:
    """The schema and every row of every table, whichever version the database is at."""
    schema = schema_of(database)
    return schema, {table: sorted(map(str, run_sql(database, f'SELECT * FROM "{table}"'))) for table in schema}


def test_the_feed_programs_migrate_check_runs_nothing_and_migrate_runs_the_steps(database):
    load(database, 14) or pytest.skip("version 14 had no store on this engine")
    before = contents(database)

    checked = feed(database, "migrate", "--check")
    assert checked.exit_code == 1, checked.output
    assert checked.output.splitlines() == [
        f"Schema version 14; this release's is {SCHEMA_VERSION}.",
        "Step 15 is due: Version 15: which frozen blocks hold each question name (block_question, written as blocks",
    ]
    assert contents(database) == before
    assert stored_version(database) == 14

    ran = feed(database, "migrate")
    assert ran.exit_code == 0, ran.output
    assert ran.output.splitlines()[-1] == "Ran step 15."
    assert stored_version(database) == SCHEMA_VERSION
    again = feed(database, "migrate", "--check")
    assert again.exit_code == 0, again.output
    assert again.output.splitlines() == [
        f"Schema version {SCHEMA_VERSION}; this release's is {SCHEMA_VERSION}.",
        "No step is due.",
    ]


def test_the_feed_program_refuses_a_newer_database_in_one_line(make_app, database, tmp_path):
    make_app()
    version = newer(database)
    before = (schema_of(database), stored_rows(database))
    records = tmp_path / "records.ndjson"
    records.write_text('{"endpointId": "home", "clientId": "laptop", "question": "example.com"}\n')

    for args in (["migrate", "--check"], ["migrate"], ["ingest", str(records)]):
        result = feed(database, *args)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.splitlines() == [
            f"Error: the database is at schema version {version}, newer than this release knows ({SCHEMA_VERSION}):"
            " a newer release has used it. Run that release (or a later one) on it, or restore a backup made"
            " before the upgrade; nothing was changed."
        ], args
    assert (schema_of(database), stored_rows(database)) == before


def test_gunicorn_refuses_a_newer_database_in_one_line(make_app, database):
    refuse_in_fast_lane("gunicorn")
    make_app()
    version = newer(database)
    started = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{free_port()}", "wsgi:app"],
        cwd=ROOT,
        env={**os.environ, "ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    refusal = f"the database is at schema version {version}, newer than this release knows ({SCHEMA_VERSION})"
    assert refusal in started.stderr
    assert "Traceback" not in started.stderr, started.stderr
    assert stored_version(database) == version
