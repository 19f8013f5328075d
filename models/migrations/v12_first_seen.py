"""Version 12: when each name was first and last asked on each endpoint (name_seen, a
statistic kept past the records' horizon). The table is new (reconcile.py makes it); the names
of the records still stored are noted here."""

from models.statistics import first_seen


def up():
    first_seen.note_stored_names()
