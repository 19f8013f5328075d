"""Direct access to a test's database, whichever the engine, for what HTTP does not show
(row counts, stored forms) and for injecting failures. `database` is an ANALYTICS_DATABASE
value: a SQLite path, or a PostgreSQL URL whose search_path names the test's own schema."""

import re
import sqlite3
from urllib.parse import unquote

from models.engine.postgres import Postgres


def is_postgres(database: str) -> bool:
    return database.startswith("postgresql://")


def run_sql(database: str, statement: str, params=()) -> list[tuple]:
    """Run one statement (`?` placeholders) outside the service; its rows."""
    if not is_postgres(database):
        with sqlite3.connect(database, timeout=30) as conn:
            return conn.execute(statement, params).fetchall()
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        cursor = conn.execute(Postgres().driver_sql(statement), params)
        return cursor.fetchall() if cursor.description else []


def as_older_schema(database: str, version: int, *dropped_tables: str):
    """Make the database look as an older release left it: without the tables it lacked, at
    its schema version (the service migrates it forward when it next starts on it)."""
    for table in dropped_tables:
        run_sql(database, f"DROP TABLE {table}")
    if is_postgres(database):
        run_sql(database, "UPDATE schema_version SET version = ?", [version])
    else:
        run_sql(database, f"PRAGMA user_version = {int(version)}")


def scalar(database: str, statement: str, params=()):
    return run_sql(database, statement, params)[0][0]


# The record store (ANALYTICS_RECORD_STORE) of each database the tests' `clickhouse` engine made
# (tests/conftest.py): an app made on one of them keeps its records there.
RECORD_STORES: dict[str, str] = {}


def on_records(database: str, statement: str, params=()) -> list[tuple]:
    """Run `statement`, whose `{records}` stands for every stored record (rows of the record
    table, and the frozen ones unpacked from their blocks: models/records/freezing.py); its rows.
    Where ClickHouse keeps the database's records, it runs there, on its records table."""
    from models.records import blocks

    if database in RECORD_STORES:
        from models.clickhouse import connection, tables
        from models.clickhouse.target import parse

        target = parse(RECORD_STORES[database])
        opened = connection.connect(target)
        tables.create(opened)  # (the store makes them at its first use, which may not have come)
        return opened.rows(statement.format(records=f"{target.database}.records"))

    columns = ", ".join(blocks.COLUMNS)
    create = f"CREATE TEMP TABLE every_record AS SELECT {columns} FROM record"
    frozen = f"INSERT INTO every_record ({columns}) VALUES ({', '.join(['?'] * len(blocks.COLUMNS))})"
    if not is_postgres(database):
        with sqlite3.connect(database, timeout=30) as conn:
            conn.execute(create)
            for (data,) in conn.execute("SELECT data FROM record_block").fetchall():
                conn.executemany(frozen, blocks.unpack(data))
            return conn.execute(statement.format(records="every_record"), params).fetchall()
    import psycopg

    with psycopg.connect(database) as conn:
        conn.execute(create)
        for (data,) in conn.execute("SELECT data FROM record_block").fetchall():
            conn.cursor().executemany(Postgres().driver_sql(frozen), blocks.unpack(data))
        cursor = conn.execute(Postgres().driver_sql(statement.format(records="every_record")), params)
        found = cursor.fetchall() if cursor.description else []
        conn.rollback()
        return found


def records_scalar(database: str, statement: str, params=()):
    return on_records(database, statement, params)[0][0]


def refuse_deletes(database: str, table: str, when: str = "TRUE"):
    """Make every deletion of a `table` row matching `when` (SQL on `old`) fail, as a disk or
    constraint failure part-way through a change would."""
    if not is_postgres(database):
        run_sql(
            database,
            f"CREATE TRIGGER refuse BEFORE DELETE ON {table} WHEN {when} BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        return
    run_sql(
        database,
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$",
    )
    run_sql(
        database, f"CREATE TRIGGER refuse BEFORE DELETE ON {table} FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION refuse()"
    )


def drop(database: str):
    """Remove a PostgreSQL test schema (SQLite files go with the test's folder)."""
    if not is_postgres(database):
        return
    schema = re.search(r"search_path%3D(\w+)", database).group(1)
    base = unquote(database.split("?", 1)[0])
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def stored_rows(database: str) -> str:
    """Every row of every table but the interned strings, as text, with the strings the term ids
    of records and first-seen names stand for: what the store still refers to. (Interned strings
    are shared: those nothing refers to are deleted by the privacy job, see
    tests/test_privacy_terms.py.)"""
    if is_postgres(database):
        listed = "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    else:
        listed = "SELECT name FROM sqlite_master WHERE type = 'table'"
    tables = [table for (table,) in run_sql(database, listed)]
    assert "record" in tables and "client" in tables
    text = [str(row) for table in tables if table != "term" for row in run_sql(database, f'SELECT * FROM "{table}"')]
    if database in RECORD_STORES:
        return "\n".join(text + clickhouse_rows(RECORD_STORES[database]))
    for column in ("src_ip", "question", "trigger_value", "answers"):
        text += [
            v for (v,) in on_records(database, f"SELECT t.value FROM {{records}} r JOIN term t ON t.id = r.{column}")
        ]
    text += [v for (v,) in run_sql(database, "SELECT t.value FROM name_seen n JOIN term t ON t.id = n.term")]
    return "\n".join(text)


def clickhouse_rows(store: str) -> list[str]:
    """Every row of every table of a ClickHouse record store, as text."""
    from models.clickhouse import connection, tables
    from models.clickhouse.target import parse

    target = parse(store)
    opened = connection.connect(target)
    return [str(row) for table in tables.TABLES for row in opened.rows(f"SELECT * FROM {target.database}.{table.name}")]
