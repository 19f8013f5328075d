"""Interning of repeated strings: value <-> integer id, with a per-process cache."""

from .database import db, query
from .utils import chunks, placeholders

# Past this many bytes the cache starts over rather than growing without bound. Bytes, not
# entries: answer sets are terms too, and can be kilobytes each. A value is costed as its
# length plus the str object and the entries of both dicts.
CACHE_BYTES = 64 * 1024 * 1024
_ENTRY_OVERHEAD = 250


def term_ids(values) -> dict[str, int]:
    """Ids for `values`, creating the missing terms. Call inside a write transaction.

    Only ids read back as already committed are cached: an id created in this transaction
    would be wrong in the cache if the transaction rolled back and the id were reused.
    """
    cache = db.obj.term_cache
    found = {}
    missing = []
    for value in set(values):
        term = cache.get(value)
        if term is None:
            missing.append(value)
        else:
            found[value] = term
    if not missing:
        return found
    existing = _select_ids(missing)
    _remember(existing)
    found.update(existing)
    new = [value for value in missing if value not in existing]
    for part in chunks(new, 500):
        query(
            "INSERT INTO term (value) VALUES " + ", ".join(["(?)"] * len(part)) + " ON CONFLICT DO NOTHING",
            part,
        )
    if new:
        found.update(_select_ids(new))
    return found


def term_values(ids) -> dict[int, str]:
    """The strings of term ids (ids of stored records always exist)."""
    cache = db.obj.term_value_cache
    found = {}
    missing = []
    for term in set(ids):
        if term is None:
            continue
        value = cache.get(term)
        if value is None:
            missing.append(term)
        else:
            found[term] = value
    for part in chunks(missing, 500):
        rows = query("SELECT id, value FROM term WHERE id IN (" + placeholders(len(part)) + ")", part).fetchall()
        _remember({value: term for term, value in rows})
        found.update(rows)
    return found


def _select_ids(values) -> dict[str, int]:
    found = {}
    for part in chunks(values, 500):
        condition, params = db.obj.dialect.term_in(part)
        found.update(query(f"SELECT value, id FROM term WHERE {condition}", params).fetchall())
    return found


def _remember(mapping: dict[str, int]):
    cache, reverse = db.obj.term_cache, db.obj.term_value_cache
    cost = sum(len(value) for value in mapping) + _ENTRY_OVERHEAD * len(mapping)
    if db.obj.term_cache_bytes + cost > CACHE_BYTES:
        cache.clear()
        reverse.clear()
        db.obj.term_cache_bytes = 0
    db.obj.term_cache_bytes += cost
    cache.update(mapping)
    reverse.update((term, value) for value, term in mapping.items())
