"""What every start brings to the current code, whatever the stored version: what follows from the
catalogue and the models by itself (a table or a NULL-able column they gained, their indexes, the
rollups' layout) rather than from a numbered step (see docs/layout.md, "The schema's history")."""

from playhouse.migrate import SchemaMigrator, migrate

from models.access.tokens import ensure_token_secret
from models.engine.database import db, is_sqlite, query
from models.migrations.rebuild import autoincrement, rebuild_sqlite_table
from models.migrations.relayout import relayout
from models.schema import settings
from models.schema.tables import TABLES, Client, Record
from models.statistics import counting, rollups


def tables_and_columns():
    """Tables the models gained (IF NOT EXISTS, with their indexes), and the NULL-able columns
    they gained: a new catalogue field is one entry, its column added here."""
    db.create_tables(TABLES, safe=True)
    _term_ids_never_reused()
    query(db.obj.dialect.term_index())
    query("DROP INDEX IF EXISTS record_client_ts")  # before (client, ts, question)
    _add_missing_columns(Record)
    _add_missing_columns(Client)
    # Partial: ingestion reads the few clients marked not logged with every batch.
    query("CREATE INDEX IF NOT EXISTS client_unlogged ON client (endpoint, client_id) WHERE unlogged")


def counts_and_secrets(fresh: bool):
    """The rollups counted under the current layout, their blocks summed, the token secret made."""
    counting.start()  # before a new layout is counted: it counts up to the mark
    _count_rollups_if_new_layout(fresh)
    rollups.built_through(write=True)  # after: the blocks' rows in their new places
    ensure_token_secret()


def _term_ids_never_reused():
    """Term ids made before terms could be deleted: on SQLite numbered max(id) + 1, which hands
    the id of a deleted newest term out again (made anew with AUTOINCREMENT, same ids); on
    PostgreSQL a 32-bit INTEGER (widened to the BIGINT the model has). No version number was
    given to the change, so every start looks."""
    if is_sqlite():
        rebuild_sqlite_table("term", autoincrement)
        return
    kind = query(
        "SELECT data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = 'term' AND column_name = 'id'"
    ).fetchone()[0]
    if kind != "bigint":
        query("ALTER TABLE term ALTER COLUMN id TYPE BIGINT")
        query("ALTER SEQUENCE term_id_seq AS BIGINT")


def _add_missing_columns(model):
    """Columns the model (the catalogue, for Record) gained since the table was made (all NULL-able: unknown in the
    rows already stored)."""
    present = {column.name for column in db.get_columns(model._meta.table_name)}
    missing = [field for field in model._meta.sorted_fields if field.column_name not in present]
    if missing:
        migrator = SchemaMigrator.from_database(db.obj)
        migrate(*(migrator.add_column(model._meta.table_name, field.column_name, field) for field in missing))


def _count_rollups_if_new_layout(fresh: bool):
    """Bring the rollups to the current layout when they were counted under another (a
    catalogue field gained or lost a rollup): they would be read under wrong meanings."""
    layout = settings.read("rollup_layout")
    if layout == rollups.LAYOUT:
        return
    if not fresh:
        relayout(layout or "")
    settings.write("rollup_layout", rollups.LAYOUT)
