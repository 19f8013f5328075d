"""What an engine provides: everything the store does differently on SQLite and on PostgreSQL.

The rest of the store writes each query once, in SQL every engine runs, with `?` placeholders
(models.engine.database.query); what cannot be written once is a method or attribute here, and
each engine (models/engine/sqlite.py, models/engine/postgres.py) is one class implementing it.
The bound database carries its engine as `db.obj.dialect`. Methods that run SQL are given
`query`, database.query, so that an engine's module needs nothing of database.py.
"""

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import ClassVar


class BackupFailed(Exception):
    """A copy of the store that could not be made, and why (for the backup command)."""


class Engine(ABC):
    """One engine. The class attributes below are part of the interface too: tests/test_layers.py
    holds every engine to having each of them."""

    # Its name, as a log line or a message says it.
    name: ClassVar[str]
    # The schemes of the database URLs it opens (ANALYTICS_DATABASE), and whether it opens a
    # plain path (a file) too.
    schemes: ClassVar[tuple[str, ...]]
    takes_paths: ClassVar[bool]
    # What ANALYTICS_DATABASE may say to choose it, for the message refusing any other.
    url_example: ClassVar[str]
    # Whether a read's transaction may make a temporary table (see database.temp_table).
    read_makes_tables: ClassVar[bool]
    # CREATE TEMP TABLE IF NOT EXISTS statements: the ids of the records one deletion removes
    # (models/clients/deletion.py), the terms models/privacy/unused_terms.py looks at, and (its
    # `{table}` formatted) a table of the record table's columns (models/records/thawing.py).
    victim_table: ClassVar[str]
    term_check_table: ClassVar[str]
    temp_like_record: ClassVar[str]
    # What follows the DDL of an id column whose ids are never handed out twice ("" if
    # nothing: the engine never reuses them anyway).
    id_never_reused: ClassVar[str]
    # Whether a table keyed by its primary key alone can be stored in that key's order, with no
    # row id beside it (SQLite's WITHOUT ROWID): the rollups and the names seen are made so.
    clustered_keys: ClassVar[bool]
    # Why the backup command cannot copy this engine's store, and what to use instead; "" when
    # back_up can.
    no_backup: ClassVar[str]

    # --- opening and the engine's own upkeep

    @classmethod
    @abstractmethod
    def open(cls, target: str, wal_limit: int):
        """A pooled peewee database for `target` (a URL of one of `schemes`, or a path if
        `takes_paths`), not yet connected, with an instance of this class as its `dialect`;
        `wal_limit`: the bytes a write-ahead log the engine bounds itself is kept under."""

    @abstractmethod
    def driver_sql(self, sql: str) -> str:
        """`sql`, written with `?` placeholders, as the engine's driver takes it."""

    @abstractmethod
    def sizes(self, query) -> tuple[int, int | None]:
        """(bytes the store takes, bytes of its write-ahead log or None when the engine keeps
        none of its own), for the metrics."""

    @abstractmethod
    def is_stopped(self, error: Exception) -> bool:
        """Whether `error` (peewee's) is a statement stopped by limit_queries."""

    @abstractmethod
    def limit_queries(self, connection, query, seconds: float | None, stop) -> None:
        """Stop `connection`'s statements past `seconds` from now, or (where the engine can ask)
        as soon as `stop()` is true; None lifts the limit."""

    @abstractmethod
    def reclaim_space(self, query, pages_per_step: int) -> None:
        """Give the space deletions freed back to the filesystem, never holding writers up for
        long, and refresh the planner's statistics (the retention job, hourly)."""

    @abstractmethod
    def secure_deletes(self, query) -> AbstractContextManager:
        """A block whose deletions leave no trace in the database's files, as far as the engine
        can (the privacy job). Nests."""

    @abstractmethod
    def erase_old_versions(self, query) -> bool:
        """Leave no copy of what the privacy job rewrote or deleted in the engine's own files
        (a log, dead rows), as far as it can at once; whether it could."""

    @abstractmethod
    def back_up(self, destination: str) -> None:
        """Write one consistent copy of the store into the new file `destination` while writers
        go on (the backup command), or raise BackupFailed saying why it could not (no_backup,
        when the engine has none)."""

    @abstractmethod
    def schema_version(self, query) -> int:
        """The schema version the store was last brought to (0: a new database)."""

    @abstractmethod
    def set_schema_version(self, query, version: int) -> None:
        """Record `version` as the store's schema version, in the caller's transaction."""

    @abstractmethod
    def term_index(self) -> str:
        """The statement making the term table's unique index on its value."""

    # --- transactions and writers' turns

    @abstractmethod
    def begin_read(self, db) -> AbstractContextManager:
        """A transaction whose statements all see the store as of one instant, and in which a
        write fails (database.snapshot)."""

    @abstractmethod
    def ready_read_tables(self, connection, statements, query) -> None:
        """Make the temporary tables reads fill (`statement(self)` for each of `statements`) on
        `connection` before a read's transaction begins, if read_makes_tables is false."""

    @abstractmethod
    def begin_write(self, db) -> AbstractContextManager:
        """A transaction holding the database's write lock from its start, so that what a writer
        reads stays true until it commits (database.write_transaction)."""

    @abstractmethod
    def lock_writes(self, query) -> None:
        """At the start of a write transaction: wait for the writers' one turn, if begin_write
        did not, so that writers take turns and record ids commit in order."""

    @abstractmethod
    def after_write(self, query) -> None:
        """After a write transaction has committed (the outermost one): the engine's upkeep,
        such as keeping a write-ahead log under its bound."""

    @abstractmethod
    def storing(self) -> AbstractContextManager:
        """A block that reads and writes a batch of records, which writes that yield_to_storing
        let go first."""

    @abstractmethod
    def yield_to_storing(self, seconds: float, stop) -> None:
        """Wait (at most `seconds`, and no longer once `stop()` is true) until a write begun now
        would hold back no batch being stored."""

    @abstractmethod
    def counting_turn(self, query) -> AbstractContextManager:
        """A block that yields whether this process has the turn to count stored records: one
        process at a time, and one that dies gives the turn back."""

    # --- SQL that is written differently

    @abstractmethod
    def term_in(self, values: list) -> tuple[str, list]:
        """(condition on the term table's `value`, its parameters) matching any of `values`, by
        the term index."""

    @abstractmethod
    def like_ascii_nocase(self, expr: str) -> str:
        """`expr LIKE ?` (with ESCAPE '\\'), ignoring the case of ASCII letters only (the pattern
        is passed sql.ascii_lower'ed)."""

    @abstractmethod
    def json_array_rows(self, expr: str, alias: str) -> str:
        """A FROM item with one row per element of the JSON text array `expr`, column `value`."""

    @abstractmethod
    def greatest(self, first: str, second: str) -> str:
        """The greater of two integer expressions, NULL only when both are."""

    @abstractmethod
    def by_id(self, table: str, alias: str) -> str:
        """A FROM item for `table` read by a short range of its ids: by the id alone, not by any
        index of the window."""

    @abstractmethod
    def binary_order(self, expr: str) -> str:
        """`expr` for ORDER BY, ordered by code point whatever the database's collation."""

    @abstractmethod
    def after_filling_temp_table(self, query, table: str) -> None:
        """After a temporary table is filled and before it is read: what the planner needs to
        read it well."""

    @abstractmethod
    def insert_rows(self, head: str, width: int, rows: list, tail: str) -> list[tuple[str, list]]:
        """The statements, each with its list of parameter sets, that insert `rows` (tuples of
        `width` values) with `head` (INSERT INTO table (columns)), then `tail` (ON CONFLICT ...),
        the way the engine takes many rows fastest."""

    @abstractmethod
    def delete_keyed(self, table: str, columns: tuple, keys: list, condition: str) -> list[tuple[str, list]]:
        """The statements, each with its list of parameter sets, that delete the rows of `table`
        whose `columns` hold one of `keys` and that meet `condition`."""

    @abstractmethod
    def update_rows(self, table: str, columns: tuple, key: str, rows: list) -> list[tuple[str, list]]:
        """The statements, each with its list of parameter sets, that set `columns` of the rows
        of `table` whose `key` is the last value of each of `rows` to the values before it."""
