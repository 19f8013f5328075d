"""A SQLite table made anew under an edited definition (SQLite alters neither a column's type
nor a table's key in place): same rows, same ids, its indexes made again."""

import re

from models.engine.database import query

_ID_KEY = re.compile(r'((?:"id"|\bid)\s+INTEGER\s+(?:NOT\s+NULL\s+)?PRIMARY\s+KEY)', re.IGNORECASE)


def rebuild_sqlite_table(table: str, edit) -> bool:
    """Make `table` anew from `edit(its CREATE TABLE text)`; False (and nothing done) when the
    edit changes nothing. Call inside a write transaction."""
    (sql,) = query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", [table]).fetchone()
    edited = edit(sql)
    if edited == sql:
        return False
    listed = "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL"
    indexes = [row[0] for row in query(listed, [table])]
    columns = ", ".join(f'"{row[1]}"' for row in query(f'PRAGMA table_info("{table}")'))
    query(f'ALTER TABLE "{table}" RENAME TO "{table}_before"')
    query(edited)
    query(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{table}_before"')
    query(f'DROP TABLE "{table}_before"')  # its indexes with it: made again on the new table
    for index in indexes:
        query(index)
    return True


def autoincrement(sql: str) -> str:
    """The definition with its INTEGER primary key AUTOINCREMENT (never handing a deleted
    newest id out again)."""
    if "AUTOINCREMENT" in sql.upper():
        return sql
    # Quoted as peewee writes it, or bare as a hand-made or older table may have it.
    return _ID_KEY.sub(r"\1 AUTOINCREMENT", sql, count=1)
