"""Facts about the stored data that are not rows of it (the store_setting table): the rollups'
layout, the statistics horizon, the realtime tokens' signing secret, the term generation."""

from models.engine.database import query


def read(name: str) -> str | None:
    row = query("SELECT value FROM store_setting WHERE name = ?", [name]).fetchone()
    return None if row is None else row[0]


def write(name: str, value: str):
    """Set `name` to `value`; call inside a write transaction."""
    query("DELETE FROM store_setting WHERE name = ?", [name])
    query("INSERT INTO store_setting (name, value) VALUES (?, ?)", [name, value])
