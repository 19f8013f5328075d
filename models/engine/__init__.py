"""The database engines: binding and transactions (database.py), what each engine does its own
way (the dialects), SQLite's writers taking turns, SQL helpers."""
