"""Endpoints by name: their ids, made the first time a name is seen."""

from models.engine.database import query
from models.engine.sql import chunks, placeholders


def endpoint_ids(names) -> dict[str, int]:
    """Ids of endpoints by name, creating the missing ones. Call inside a write transaction."""
    names = list(names)
    for part in chunks(names, 500):
        query(
            "INSERT INTO endpoint (name) VALUES " + ", ".join(["(?)"] * len(part)) + " ON CONFLICT (name) DO NOTHING",
            part,
        )
    found = {}
    for part in chunks(names, 500):
        found.update(
            (name, ident)
            for ident, name in query(f"SELECT id, name FROM endpoint WHERE name IN ({placeholders(len(part))})", part)
        )
    return found
