"""The record store: peewee models on SQLite (WAL) or PostgreSQL, and the queries the API needs,
in rooms that import downward only (the order in docs/layout.md, held by tests/test_layers.py),
one module per concern (import the module: `models.ingest.ingestion.store_records(...)`).

It speaks rows: named tuples with the store's column names. The wire (schemas/) makes JSON."""
