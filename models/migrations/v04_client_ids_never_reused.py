"""Version 4: rollups without question names (counted anew: see reconcile.py), and client
entry ids never reused (a client deleted and seen again is a new entry): on SQLite the client
table made anew with AUTOINCREMENT, same ids (PostgreSQL came with version 5)."""

from models.engine.database import is_sqlite
from models.migrations.rebuild import autoincrement, rebuild_sqlite_table


def up():
    if is_sqlite():
        rebuild_sqlite_table("client", autoincrement)
