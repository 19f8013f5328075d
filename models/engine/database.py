"""The database object, bound late to a SQLite file or a database URL, and its connection settings."""

import logging
import os
import sqlite3
import time
from contextlib import contextmanager

import peewee
from peewee import DatabaseError, DatabaseProxy, OperationalError, PostgresqlDatabase, SqliteDatabase
from playhouse.db_url import connect as connect_url
from playhouse.pool import PooledDatabase, PooledPostgresqlDatabase, PooledSqliteDatabase

from models.engine.dialect import MAX_VARIABLES, WAL_KEPT_SHARE, Postgres, SQLite

log = logging.getLogger(__name__)

db = DatabaseProxy()

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
    # WAL_KEPT_SHARE of the WAL's bound (see _sqlite).
    "journal_size_limit": 64 * 1024 * 1024,
    # Deleted or overwritten content is zeroed on the pages written anyway (no more I/O): no
    # removed value lingers in a page's free space. Pages freed whole keep theirs, unless the
    # deletion runs under dialect.secure_deletes (the privacy job).
    "secure_delete": "fast",
}


def open_database(target: str, wal_limit: int = 256 << 20):
    """Bind `db` to a SQLite file path or a database URL (sqlite:///..., postgresql://...);
    `wal_limit`: the bytes a SQLite write-ahead log is kept under (see SQLite.after_write)."""
    if target.startswith(("postgresql://", "postgres://")):
        database = _postgres("postgresql://" + target.split("://", 1)[1])
    elif "://" in target:
        if not target.startswith("sqlite"):
            raise RuntimeError(
                f"ANALYTICS_DATABASE: {target.split(':')[0]!r} is not supported: use a SQLite path or "
                "sqlite:///path, or postgresql://user@host/database"
            )
        database = _sqlite(connect_url(target).database, wal_limit)
    else:
        database = _sqlite(target, wal_limit)
    if isinstance(db.obj, PooledDatabase):
        db.obj.close_all()  # the pool of a database this process no longer uses
    if isinstance(database, SqliteDatabase) and database.database != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(database.database)), exist_ok=True)
        if not os.path.exists(database.database):
            # Only its owner may read the queries (SQLite gives -wal and -shm the same mode).
            os.close(os.open(database.database, os.O_CREAT | os.O_WRONLY, 0o600))
    # Caches that are only valid for this one database (see models.records.terms).
    database.term_cache = {}
    database.term_value_cache = {}
    database.term_cache_bytes = 0
    database.term_generation = None  # the store's term generation the cache was filled under
    database.mapped_questions = set()  # term ids known to have their registrable domain
    database.pattern_matches = {}  # question patterns' matching term ids (see models.records.filters)
    db.initialize(database)
    return database


def bind(database):
    """Make `db` (back) into `database`, a result of open_database."""
    if db.obj is not database:
        db.initialize(database)


# Pooled SQLite connections kept open while idle: a burst of concurrent requests opens one
# connection per thread, and each keeps its page cache; past this many idle ones a returned
# connection is closed instead.
MAX_IDLE_SQLITE = 4


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


def _sqlite(path: str, wal_limit: int) -> SqliteDatabase:
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
    database.dialect = SQLite(wal_limit, path, SQLITE_PRAGMAS["busy_timeout"] / 1000)
    return database


def _postgres(url: str) -> PostgresqlDatabase:
    # psycopg 3: its executemany sends a batch in one round trip (pipeline mode).
    database = PooledPostgresqlDatabase(url, prefer_psycopg3=True, max_connections=64, stale_timeout=600)
    database.dialect = Postgres()
    return database


def is_sqlite() -> bool:
    return isinstance(db.obj, SqliteDatabase)


def query(sql: str, params=()):
    """Run one statement written with `?` placeholders (see models.engine.dialect); its cursor."""
    return db.execute_sql(db.obj.dialect.driver_sql(sql), params)


def query_many(sql: str, rows):
    """Run one statement written with `?` placeholders once per row of parameters. Its errors
    are peewee's, as query's are (a statement stopped by limit_queries among them)."""
    with peewee.__exception_wrapper__:
        db.cursor().executemany(db.obj.dialect.driver_sql(sql), rows)


def insert_rows(head: str, width: int, rows: list, tail: str = ""):
    """Insert many rows: `head` is `INSERT INTO table (columns)`, each row a tuple of `width`
    values, `tail` what follows (ON CONFLICT ...). Many rows a statement where the dialect can
    (see models.engine.dialect)."""
    if rows:
        _run(db.obj.dialect.insert_rows(head, width, rows, tail))


def delete_keyed(table: str, columns: tuple, keys: list, condition: str = "TRUE"):
    """Delete the rows of `table` whose `columns` hold one of `keys` (tuples of numbers) and
    that meet `condition`. Many keys a statement where the dialect can (see models.engine.dialect)."""
    if keys:
        _run(db.obj.dialect.delete_keyed(table, columns, keys, condition))


def update_rows(table: str, columns: tuple, key: str, rows: list):
    """Set `columns` of the rows of `table` whose `key` is the last value of each of `rows`
    (tuples) to the values before it. Many rows a statement where the dialect can (see
    models.engine.dialect)."""
    if rows:
        _run(db.obj.dialect.update_rows(table, columns, key, rows))


