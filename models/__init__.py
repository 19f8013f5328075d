"""The record store: peewee models on SQLite (WAL) or PostgreSQL, and the queries the API needs,
one module per concern (import the module: `models.ingestion.store_records(...)`).

It speaks rows: named tuples with the store's column names. The wire (schemas/) makes JSON."""
