"""SQLite, the embedded engine: a file opened by a pool of connections with its pragmas, writers
taking turns (write_turns.py), the write-ahead log kept under its bound, and the SQL it writes
its own way (see models/engine/interface.py)."""

import os
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from itertools import chain

from peewee import OperationalError
from playhouse.db_url import connect as connect_url
from playhouse.pool import PooledSqliteDatabase

from models.engine.interface import BackupFailed, Engine
from models.engine.sql import placeholders, statement_parts
from models.engine.write_turns import WriteTurns

_LEAST = -(2**63)

# sqlite3 binds a None only after asking its adapter registry, then the protocol and the value
# itself for adapting methods (~190 ns each), and a stored record holds 7 or so unknown fields:
# found in the registry, a None is handed back as it is by a call in C (~60 ns) and bound as
# NULL as before.
sqlite3.register_adapter(type(None), {}.get)

# Every SQLite connection gets these, in this one place.
SQLITE_PRAGMAS = {
    # Only takes effect on a new, empty database (before the first table): lets retention give
    # freed pages back to the filesystem with PRAGMA incremental_vacuum.
    "auto_vacuum": "incremental",
    "journal_mode": "wal",
    # FULL syncs the WAL at each commit: an acknowledged batch survives a power cut, not just
    # a crashed process. Ingestion commits whole batches, so the fsync is paid once per batch.
    "synchronous": "full",
    # Writers queue behind each other instead of failing with "database is locked".
    "busy_timeout": 30000,
    "foreign_keys": 1,
    # 16 MB of pages per connection, and a worker keeps few idle connections (see _SqlitePool):
    # long reads stream through far more pages than any of these caches holds, and the OS
    # caches the file for all connections at once.
    "cache_size": -16 * 1024,
    "temp_store": "memory",
    # Pages the WAL may hold before a commit copies them back into the file (4 MB by default):
    # that copy, and its sync, is paid inside the commit that crosses the mark, an ingest request
    # most often, so the mark is 16 MB. The counting process no longer copies them back after
    # each of its writes: in a process of its own, its passive copies ran beside the writers'
    # restarts of the log past its bound (SQLite.after_write) and held them off, and the log grew
    # past twice its bound under overlapping reads (tests/test_wal.py, 2 of 3 suite runs).
    "wal_autocheckpoint": 4000,
    # Truncate the WAL back to this size after a restart so it cannot stay large; at most
    # WAL_KEPT_SHARE of the WAL's bound (see SQLite.open).
    "journal_size_limit": 64 * 1024 * 1024,
    # Deleted or overwritten content is zeroed on the pages written anyway (no more I/O): no
    # removed value lingers in a page's free space. Pages freed whole keep theirs, unless the
    # deletion runs under secure_deletes (the privacy job).
    "secure_delete": "fast",
}

# The write-ahead log is restarted once it is past a quarter of its limit, waiting for old
# readers up to the seconds paired with the largest share of the limit it is past (see
# SQLite.after_write): past the first share at most once a second, past the others after every
# write.
WAL_RESTART_WAITS = ((0.25, 0.25), (0.5, 1.0), (0.75, 5.0))
WAL_CHECK_SECONDS = 1.0
# After a restart the next commit truncates the log's file to this share of the limit
# (journal_size_limit), below the first share: a log restarted is no longer judged past it.
WAL_KEPT_SHARE = 1 / 8
# How long emptying the write-ahead log after the privacy job may wait for readers (holding
# writers back meanwhile).
TRUNCATE_WAIT_SECONDS = 1.0
# The parameters one SQLite statement may take: its default bound since 3.32, which every
# connection is held to (_SqlitePool), whatever its build allows.
MAX_VARIABLES = 32_766
# Rows a statement at most: each size of statement stays prepared in sqlite3's cache of a
# connection's last 128 (1,310 rows of 25 values: 2.5 MB; every size of each helper's ~27 MB a
# connection, 55 with the privacy job's); 256 rows keep them ~10x smaller for a few per cent
# more a row, and still let go of the interpreter lock once per 256 rows. (A deletion's keys,
# terms of an OR, stay well under SQLite's bound on an expression's depth, 1,000.)
_ROWS_PER_STATEMENT = 256
# Pooled SQLite connections kept open while idle: a burst of concurrent requests opens one
# connection per thread, and each keeps its page cache; past this many idle ones a returned
# connection is closed instead.
MAX_IDLE_SQLITE = 4


