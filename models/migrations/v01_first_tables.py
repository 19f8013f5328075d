"""Version 1: the first schema (endpoint, client, term, record with its strings as text, keys, the
admin-action log, job leases, imports). A new database is not walked up from here: this step
makes the newest schema at once (every table of models/schema/tables.py, the common strings
interned first) and the runner stamps it with the newest version, as Alembic's `stamp head`."""

from models.engine.database import db
from models.records import terms
from models.schema.tables import TABLES


def up():
    db.create_tables(TABLES)
    terms.seed()
