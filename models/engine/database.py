"""The database object, bound late to the engine a database URL or path names, and what the store
does with it whatever the engine: statements, transactions, snapshots (models/engine/interface.py
is what differs per engine)."""

import logging
from contextlib import contextmanager

import peewee
from peewee import DatabaseError, DatabaseProxy
from playhouse.pool import PooledDatabase

from models.engine import postgres, sqlite

log = logging.getLogger(__name__)

db = DatabaseProxy()

# The engines ANALYTICS_DATABASE can name, each by its URL schemes (sqlite.SQLite also by a plain
# path). A new engine is a module beside these, its import above, and its entry here.
ENGINES = (sqlite.SQLite, postgres.Postgres)

# The schema's history (models/migrations/) retries its start-up on SQLite's lock (see there).
retry_locked = sqlite.retry_locked


def open_database(target: str, wal_limit: int = 256 << 20):
    """Bind `db` to a database URL (sqlite:///..., postgresql://...) or a SQLite file path;
    `wal_limit`: the bytes a write-ahead log the engine bounds itself is kept under (see
    SQLite.after_write)."""
    database = engine_for(target).open(target, wal_limit)
    if isinstance(db.obj, PooledDatabase):
        db.obj.close_all()  # the pool of a database this process no longer uses
    # Caches that are only valid for this one database (see models.records.terms).
    database.term_cache = {}
    database.term_value_cache = {}
    database.term_cache_bytes = 0
    database.term_generation = None  # the store's term generation the cache was filled under
    database.mapped_questions = set()  # term ids known to have their registrable domain
    database.pattern_matches = {}  # question patterns' matching term ids (see models.records.filters)
    db.initialize(database)
    return database


def engine_for(target: str):
    """The engine class that opens `target`, a URL or a path."""
    if "://" in target:
        scheme = target.split("://", 1)[0]
        found = [engine for engine in ENGINES if scheme in engine.schemes]
    else:
        found = [engine for engine in ENGINES if engine.takes_paths]
    if not found:
        raise RuntimeError(
            f"ANALYTICS_DATABASE: {target.split(':')[0]!r} is not supported: use "
            + ", or ".join(engine.url_example for engine in ENGINES)
        )
    return found[0]


def bind(database):
    """Make `db` (back) into `database`, a result of open_database."""
    if db.obj is not database:
        db.initialize(database)


def is_sqlite() -> bool:
    """For the schema's history only (models/migrations/: what an older release did on SQLite);
    the rest of the store asks its engine (db.obj.dialect) instead."""
    return isinstance(db.obj.dialect, sqlite.SQLite)


def query(sql: str, params=()):
    """Run one statement written with `?` placeholders (see models/engine/interface.py); its cursor."""
    return db.execute_sql(db.obj.dialect.driver_sql(sql), params)


def query_many(sql: str, rows):
    """Run one statement written with `?` placeholders once per row of parameters. Its errors
    are peewee's, as query's are (a statement stopped by limit_queries among them)."""
    with peewee.__exception_wrapper__:
        db.cursor().executemany(db.obj.dialect.driver_sql(sql), rows)


def insert_rows(head: str, width: int, rows: list, tail: str = ""):
    """Insert many rows: `head` is `INSERT INTO table (columns)`, each row a tuple of `width`
    values, `tail` what follows (ON CONFLICT ...), the way the engine takes many rows fastest
    (Engine.insert_rows)."""
    if rows:
        _run(db.obj.dialect.insert_rows(head, width, rows, tail))


def delete_keyed(table: str, columns: tuple, keys: list, condition: str = "TRUE"):
    """Delete the rows of `table` whose `columns` hold one of `keys` (tuples of numbers) and
    that meet `condition`, the way the engine takes many keys fastest (Engine.delete_keyed)."""
    if keys:
        _run(db.obj.dialect.delete_keyed(table, columns, keys, condition))


def update_rows(table: str, columns: tuple, key: str, rows: list):
    """Set `columns` of the rows of `table` whose `key` is the last value of each of `rows`
    (tuples) to the values before it, the way the engine takes many rows fastest
    (Engine.update_rows)."""
    if rows:
        _run(db.obj.dialect.update_rows(table, columns, key, rows))


def _run(statements: list[tuple[str, list]]):
    for statement, parameters in statements:
        query_many(statement, parameters)


# Statements (functions of the engine) that make the temporary tables reads fill: made before
# a read's snapshot begins (see temp_table).
_READ_TABLES: list = []


def read_table(statement) -> None:
    """Register `statement(engine)`, a CREATE TEMP TABLE IF NOT EXISTS that reads fill (at import
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
    Engine.begin_read; a write in it fails). Nests, and inside a write transaction the
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
    turns and what a writer reads stays true until it commits (see Engine.begin_write)."""
    if in_snapshot():
        raise RuntimeError("a write inside a read's snapshot")
    dialect = db.obj.dialect
    with dialect.begin_write(db) as transaction:
        dialect.lock_writes(query)
        yield transaction
    if not db.in_transaction():
        try:
            dialect.after_write(query)
        except DatabaseError:
            # The write has committed: it succeeded, whatever the engine's upkeep met (a full disk
            # SQLite's checkpoint cannot extend the file on). Failing it here would have its
            # caller answer an error for what is stored, and a sender store it again.
            log.exception("the write committed, but the engine's upkeep after it (after_write) failed")


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


class QueryStopped(Exception):
    """A read of a record store outside this database (ClickHouse) stopped past its time budget
    (RecordStore.limit_reads), as limit_queries stops this database's."""


def limit_queries(seconds: float | None, stop=None):
    """Stop the statements of this connection past `seconds` from now, or once `stop()` is
    true (None: lift the limit). The statement stopped fails with QueryStopped."""
    db.obj.dialect.limit_queries(db.connection(), query, seconds, stop)


def is_stopped_query(error: Exception) -> bool:
    """Whether `error` is a statement stopped by limit_queries."""
    return db.obj.dialect.is_stopped(error)


def secure_deletes():
    """A block whose deletions leave no trace in the database file (see Engine.secure_deletes)."""
    return db.obj.dialect.secure_deletes(query)


def erase_old_versions() -> bool:
    """Leave no copy of what the privacy job rewrote or deleted in the engine's own files, as
    far as it can at once (see Engine.erase_old_versions); whether it could."""
    return db.obj.dialect.erase_old_versions(query)


def reclaim_space(pages_per_step: int = 2000):
    """Give space freed by deletions back and refresh the planner's statistics (see Engine.reclaim_space)."""
    db.obj.dialect.reclaim_space(query, pages_per_step)


def no_backup() -> str:
    """Why back_up cannot copy this store and what to use instead; "" when it can."""
    return db.obj.dialect.no_backup


def back_up(destination: str):
    """Write one consistent copy of the store into the new file `destination` while writers go
    on; BackupFailed says why it could not."""
    db.obj.dialect.back_up(destination)
