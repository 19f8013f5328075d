"""The database engines: what every engine provides (interface.py), one module per engine
(sqlite.py, postgres.py), binding and transactions whatever the engine (database.py), SQLite's
writers taking turns, SQL helpers."""
