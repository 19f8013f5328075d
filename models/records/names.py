"""The text of stored values: terms, endpoint names, client ids, numbers and booleans."""

from catalogue import BOOLEAN, CLIENT, ENDPOINT, INTEGER, NUMBER, TERM
from models.engine.database import query
from models.engine.sql import chunks, placeholders
from models.records.terms import term_values

# A boolean column holds 0 or 1: its text is the index here.
BOOLEAN_TEXT = ("false", "true")


def value_texts(storage: str, values) -> dict:
    """{stored value: its text} for the values (ids or numbers) of a column stored as
    `storage`. Endpoint and client entry ids no longer stored are absent."""
    values = [v for v in set(values) if v is not None]
    if storage == TERM:
        return term_values(values)
    if storage in (INTEGER, NUMBER):
        return {v: str(v) for v in values}
    if storage == BOOLEAN:
        return {v: BOOLEAN_TEXT[v] for v in values}
    table, name = {ENDPOINT: ("endpoint", "name"), CLIENT: ("client", "client_id")}[storage]
    found = {}
    for part in chunks(values, 500):
        found.update(query(f"SELECT id, {name} FROM {table} WHERE id IN ({placeholders(len(part))})", part))
    return found
