"""Version 8: the record table made from the catalogue (catalogue.py), its rollups' layout
kept in store_setting (a new table: reconcile.py makes it). An integer field is a BIGINT
there: on PostgreSQL the record's action, an INTEGER before, is widened (SQLite's INTEGER is
64-bit already)."""

from models.engine.database import is_sqlite, query


def up():
    if not is_sqlite():
        query("ALTER TABLE record ALTER COLUMN action TYPE BIGINT")