def retry_locked(operation, attempts: int = 20):
    """Run `operation`, retrying while SQLite reports the database locked.

    Only for start-up work (schema creation) where two processes may race past busy_timeout's
    reach, e.g. both switching a brand-new file to WAL mode.
    """
    for attempt in range(attempts):
        try:
            return operation()
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def _many_a_statement(rows: list, per: int, statement) -> list[tuple[str, list]]:
    """`rows` in statements of `per` rows, then of powers of two rows (see
    sql.statement_parts), `statement(n)` the text for n rows: each with its one set of
    parameters, the rows' values one after another."""
    return [(statement(len(part)), [list(chain.from_iterable(part))]) for part in statement_parts(rows, per)]


def _rows_per_statement(width: int) -> int:
    return min(_ROWS_PER_STATEMENT, MAX_VARIABLES // width)


class _SqlitePool(PooledSqliteDatabase):
    def _can_reuse(self, conn):
        return len(self._connections) < MAX_IDLE_SQLITE and super()._can_reuse(conn)

    def _set_pragmas(self, conn):
        # auto_vacuum only counts on a file without pages yet; asked again of one that has
        # them, it waits for the write lock, so a connection opened while another process
        # wrote for longer than the connect timeout failed ("database is locked": a 10M
        # benchmark's counting thread, during an 8 s retention run). Reading is never held up.
        # Workers starting together on a brand-new file race to switch it to WAL; the loser
        # can be told "database is locked" at once, without busy_timeout's wait (seen once in
        # a benchmark start: the worker failed to boot). The pragmas can simply be set again.
        # Only while the file is new (empty: the first switch to WAL writes its first page at
        # once): on any other, a lock held past the timeout is an answer, not a race.
        retry_locked(lambda: self._set_each(conn), attempts=20 if _empty(self.database) else 1)
        # Builds differ (Debian's takes 250,000 parameters): held to SQLite's own default, a
        # statement that works here works on every build.
        conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, MAX_VARIABLES)

    def _set_each(self, conn):
        fresh = conn.execute("PRAGMA page_count").fetchone()[0] == 0
        for name, value in self._pragmas:
            if name != "auto_vacuum" or fresh:
                conn.execute(f"PRAGMA {name} = {value}")


