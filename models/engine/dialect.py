"""What differs between SQLite and PostgreSQL, in one place.

Every query elsewhere in models/ is written once, in SQL both engines run, with `?` placeholders
(see database.query); what cannot be written once is a method here. The bound database carries
its dialect (`db.obj.dialect`, set by open_database).
"""

import os
import threading
import time
from contextlib import contextmanager, nullcontext
from itertools import chain
from weakref import WeakSet

from models.engine.sql import placeholders, statement_parts
from models.engine.write_turns import WriteTurns

_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The key of the PostgreSQL advisory lock that serialises writers (see Postgres.lock_writes).
_WRITE_LOCK_KEY = 0x444E5341  # "DNSA"
_COUNTING_LOCK_KEY = 0x444E5343  # "DNSC": one process counts at a time
_LEAST = -(2**63)


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only, as SQLite's LIKE compares them."""
    return text.translate(str.maketrans(_ASCII_UPPER, _ASCII_UPPER.lower()))


# The write-ahead log is restarted once it is past a quarter of its limit, waiting for old
# readers up to the seconds paired with the largest share of the limit it is past (see
# SQLite.after_write): past the first share at most once a second, past the others after every
# write.
WAL_RESTART_WAITS = ((0.25, 0.25), (0.5, 1.0), (0.75, 5.0))
WAL_CHECK_SECONDS = 1.0
# After a restart the next commit truncates the log's file to this share of the limit
# (journal_size_limit, see models.engine.database), below the first share: a log restarted is no longer
# judged past it.
WAL_KEPT_SHARE = 1 / 8
# How long emptying the write-ahead log after the privacy job may wait for readers (holding
# writers back meanwhile).
TRUNCATE_WAIT_SECONDS = 1.0
# The parameters one SQLite statement may take: its default bound since 3.32, which every
# connection is held to (models/engine/database.py), whatever its build allows.
MAX_VARIABLES = 32_766
# Rows a statement at most: each size of statement stays prepared in sqlite3's cache of a
# connection's last 128 (1,310 rows of 25 values: 2.5 MB; every size of each helper's ~27 MB a
# connection, 55 with the privacy job's); 256 rows keep them ~10x smaller for a few per cent
# more a row, and still let go of the interpreter lock once per 256 rows. (A deletion's keys,
# terms of an OR, stay well under SQLite's bound on an expression's depth, 1,000.)
_ROWS_PER_STATEMENT = 256


def _many_a_statement(rows: list, per: int, statement) -> list[tuple[str, list]]:
    """`rows` in statements of `per` rows, then of powers of two rows (see
    utils.statement_parts), `statement(n)` the text for n rows: each with its one set of
    parameters, the rows' values one after another."""
    return [(statement(len(part)), [list(chain.from_iterable(part))]) for part in statement_parts(rows, per)]