def _run(statements: list[tuple[str, list]]):
    for statement, parameters in statements:
        query_many(statement, parameters)


# Statements (functions of the dialect) that make the temporary tables reads fill: made before
# a read's snapshot begins (see temp_table).
_READ_TABLES: list = []


def read_table(statement) -> None:
    """Register `statement(dialect)`, a CREATE TEMP TABLE IF NOT EXISTS that reads fill (at import
    time, by the module owning the table): made ready before every read's snapshot."""
    _READ_TABLES.append(statement)


def temp_table(statement: str) -> None:
    """Make a temporary table (`statement`: CREATE TEMP TABLE IF NOT EXISTS ...) unless it is one
    read_table made ready for the snapshot the connection is in (a read-only transaction on
    PostgreSQL may fill a temporary table but not make one)."""
    if db.obj.dialect.read_makes_tables or not in_snapshot():
        query(statement)


class _Snapshot:
    """The marker of a read snapshot among peewee's transactions of the thread."""


def in_snapshot() -> bool:
    return any(isinstance(t, _Snapshot) for t in db._state.transactions)


@contextmanager
def snapshot():
    """Every statement of the block sees the store as of one instant, whatever freezing,
    counting, deletion and privacy rewrites commit meanwhile: a read transaction (see
    models.engine.dialect.begin_read; a write in it fails). Nests, and inside a write transaction the
    block is already one. Hold it for a bounded read only: on SQLite a snapshot held keeps the
    write-ahead log from being restarted (see SQLite.after_write); a long read (an export, a
    stream) takes one per short step. Also a decorator."""
    if db.in_transaction():
        yield
        return
    dialect = db.obj.dialect
    dialect.ready_read_tables(db.connection(), _READ_TABLES, query)
    with dialect.begin_read(db):
        db.push_transaction(_Snapshot())
        try:
            yield
        finally:
            db.pop_transaction()


@contextmanager
def write_transaction():
    """A transaction that holds the database's write lock from its start, so that writers take
    turns and what a writer reads stays true until it commits (see models.engine.dialect)."""
    if in_snapshot():
        raise RuntimeError("a write inside a read's snapshot")
    dialect = db.obj.dialect
    with dialect.begin_write(db) as transaction:
        dialect.lock_writes(query)
        yield transaction
    if not db.in_transaction():
        try:
            dialect.after_write(db.obj.database, query)
        except DatabaseError:
            # The write has committed: it succeeded, whatever keeping the log small met (a full
            # disk the checkpoint cannot extend the file on). Failing it here would have its
            # caller answer an error for what is stored, and a sender store it again.
            log.exception("the write committed, but bounding the write-ahead log after it failed")


def storing():
    """A block that reads and writes a batch of records: background writes let it go first."""
    return db.obj.dialect.storing()


def yield_to_storing(stop=lambda: False, seconds: float = 1.0):
    """Wait (at most `seconds`, and no longer once `stop()` is true) until a write begun now
    would hold back no batch being stored: for writes that can come at any moment, such as the
    counting process's (see models/engine/write_turns.py)."""
    db.obj.dialect.yield_to_storing(seconds, stop)


def counting_turn():
    """A block that yields whether this process has the turn to count stored records into the
    statistics: one counts at a time, and one that dies gives the turn back. Hold a connection
    (connection()) around it."""
    return db.obj.dialect.counting_turn(query)


@contextmanager
def connection():
    """Open a connection for the block unless the caller already holds one."""
    opened = db.connect(reuse_if_open=True)
    try:
        yield db
    finally:
        if opened and not db.is_closed():
            db.close()


def limit_queries(seconds: float | None, stop=None):
    """Stop the statements of this connection past `seconds` from now, or once `stop()` is
    true (None: lift the limit). The statement stopped fails with QueryStopped."""
    db.obj.dialect.limit_queries(db.connection(), query, seconds, stop)


# PostgreSQL's SQLSTATEs of a stopped statement: the statement cancelled, and any statement
# after it in the same transaction (which the server refuses until the transaction ends).
_STOPPED_STATES = ("57014", "25P02")


def is_stopped_query(error: Exception) -> bool:
    """Whether `error` is a statement stopped by limit_queries."""
    cause = error.args[0] if error.args else None  # peewee keeps the driver's own error first
    if getattr(cause, "sqlstate", None) in _STOPPED_STATES:
        return True
    text = str(error).lower()
    return "interrupted" in text or "statement timeout" in text


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


def secure_deletes():
    """A block whose deletions leave no trace in the database file (see models.engine.dialect)."""
    return db.obj.dialect.secure_deletes(query)


def erase_old_versions() -> bool:
    """Leave no copy of what the privacy job rewrote or deleted in the engine's own files, as
    far as it can at once (see models.engine.dialect); whether it could."""
    return db.obj.dialect.erase_old_versions(query)


def reclaim_space(pages_per_step: int = 2000):
    """Give space freed by deletions back and refresh the planner's statistics (see models.engine.dialect)."""
    db.obj.dialect.reclaim_space(query, pages_per_step)
