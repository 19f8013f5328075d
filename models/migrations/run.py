"""Creating the schema of a new database, and bringing an older one to the current version (at
start, from every process: safe when several start at once)."""

from playhouse.migrate import SchemaMigrator, migrate

from models.access.tokens import ensure_token_secret
from models.engine.database import db, is_sqlite, query, retry_locked, write_transaction
from models.engine.sql import chunks
from models.records import domains, terms, thawing
from models.schema import settings
from models.schema.tables import SCHEMA_VERSION, TABLES, Client, NameSeen, Record, Rollup, Term
from models.statistics import counting, first_seen, rollups


def create_schema():
    """Create (or migrate) the schema. Safe when several processes start at once."""
    dialect = db.obj.dialect
    # A clustered key saves the rowid index on SQLite; PostgreSQL has no such option.
    Rollup._meta.without_rowid = is_sqlite()
    NameSeen._meta.without_rowid = is_sqlite()

    def create():
        with write_transaction():  # also keeps two processes from creating tables at once
            version = dialect.schema_version(query)
            db.create_tables(TABLES, safe=True)  # IF NOT EXISTS: new tables appear on upgrade
            _term_ids_never_reused()
            query(dialect.term_index())
            if version == 0:
                terms.seed()
            query("DROP INDEX IF EXISTS record_client_ts")  # before (client, ts, question)
            _add_missing_columns(Record)
            _add_missing_columns(Client)
            # Partial: ingestion reads the few clients marked not logged with every batch.
            query("CREATE INDEX IF NOT EXISTS client_unlogged ON client (endpoint, client_id) WHERE unlogged")
            if 0 < version < 11:
                map_stored_questions()  # the stored names, before the table existed
            if 0 < version < 12:
                first_seen.note_stored_names()  # from the records still stored
            counting.start()  # before a new layout is counted: it counts up to the mark
            _count_rollups_if_new_layout(fresh=version == 0)
            rollups.built_through(write=True)  # after: the blocks' rows in their new places
            ensure_token_secret()
            dialect.set_schema_version(query, SCHEMA_VERSION)

    retry_locked(create)


def _term_ids_never_reused():
    """A SQLite term table made before terms could be deleted numbers them max(id) + 1, which
    hands the id of a deleted newest term out again: made anew with AUTOINCREMENT, same ids.
    (A PostgreSQL sequence never goes back.)"""
    if not is_sqlite():
        return
    (sql,) = query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'term'").fetchone()
    if "AUTOINCREMENT" in sql.upper():
        return
    query("ALTER TABLE term RENAME TO term_before")
    db.create_tables([Term])
    query("INSERT INTO term (id, value) SELECT id, value FROM term_before")
    query("DROP TABLE term_before")  # its index with it: create_schema makes the new one


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
        query("DROP TABLE IF EXISTS rollup_day")  # the daily table of schema versions before 5
        relayout(layout or "")
    settings.write("rollup_layout", rollups.LAYOUT)


def relayout(previous: str):
    """Bring rows counted under the layout `previous` to rollups.LAYOUT. Rows of a dim whose meaning
    is kept are renumbered, not counted anew: past the records' horizon the records that made
    them are gone. Rows of dims no longer wanted go; new dims are counted from the records."""
    old = {}
    for entry in previous.split(";"):
        ident, _, description = entry.partition(":")
        if description:
            old[description] = int(ident)
    moves = {old[dim.description]: dim.id for dim in rollups.DIMS if dim.description in old}
    if moves:
        query(f"DELETE FROM rollup WHERE dim NOT IN ({', '.join('?' * len(moves))})", list(moves))
    else:
        query("DELETE FROM rollup")
    # Through numbers no dim has, so that no move lands on rows still waiting to move.
    aside = 1 + max([*moves, *moves.values()], default=0)
    for before, after in moves.items():
        if before != after:
            query("UPDATE rollup SET dim = ? WHERE dim = ?", [aside + after, before])
    query("UPDATE rollup SET dim = dim - ? WHERE dim >= ?", [aside, aside])
    new = tuple(dim for dim in rollups.DIMS if dim.description not in old)
    if new:
        counting.apply("1 = 1", [], 1, new, counted_only=True)
        # and the frozen records, a run at a time
        for run in thawing.runs(None, None, None, False):
            thawing.stage(run)
            counting.apply("1 = 1", [], 1, new, counted_only=True, table=thawing.STAGING)


def map_stored_questions() -> int:
    """Map every question already stored (records, and the statistics that outlive them); for
    a database made before the map existed. Call inside a write transaction."""
    dims = [dim.id for dim in rollups.DIMS if dim.columns and dim.columns[0] == "question"]
    found = {row[0] for row in query("SELECT DISTINCT question FROM record")}
    if dims:
        marks = ", ".join("?" * len(dims))
        found.update(
            row[0] for row in query(f"SELECT DISTINCT value / {rollups.PAIR} FROM rollup WHERE dim IN ({marks})", dims)
        )
    found.discard(None)
    found.discard(0)
    mapped = 0
    for part in chunks(sorted(found), 5_000):
        names = terms.term_values(part)
        ids = terms.term_ids(set(names.values()) | domains.domains_of(names.values()))
        domains.map_questions(ids, names.values())
        mapped += len(names)
    return mapped