def _empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class SQLite(Engine):
    name = "sqlite"
    # The URLs peewee's db_url reads as a SQLite file.
    schemes = ("sqlite", "sqliteext", "sqlite+pool", "sqliteext+pool")
    takes_paths = True
    url_example = "a SQLite path or sqlite:///path"
    read_makes_tables = True
    victim_table = "CREATE TEMP TABLE IF NOT EXISTS victim (id INTEGER PRIMARY KEY)"
    term_check_table = "CREATE TEMP TABLE IF NOT EXISTS term_check (id INTEGER PRIMARY KEY)"
    temp_like_record = "CREATE TEMP TABLE IF NOT EXISTS {table} AS SELECT * FROM main.record WHERE 0"
    # Without it SQLite numbers a row max(id) + 1, which hands the id of a deleted newest row
    # out again; AUTOINCREMENT keeps a high-water mark.
    id_never_reused = "AUTOINCREMENT"
    clustered_keys = True  # WITHOUT ROWID saves the rowid index
    no_backup = ""

    def __init__(self, wal_limit: int = 256 << 20, path: str | None = None, busy_seconds: float = 30.0):
        self.wal_limit = wal_limit
        self._path = path
        # Writers queue for their turn before BEGIN (see models/engine/write_turns.py).
        self._turns = WriteTurns(path) if path and path != ":memory:" else None
        self._busy_seconds = busy_seconds
        self._next_wal_check = 0.0
        self._wal_lock = threading.Lock()

    @classmethod
    def open(cls, target: str, wal_limit: int):
        path = connect_url(target).database if "://" in target else target
        # Pooled: a request's close() hands the connection back instead of closing it. Closing the
        # last connection to a WAL database checkpoints and removes the WAL (~5 ms), and a new one
        # runs every pragma again (~4 ms): far more than most requests take.
        # A pooled connection serves one thread at a time, but not always the thread that opened it.
        # Commits copy the log back past a sixteenth of its bound at most: a small bound
        # (ANALYTICS_WAL_LIMIT_MB) must not be mostly log that no commit copies back.
        pages = min(SQLITE_PRAGMAS["wal_autocheckpoint"], max(100, wal_limit // 4096 // 16))
        kept = min(SQLITE_PRAGMAS["journal_size_limit"], int(wal_limit * WAL_KEPT_SHARE))
        database = _SqlitePool(
            path,
            pragmas={**SQLITE_PRAGMAS, "wal_autocheckpoint": pages, "journal_size_limit": kept},
            max_connections=128,
            stale_timeout=600,
            check_same_thread=False,
        )
        database.dialect = cls(wal_limit, path, SQLITE_PRAGMAS["busy_timeout"] / 1000)
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            if not os.path.exists(path):
                # Only its owner may read the queries (SQLite gives -wal and -shm the same mode).
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        return database

    def driver_sql(self, sql: str) -> str:
        return sql  # sqlite3 takes `?` placeholders as they are

    def sizes(self, query) -> tuple[int, int | None]:
        return _file_size(self._path), _file_size(self._path + "-wal")

    def is_stopped(self, error: Exception) -> bool:
        return "interrupted" in str(error).lower()  # the progress handler's stop

    def back_up(self, destination: str) -> None:
        source = sqlite3.connect(self._path, timeout=30)
        target = sqlite3.connect(destination)
        try:
            # One step, so one read transaction: a consistent snapshot. In WAL mode writers go on
            # meanwhile; a copy in several steps would start over whenever one of them commits.
            source.backup(target)
            check = target.execute("PRAGMA integrity_check").fetchone()[0]
            if check != "ok":
                raise BackupFailed(f"the copy failed its integrity check: {check}")
            target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        except sqlite3.Error as exc:
            raise BackupFailed(str(exc)) from None
        finally:
            target.close()
            source.close()

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

    def begin_read(self, db):
        # In WAL mode a deferred transaction takes its snapshot at its first read and keeps it to
        # its end; writers go on meanwhile (the snapshot keeps the log from being restarted: see
        # after_write).
        return db.transaction()

    def ready_read_tables(self, connection, statements, query):
        pass  # a read's transaction makes its temporary tables itself

    def checkpoint(self, query):
        query("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def storing(self):
        return nullcontext() if self._turns is None else self._turns.storing()

    def counting_turn(self, query):
        return nullcontext(True) if self._turns is None else self._turns.counting_turn()

    def yield_to_storing(self, seconds: float, stop):
        if self._turns is not None:
            self._turns.yield_to_storing(seconds, stop)

    def lock_writes(self, query):
        pass  # BEGIN IMMEDIATE already holds the database's one write lock

    def after_write(self, query):
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
        if self._path is None:
            return
        try:
            size = os.path.getsize(self._path + "-wal")
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
        # Overwritten with zeros also on the pages the deletion frees (secure_delete FAST, the
        # default here, leaves those as they were).
        before = query("PRAGMA secure_delete").fetchone()[0]
        query("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            query(f"PRAGMA secure_delete = {('OFF', 'ON', 'FAST')[before]}")  # a number 2 reads as ON

    def erase_old_versions(self, query) -> bool:
        """Copy the write-ahead log into the file and empty it, as it still holds the pages as
        they were before the privacy job rewrote or deleted them. Waits for the readers of the
        moment (and holds writers back) up to TRUNCATE_WAIT_SECONDS."""
        usual = query("PRAGMA busy_timeout").fetchone()[0]
        query(f"PRAGMA busy_timeout = {int(TRUNCATE_WAIT_SECONDS * 1000)}")
        try:
            busy, _, _ = query("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            query(f"PRAGMA busy_timeout = {int(usual)}")
        return not busy

    def limit_queries(self, connection, query, seconds, stop):
        # SQLite asks a progress handler every few thousand steps.
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
        return f"value IN ({placeholders(len(values))})", list(values)

    def term_index(self) -> str:
        return "CREATE UNIQUE INDEX IF NOT EXISTS term_value ON term (value)"

    def like_ascii_nocase(self, expr: str) -> str:
        return f"{expr} LIKE ? ESCAPE '\\'"  # SQLite's LIKE ignores ASCII case by itself

    def greatest(self, first: str, second: str) -> str:
        # MAX of two arguments is NULL if either is (`first` written once).
        return f"NULLIF(MAX(COALESCE({first}, {_LEAST}), COALESCE({second}, {_LEAST})), {_LEAST})"

    def by_id(self, table: str, alias: str) -> str:
        # A short range of the newest ids (the records not counted yet) is read faster than any
        # index of the window finds them.
        return f"{table} {alias} NOT INDEXED"  # the integer primary key is no index: still used

    def json_array_rows(self, expr: str, alias: str) -> str:
        return f"json_each({expr}) {alias}"

    def insert_rows(self, head: str, width: int, rows: list, tail: str) -> list[tuple[str, list]]:
        """Statements of many rows each (VALUES (...), (...), ...), one execution each:
        sqlite3's executemany lets go of the interpreter lock for every row and must win it back
        for the next, so beside a busy thread of its process (a request decoding its batch) each
        row waited up to the switch interval (5 ms), and a count's 15,000 rollup rows stood
        still, holding the write lock. Measured, 15,000 upserts into a table of 300,000 rows: as
        cheap as executemany alone (2.1-2.7 us a row against 1.9-2.6), and 4-6 us a row beside a
        busy thread, where executemany took 2 ms a row (and the rows as one JSON parameter, used
        before, 3.1-3.5 and 10)."""
        row = f"({placeholders(width)})"
        return _many_a_statement(
            rows, _rows_per_statement(width), lambda n: f"{head} VALUES {', '.join([row] * n)} {tail}"
        )

    def delete_keyed(self, table: str, columns: tuple, keys: list, condition: str) -> list[tuple[str, list]]:
        """Many keys a statement, for the reason insert_rows gives. The keys as terms of an OR,
        which SQLite looks up one by one by the whole key; a list (IN (VALUES ...)) it scanned
        the table for, or (named, with the planner's statistics) looked up by a part of the key
        only, reading every row of an hour's names for each. Measured, 30,000 keys: 1.3 us a
        key, executemany 1.0."""
        match = f"({' AND '.join(f'{column} = ?' for column in columns)})"
        return _many_a_statement(
            keys,
            _rows_per_statement(len(columns)),
            lambda n: f"DELETE FROM {table} WHERE ({' OR '.join([match] * n)}) AND {condition}",
        )

    def update_rows(self, table: str, columns: tuple, key: str, rows: list) -> list[tuple[str, list]]:
        """Many rows a statement (UPDATE ... FROM a VALUES list, each row looked up by its key),
        for the reason insert_rows gives."""
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
        return expr  # SQLite orders text by code point by default

    def after_filling_temp_table(self, query, table: str):
        pass

    def schema_version(self, query) -> int:
        return query("PRAGMA user_version").fetchone()[0]

    def set_schema_version(self, query, version: int):
        query(f"PRAGMA user_version = {int(version)}")

    def reclaim_space(self, query, pages_per_step: int):
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
