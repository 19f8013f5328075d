"""Version 2: a record's source address and answer set are interned strings (term ids) rather
than text in the row. SQLite only (PostgreSQL came with version 5): the record table is made
anew with both columns INTEGER, each distinct text interned and its id put in its place."""

from models.engine.database import is_sqlite, query
from models.migrations.rebuild import rebuild_sqlite_table
from models.records import terms

COLUMNS = ("src_ip", "answers")


def up():
    if not is_sqlite():
        return
    rebuild_sqlite_table("record", _as_integers)
    for column in COLUMNS:
        texts = [row[0] for row in query(f"SELECT DISTINCT {column} FROM record WHERE typeof({column}) = 'text'")]
        for text, term in terms.term_ids(texts).items():
            query(f"UPDATE record SET {column} = ? WHERE {column} = ?", [term, text])


def _as_integers(sql: str) -> str:
    for column in COLUMNS:
        sql = sql.replace(f'"{column}" TEXT', f'"{column}" INTEGER')
    return sql
