"""The database object, bound late to a SQLite file or a database URL, and its connection settings."""

import os
import time
from contextlib import contextmanager

from peewee import DatabaseProxy, OperationalError, SqliteDatabase
from playhouse.db_url import connect as connect_url
from playhouse.pool import PooledDatabase, PooledSqliteDatabase

db = DatabaseProxy()

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
    "cache_size": -64 * 1024,
    "temp_store": "memory",
    # Truncate the WAL back to this size after a checkpoint so it cannot stay large.
    "journal_size_limit": 64 * 1024 * 1024,
}


def open_database(target: str):
    """Bind `db` to a SQLite file path or a database URL (sqlite:///..., postgresql://...)."""
    if "://" in target:
        if not target.startswith("sqlite"):
            # A PostgreSQL backend is planned, not built: say so rather than half-work.
            raise RuntimeError(f"ANALYTICS_DATABASE: only SQLite is supported for now, not {target.split(':')[0]!r}")
        database = connect_url(target)
        if isinstance(database, SqliteDatabase):
            database = _sqlite(database.database)
    else:
        database = _sqlite(target)
    if isinstance(db.obj, PooledDatabase):
        db.obj.close_all()  # the pool of a database this process no longer uses
    if isinstance(database, SqliteDatabase) and database.database != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(database.database)), exist_ok=True)
    # Caches that are only valid for this one database (see models.terms).
    database.term_cache = {}
    database.term_value_cache = {}
    db.initialize(database)
    return database


def _sqlite(path: str) -> SqliteDatabase:
    # Pooled: a request's close() hands the connection back instead of closing it. Closing the
    # last connection to a WAL database checkpoints and removes the WAL (~5 ms), and a new one
    # runs every pragma again (~4 ms): far more than most requests take.
    # A pooled connection serves one thread at a time, but not always the thread that opened it.
    return PooledSqliteDatabase(
        path, pragmas=SQLITE_PRAGMAS, max_connections=128, stale_timeout=600, check_same_thread=False
    )


def is_sqlite() -> bool:
    return isinstance(db.obj, SqliteDatabase)


def write_transaction():
    """A transaction that takes the write lock at BEGIN on SQLite.

    A deferred transaction that reads first and writes later fails at once with
    "database is locked" when another writer got in between; IMMEDIATE waits (busy_timeout).
    """
    if is_sqlite():
        return db.atomic("IMMEDIATE")
    return db.atomic()


@contextmanager
def connection():
    """Open a connection for the block unless the caller already holds one."""
    opened = db.connect(reuse_if_open=True)
    try:
        yield db
    finally:
        if opened and not db.is_closed():
            db.close()


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


def reclaim_space(pages_per_step: int = 2000):
    """Give pages freed by deletions back to the filesystem, a bounded step at a time so that
    writers are never held up for long, and refresh the planner's statistics."""
    if not is_sqlite():
        return
    while db.execute_sql("PRAGMA freelist_count").fetchone()[0] > 0:
        before = db.execute_sql("PRAGMA freelist_count").fetchone()[0]
        db.execute_sql(f"PRAGMA incremental_vacuum({int(pages_per_step)})").fetchall()
        if db.execute_sql("PRAGMA freelist_count").fetchone()[0] >= before:
            break  # not an auto_vacuum database (created before it was set): nothing to do
    # Planner statistics: PRAGMA optimize only looks at what its own connection queried, so it
    # may do nothing here; a sampled ANALYZE (analysis_limit) is cheap at any size and always
    # leaves statistics to plan with.
    db.execute_sql("PRAGMA analysis_limit = 1000")
    db.execute_sql("ANALYZE")
    db.execute_sql("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
