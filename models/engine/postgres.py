"""PostgreSQL, the server engine: a pool of psycopg 3 connections, writers taking turns on an
advisory lock, and the SQL it writes its own way (see models/engine/interface.py)."""

from contextlib import contextmanager, nullcontext
from weakref import WeakSet

from playhouse.pool import PooledPostgresqlDatabase

from models.engine.interface import BackupFailed, Engine
from models.engine.sql import ASCII_UPPER, placeholders

# The keys of the advisory locks that serialise writers (see Postgres.lock_writes) and let one
# process count at a time (Postgres.counting_turn).
_WRITE_LOCK_KEY = 0x444E5341  # "DNSA"
_COUNTING_LOCK_KEY = 0x444E5343  # "DNSC"
# SQLSTATEs of a stopped statement: the statement cancelled, and any statement after it in the
# same transaction (which the server refuses until the transaction ends).
_STOPPED_STATES = ("57014", "25P02")


class Postgres(Engine):
    name = "postgresql"
    schemes = ("postgresql", "postgres")
    takes_paths = False
    url_example = "postgresql://user@host/database"
    # A read-only transaction may fill a temporary table, not make one: ready_read_tables
    # makes them first.
    read_makes_tables = False
    victim_table = "CREATE TEMP TABLE IF NOT EXISTS victim (id BIGINT PRIMARY KEY)"
    term_check_table = "CREATE TEMP TABLE IF NOT EXISTS term_check (id BIGINT PRIMARY KEY)"
    temp_like_record = "CREATE TEMP TABLE IF NOT EXISTS {table} (LIKE record)"
    id_never_reused = ""  # a sequence never goes back
    clustered_keys = False  # no such option
    no_backup = "backup copies SQLite databases; use pg_dump for PostgreSQL"

    def __init__(self):
        self._read_tables_ready = WeakSet()  # the connections that hold them

    @classmethod
    def open(cls, target: str, wal_limit: int):
        # The server keeps its write-ahead log itself: wal_limit is SQLite's. psycopg 3: its
        # executemany sends a batch in one round trip (pipeline mode).
        url = "postgresql://" + target.split("://", 1)[1]
        database = PooledPostgresqlDatabase(url, prefer_psycopg3=True, max_connections=64, stale_timeout=600)
        database.dialect = cls()
        return database

    def driver_sql(self, sql: str) -> str:
        # psycopg's placeholders are %s, so a literal % (the modulo of time buckets) is doubled.
        # No query here has a `?` or `%` inside a string literal: values are always parameters.
        return sql.replace("%", "%%").replace("?", "%s")

    def sizes(self, query) -> tuple[int, int | None]:
        # The tables and indexes of this store's schema, not the whole server's database.
        row = query(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'm')"
        ).fetchone()
        return int(row[0]), None

    def is_stopped(self, error: Exception) -> bool:
        cause = error.args[0] if error.args else None  # peewee keeps the driver's own error first
        return getattr(cause, "sqlstate", None) in _STOPPED_STATES or "statement timeout" in str(error).lower()

    def back_up(self, destination: str) -> None:
        raise BackupFailed(self.no_backup)

    def begin_read(self, db):
        # READ COMMITTED (the default) gives each statement a snapshot of its own; REPEATABLE READ
        # gives the transaction one, taken at its first statement. READ ONLY: a read can fail
        # with no serialization error, and one that would write to the store fails at once.
        return db.transaction(isolation_level="REPEATABLE READ READ ONLY")

    def ready_read_tables(self, connection, statements, query):
        # Made outside any transaction, a temporary table lasts as long as its connection.
        if connection not in self._read_tables_ready:
            for statement in statements:
                query(statement(self))
            self._read_tables_ready.add(connection)

    def begin_write(self, db):
        return db.atomic()  # the write lock is lock_writes' advisory lock

    def lock_writes(self, query):
        # Writers take turns, as on SQLite. This keeps every read-then-write step of the store
        # (upserts, "is this client left without records", job leases) free of races, and it
        # makes record ids commit in order: the realtime stream reads "ids above the last one
        # sent" and would skip a lower id that committed after a higher one. Per schema, as the
        # counting turn: stores sharing a database write apart.
        query("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", [_WRITE_LOCK_KEY])

    def after_write(self, query):
        pass  # PostgreSQL recycles its write-ahead log by itself

    def storing(self):
        return nullcontext()  # writers wait on the advisory lock, woken as it is released

    def yield_to_storing(self, seconds: float, stop):
        pass

    @contextmanager
    def counting_turn(self, query):
        # A session lock, which the server frees when its holder's connection goes; per schema,
        # as stores sharing a database count apart.
        key = f"{_COUNTING_LOCK_KEY}, hashtext(current_schema())"
        if not query(f"SELECT pg_try_advisory_lock({key})").fetchone()[0]:
            yield False
            return
        try:
            yield True
        finally:
            query(f"SELECT pg_advisory_unlock({key})")

    def secure_deletes(self, query):
        return nullcontext()  # a deleted row stays in the table's pages until VACUUM

    def erase_old_versions(self, query) -> bool:
        # Dead rows (deleted strings, client entries as they were) are removed from the pages by
        # VACUUM; it takes no lock that writers wait for, and these tables are small next to
        # the records (whose rows hold ids only).
        query("VACUUM term, term_domain, term_candidate, client")
        return True

    def limit_queries(self, connection, query, seconds, stop):
        # The server stops a statement past statement_timeout; a client gone meanwhile is
        # noticed only once its answer is written (PostgreSQL has no hook to ask).
        query(f"SET statement_timeout = {0 if seconds is None else max(1, int(seconds * 1000))}")

    def reclaim_space(self, query, pages_per_step: int):
        pass  # autovacuum reclaims and analyses on its own schedule

    def schema_version(self, query) -> int:
        query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = query("SELECT MAX(version) FROM schema_version").fetchone()
        return row[0] or 0

    def set_schema_version(self, query, version: int):
        query("DELETE FROM schema_version")
        query("INSERT INTO schema_version (version) VALUES (?)", [version])

    def term_in(self, values: list) -> tuple[str, list]:
        # Terms can be longer than a B-tree entry may be (answer sets), so they are unique by
        # their md5; comparing the value too keeps a collision from matching the wrong term.
        marks = placeholders(len(values))
        return f"md5(value) IN ({', '.join(['md5(?)'] * len(values))}) AND value IN ({marks})", [*values, *values]

    def term_index(self) -> str:
        return "CREATE UNIQUE INDEX IF NOT EXISTS term_value_md5 ON term (md5(value))"

    def like_ascii_nocase(self, expr: str) -> str:
        return f"translate({expr}, '{ASCII_UPPER}', '{ASCII_UPPER.lower()}') LIKE ? ESCAPE '\\'"

    def greatest(self, first: str, second: str) -> str:
        return f"GREATEST({first}, {second})"  # NULLs are left out

    def by_id(self, table: str, alias: str) -> str:
        return f"{table} {alias}"  # the planner picks the id index for a short range by itself

    def json_array_rows(self, expr: str, alias: str) -> str:
        return f"json_array_elements_text(CAST({expr} AS json)) AS {alias}(value)"

    def binary_order(self, expr: str) -> str:
        # The database's collation (often en_US) would order "B" after "a"; answers must not
        # depend on the engine or its locale.
        return f'{expr} COLLATE "C"'

    def after_filling_temp_table(self, query, table: str):
        # Temporary tables have no statistics until analysed; without them the planner may scan
        # the whole record table instead of probing its primary key once per id.
        query(f"ANALYZE {table}")

    def insert_rows(self, head: str, width: int, rows: list, tail: str) -> list[tuple[str, list]]:
        # psycopg's executemany sends the rows in one round trip (pipeline mode).
        return [(f"{head} VALUES ({placeholders(width)}) {tail}", rows)]

    def delete_keyed(self, table: str, columns: tuple, keys: list, condition: str) -> list[tuple[str, list]]:
        # psycopg's executemany sends the keys in one round trip (pipeline mode).
        return [(f"DELETE FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in columns)} AND {condition}", keys)]

    def update_rows(self, table: str, columns: tuple, key: str, rows: list) -> list[tuple[str, list]]:
        # psycopg's executemany sends the rows in one round trip (pipeline mode).
        return [(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in columns)} WHERE {key} = ?", rows)]
