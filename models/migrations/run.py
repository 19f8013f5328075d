"""Bringing the database to this release's schema at start (from every process: safe when several
start at once): a new one made, an older one walked up a numbered step at a time
(models/migrations/steps.py), a newer one refused."""

from models.engine.database import db, query, retry_locked, write_transaction
from models.migrations import reconcile, steps
from models.schema.tables import SCHEMA_VERSION, BlockQuestion, NameSeen, Rollup


class NewerDatabase(RuntimeError):
    """The database was brought to a schema version this release does not know."""

    def __init__(self, version: int):
        super().__init__(
            f"the database is at schema version {version}, newer than this release knows ({SCHEMA_VERSION}):"
            " a newer release has used it. Run that release (or a later one) on it, or restore a backup"
            " made before the upgrade; nothing was changed."
        )
        self.version = version


def stored_version() -> int:
    """The database's schema version (0: a new database). Refuses a newer one."""
    version = db.obj.dialect.schema_version(query)
    if version > SCHEMA_VERSION:
        raise NewerDatabase(version)
    return version


def pending() -> tuple[int, list[int]]:
    """The database's schema version and the steps a start would run (see steps.due), writing
    nothing. Refuses a newer database."""
    with db.atomic() as transaction:
        version = stored_version()
        # PostgreSQL's version table is made where it is missing: not by a look.
        transaction.rollback()
    return version, steps.due(version)


def create_schema() -> list[int]:
    """Run the steps due (see steps.due) and the reconciliation every start makes; the steps
    run. Safe when several processes start at once."""
    for model in (Rollup, NameSeen, BlockQuestion):
        model._meta.without_rowid = db.obj.dialect.clustered_keys

    def create():
        with write_transaction():  # also keeps two processes from migrating at once
            version = stored_version()
            due = steps.due(version)
            if version:
                reconcile.tables_and_columns()  # before the steps: they may read tables that came later
            for step in due:
                steps.STEPS[step].up()
            reconcile.tables_and_columns()
            reconcile.counts_and_secrets(fresh=version == 0)
            if version != SCHEMA_VERSION:
                db.obj.dialect.set_schema_version(query, SCHEMA_VERSION)
            return due

    return retry_locked(create)