def _rows_per_statement(width: int) -> int:
    return min(_ROWS_PER_STATEMENT, MAX_VARIABLES // width)


class SQLite:
    name = "sqlite"
    # The ids of the records one deletion removes (see records._delete).
    victim_table = "CREATE TEMP TABLE IF NOT EXISTS victim (id INTEGER PRIMARY KEY)"
    # The terms looked for by models/privacy/unused_terms.py.
    term_check_table = "CREATE TEMP TABLE IF NOT EXISTS term_check (id INTEGER PRIMARY KEY)"

    def greatest(self, first: str, second: str) -> str:
        """SQL: the greater of two integer expressions, NULL only when both are (`first` once)."""
        return f"NULLIF(MAX(COALESCE({first}, {_LEAST}), COALESCE({second}, {_LEAST})), {_LEAST})"

    # A temporary table of the record table's columns (models/records/thawing.py).
    temp_like_record = "CREATE TEMP TABLE IF NOT EXISTS {table} AS SELECT * FROM main.record WHERE 0"

    def __init__(self, wal_limit: int = 256 << 20, path: str | None = None, busy_seconds: float = 30.0):
        self.wal_limit = wal_limit
        # Writers queue for their turn before BEGIN (see models/engine/write_turns.py).
        self._turns = WriteTurns(path) if path and path != ":memory:" else None
        self._busy_seconds = busy_seconds
        self._next_wal_check = 0.0
        self._wal_lock = threading.Lock()

    def driver_sql(self, sql: str) -> str:
        return sql  # sqlite3 takes `?` placeholders as they are

    @contextmanager
    def begin_write(self, db):
        # Take the write lock at BEGIN: a deferred transaction that reads first and writes later
        # fails at once with "database is locked" when another writer got in between, while
        # IMMEDIATE waits its turn (busy_timeout); queued for it first, unless nested.
        if self._turns is None or db.in_transaction():
            with db.atomic("IMMEDIATE") as transaction:
                yield transaction
            return
        with self._turns.turn(self._busy_seconds), db.atomic("IMMEDIATE") as transaction:
            yield transaction

    # Whether a read's transaction may make a temporary table (see models.engine.database.temp_table).
    read_makes_tables = True

    def begin_read(self, db):
        """A transaction whose statements all see one snapshot (models.engine.database.snapshot). In WAL
        mode a deferred transaction takes it at its first read and keeps it to its end; writers
        go on meanwhile (the snapshot keeps the log from being restarted: see after_write)."""
        return db.transaction()

    def ready_read_tables(self, connection, statements, query):
        pass  # a read's transaction makes its temporary tables itself

    def checkpoint(self, query):
        query("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def storing(self):
        """A block that reads and writes a batch of records: writes that yield_to_storing let it
        go first (see models/engine/write_turns.py)."""
        return nullcontext() if self._turns is None else self._turns.storing()

    def counting_turn(self, query):
        """A block that yields whether this process has the turn to count (see
        models/engine/write_turns.py)."""
        return nullcontext(True) if self._turns is None else self._turns.counting_turn()

    def yield_to_storing(self, seconds: float, stop):
        if self._turns is not None:
            self._turns.yield_to_storing(seconds, stop)

    def lock_writes(self, query):
        pass  # BEGIN IMMEDIATE already holds the database's one write lock

    def after_write(self, path: str, query):
        """Keep the write-ahead log under `wal_limit`. SQLite restarts it from its start only when no
        reader still uses it, and with overlapping readers (dashboards, looping scripts) and
        ingest going on that moment never comes by itself: the log grew by gigabytes. Past a
        size, a RESTART checkpoint waits for the readers of the moment (new ones read the file
        once it is copied back) and for that wait holds writers back: briefly at first, longer
        the further over the log is, so ingest slows down rather than fill the disk. A read
        holds its snapshot at most ANALYTICS_QUERY_SECONDS.

        The file's size stands for what the log holds: it only grows when the log outgrows it,
        and the commit after a restart cuts it to WAL_KEPT_SHARE of the limit. (Cut to no less
        than the first share, every check after a restart found it past that share again, and
        held writers back each second for nothing.)"""
        try:
            size = os.path.getsize(path + "-wal")
        except OSError:
            return
        waits = [seconds for share, seconds in WAL_RESTART_WAITS if size >= share * self.wal_limit]
        if not waits:
            return
        if len(waits) == 1:
            now = time.monotonic()
            with self._wal_lock:
                if now < self._next_wal_check:
                    return
                self._next_wal_check = now + WAL_CHECK_SECONDS
        usual = query("PRAGMA busy_timeout").fetchone()[0]
        query(f"PRAGMA busy_timeout = {int(waits[-1] * 1000)}")
        try:
            query("PRAGMA wal_checkpoint(RESTART)").fetchall()
        finally:
            query(f"PRAGMA busy_timeout = {int(usual)}")

    @contextmanager
    def secure_deletes(self, query):
        """What this connection deletes in the block is overwritten with zeros, also on pages it
        frees (secure_delete FAST, the default here, leaves those as they were). Nests."""
        before = query("PRAGMA secure_delete").fetchone()[0]
        query("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            query(f"PRAGMA secure_delete = {('OFF', 'ON', 'FAST')[before]}")  # a number 2 reads as ON

    def erase_old_versions(self, query) -> bool:
        """After the privacy job: copy the write-ahead log into the file and empty it, as it
        still holds the pages as they were before the job rewrote or deleted them. Waits for the
        readers of the moment (and holds writers back) up to TRUNCATE_WAIT_SECONDS; whether it
        was emptied."""
        usual = query("PRAGMA busy_timeout").fetchone()[0]
        query(f"PRAGMA busy_timeout = {int(TRUNCATE_WAIT_SECONDS * 1000)}")
        try:
            busy, _, _ = query("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            query(f"PRAGMA busy_timeout = {int(usual)}")
        return not busy

    def limit_queries(self, connection, query, seconds, stop):
        """Stop this connection's statements past `seconds` from now, or as soon as `stop()`
        says so (None: no limit): SQLite asks a progress handler every few thousand steps."""
        if seconds is None:
            connection.set_progress_handler(None, 0)
            return
        deadline = time.monotonic() + seconds
        calls = 0

        def interrupt() -> bool:
            nonlocal calls
            calls += 1
            return time.monotonic() > deadline or (stop is not None and calls % 64 == 0 and stop())

        connection.set_progress_handler(interrupt, 5000)

    def term_in(self, values: list) -> tuple[str, list]:
        """(condition on the term table's `value`, params) matching any of `values`."""
        return f"value IN ({placeholders(len(values))})", list(values)

    def term_index(self) -> str:
        return "CREATE UNIQUE INDEX IF NOT EXISTS term_value ON term (value)"

    def like_ascii_nocase(self, expr: str) -> str:
        """`expr LIKE ?`, ignoring the case of ASCII letters (pass the pattern ascii_lower'ed)."""
        return f"{expr} LIKE ? ESCAPE '\\'"  # SQLite's LIKE ignores ASCII case by itself

    def by_id(self, table: str, alias: str) -> str:
        """A FROM item for `table` read by its id range alone: a short range of the newest ids
        (the records not counted yet) is read faster than any index of the window finds them."""
        return f"{table} {alias} NOT INDEXED"  # the integer primary key is no index: still used

    def json_array_rows(self, expr: str, alias: str) -> str:
        """A FROM item with one row per element of the JSON text array `expr`, column `value`."""
        return f"json_each({expr}) {alias}"

    def insert_rows(self, head: str, width: int, rows: list, tail: str) -> list[tuple[str, list]]:
        """The statements, each with its sets of parameters, that insert `rows` (tuples of
        `width` values) with `head` (INSERT INTO table (columns)), then `tail` (an ON
        CONFLICT clause). Here statements of many rows each (VALUES (...), (...), ...), one
        execution each: sqlite3's executemany lets go of the interpreter lock for every row and
        must win it back for the next, so beside a busy thread of its process (a request
        decoding its batch) each row waited up to the switch interval (5 ms), and a count's
        15,000 rollup rows stood still, holding the write lock. Measured, 15,000 upserts into a
        table of 300,000 rows: as cheap as executemany alone (2.1-2.7 us a row against
        1.9-2.6), and 4-6 us a row beside a busy thread, where executemany took 2 ms a row (and
        the rows as one JSON parameter, used before, 3.1-3.5 and 10)."""
        row = f"({placeholders(width)})"
        return _many_a_statement(
            rows, _rows_per_statement(width), lambda n: f"{head} VALUES {', '.join([row] * n)} {tail}"
        )

    def delete_keyed(self, table: str, columns: tuple, keys: list, condition: str) -> list[tuple[str, list]]:
        """The statements, each with its sets of parameters, that delete the rows of `table`
        whose `columns` hold one of `keys` and that meet `condition`: many keys a statement, for
        the reason insert_rows gives. The keys as terms of an OR, which SQLite looks up one by
        one by the whole key; a list (IN (VALUES ...)) it scanned the table for, or (named,
        with the planner's statistics) looked up by a part of the key only, reading every row
        of an hour's names for each. Measured, 30,000 keys: 1.3 us a key, executemany 1.0."""
        match = f"({' AND '.join(f'{column} = ?' for column in columns)})"
        return _many_a_statement(
            keys,
            _rows_per_statement(len(columns)),
            lambda n: f"DELETE FROM {table} WHERE ({' OR '.join([match] * n)}) AND {condition}",
        )

    def update_rows(self, table: str, columns: tuple, key: str, rows: list) -> list[tuple[str, list]]:
        """The statements, each with its sets of parameters, that set `columns` of the rows of
        `table` whose `key` is the last value of each of `rows` to the values before it: many
        rows a statement (UPDATE ... FROM a VALUES list, each row looked up by its key), for the
        reason insert_rows gives."""
        width = len(columns) + 1
        names = [f"v{i}" for i in range(width)]
        assignments = ", ".join(f"{column} = v.{name}" for column, name in zip(columns, names[:-1], strict=True))
        row = f"({placeholders(width)})"
        return _many_a_statement(
            rows,
            _rows_per_statement(width),
            lambda n: (
                f"WITH v({', '.join(names)}) AS (VALUES {', '.join([row] * n)})"
                f" UPDATE {table} SET {assignments} FROM v WHERE {table}.{key} = v.{names[-1]}"
            ),
        )

    def binary_order(self, expr: str) -> str:
        """`expr` for ORDER BY, ordered by code point as SQLite orders text by default."""
        return expr

    def after_filling_temp_table(self, query, table: str):
        pass

    def schema_version(self, query) -> int:
        return query("PRAGMA user_version").fetchone()[0]

    def set_schema_version(self, query, version: int):
        query(f"PRAGMA user_version = {int(version)}")

    def reclaim_space(self, query, pages_per_step: int):
        """Give pages freed by deletions back to the filesystem, a bounded step at a time so that
        writers are never held up for long, and refresh the planner's statistics."""
        while query("PRAGMA freelist_count").fetchone()[0] > 0:
            before = query("PRAGMA freelist_count").fetchone()[0]
            query(f"PRAGMA incremental_vacuum({int(pages_per_step)})").fetchall()
            if query("PRAGMA freelist_count").fetchone()[0] >= before:
                break  # not an auto_vacuum database (created before it was set): nothing to do
        # Planner statistics: PRAGMA optimize only looks at what its own connection queried, so it
        # may do nothing here; a sampled ANALYZE (analysis_limit) is cheap at any size and always
        # leaves statistics to plan with.
        query("PRAGMA analysis_limit = 1000")
        query("ANALYZE")
        self.checkpoint(query)


class Postgres(SQLite):
    name = "postgresql"
    victim_table = "CREATE TEMP TABLE IF NOT EXISTS victim (id BIGINT PRIMARY KEY)"
    term_check_table = "CREATE TEMP TABLE IF NOT EXISTS term_check (id BIGINT PRIMARY KEY)"
    temp_like_record = "CREATE TEMP TABLE IF NOT EXISTS {table} (LIKE record)"
    read_makes_tables = False

    def __init__(self):
        super().__init__()
        self._read_tables_ready = WeakSet()  # the connections that hold them

    def begin_read(self, db):
        # READ COMMITTED (the default) gives each statement a snapshot of its own; REPEATABLE READ
        # gives the transaction one, taken at its first statement. READ ONLY: a read can fail
        # with no serialization error, and one that would write to the store fails at once.
        # It may fill temporary tables, not make them: ready_read_tables makes them first.
        return db.transaction(isolation_level="REPEATABLE READ READ ONLY")

    def ready_read_tables(self, connection, statements, query):
        # Made outside any transaction, a temporary table lasts as long as its connection.
        if connection not in self._read_tables_ready:
            for statement in statements:
                query(statement(self))
            self._read_tables_ready.add(connection)

    def greatest(self, first: str, second: str) -> str:
        return f"GREATEST({first}, {second})"  # NULLs are left out

    def driver_sql(self, sql: str) -> str:
        # psycopg's placeholders are %s, so a literal % (the modulo of time buckets) is doubled.
        # No query here has a `?` or `%` inside a string literal: values are always parameters.
        return sql.replace("%", "%%").replace("?", "%s")

    def begin_write(self, db):
        return db.atomic()

    def checkpoint(self, query):
        pass  # the server checkpoints by itself

    def storing(self):
        return nullcontext()  # writers wait on the advisory lock, woken as it is released

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

    def yield_to_storing(self, seconds: float, stop):
        pass

    def after_write(self, path: str, query):
        pass  # PostgreSQL recycles its write-ahead log by itself

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

    def lock_writes(self, query):
        # Writers take turns, as on SQLite. This keeps every read-then-write step of the store
        # (upserts, "is this client left without records", job leases) free of races, and it
        # makes record ids commit in order: the realtime stream reads "ids above the last one
        # sent" and would skip a lower id that committed after a higher one. Per schema, as the
        # counting turn: stores sharing a database write apart.
        query("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", [_WRITE_LOCK_KEY])

    def term_in(self, values: list) -> tuple[str, list]:
        # Terms can be longer than a B-tree entry may be (answer sets), so they are unique by
        # their md5; comparing the value too keeps a collision from matching the wrong term.
        marks = placeholders(len(values))
        return f"md5(value) IN ({', '.join(['md5(?)'] * len(values))}) AND value IN ({marks})", [*values, *values]

    def term_index(self) -> str:
        return "CREATE UNIQUE INDEX IF NOT EXISTS term_value_md5 ON term (md5(value))"

    def like_ascii_nocase(self, expr: str) -> str:
        return f"translate({expr}, '{_ASCII_UPPER}', '{_ASCII_UPPER.lower()}') LIKE ? ESCAPE '\\'"

    def by_id(self, table: str, alias: str) -> str:
        return f"{table} {alias}"  # the planner picks the id index for a short range by itself

    def json_array_rows(self, expr: str, alias: str) -> str:
        return f"json_array_elements_text(CAST({expr} AS json)) AS {alias}(value)"

    def insert_rows(self, head: str, width: int, rows: list, tail: str) -> list[tuple[str, list]]:
        # psycopg's executemany sends the rows in one round trip (pipeline mode).
        return [(f"{head} VALUES ({placeholders(width)}) {tail}", rows)]

    def delete_keyed(self, table: str, columns: tuple, keys: list, condition: str) -> list[tuple[str, list]]:
        # psycopg's executemany sends the keys in one round trip (pipeline mode).
        return [(f"DELETE FROM {table} WHERE {' AND '.join(f'{c} = ?' for c in columns)} AND {condition}", keys)]

    def update_rows(self, table: str, columns: tuple, key: str, rows: list) -> list[tuple[str, list]]:
        # psycopg's executemany sends the rows in one round trip (pipeline mode).
        return [(f"UPDATE {table} SET {', '.join(f'{c} = ?' for c in columns)} WHERE {key} = ?", rows)]

    def binary_order(self, expr: str) -> str:
        # The database's collation (often en_US) would order "B" after "a"; answers must not
        # depend on the engine or its locale.
        return f'{expr} COLLATE "C"'

    def after_filling_temp_table(self, query, table: str):
        # Temporary tables have no statistics until analysed; without them the planner may scan
        # the whole record table instead of probing its primary key once per id.
        query(f"ANALYZE {table}")

    def schema_version(self, query) -> int:
        query("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = query("SELECT MAX(version) FROM schema_version").fetchone()
        return row[0] or 0

    def set_schema_version(self, query, version: int):
        query("DELETE FROM schema_version")
        query("INSERT INTO schema_version (version) VALUES (?)", [version])

    def reclaim_space(self, query, pages_per_step: int):
        pass  # autovacuum reclaims and analyses on its own schedule
