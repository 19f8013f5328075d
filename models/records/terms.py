"""Interning of repeated strings: value <-> integer id, with a per-process cache.

Terms nothing refers to any more are deleted by models/privacy/unused_terms.py, so a process's cache
can name a term that is gone. Ids are never handed out twice (term.id never reused), so an id
read back always means the string it was made for; and every write that takes ids from the
cache first reads the store's term generation, which a deletion moves, and starts its cache
over when it moved: no stale id is ever written.
"""

from models.engine.database import db, query
from models.engine.sql import chunks, placeholders
from models.schema import settings

# Past this many bytes the cache starts over rather than growing without bound. Bytes, not
# entries: answer sets are terms too, and can be kilobytes each. A value is costed as its
# length plus the str object and the entries of both dicts.
CACHE_BYTES = 64 * 1024 * 1024
_ENTRY_OVERHEAD = 250
# The store_setting row that counts the rounds of term deletion (see models/privacy/unused_terms.py).
GENERATION = "term_generation"


# Strings nearly every record holds some of (record types, answer statuses, protocols, the
# filtering triggers, DNSSEC states): interned first in a new database, in this order, so that
# their ids are under 128 and SQLite stores each in one byte rather than two. Measured at 1M
# records: 4 bytes a record. Any other string is interned as it comes, as these are in an older
# database.
COMMON = (
    "",
    *("A", "AAAA", "HTTPS", "CNAME", "PTR", "TXT", "MX", "SRV", "SOA", "NS", "SVCB", "DS", "DNSKEY"),
    *("CAA", "NAPTR", "ANY", "NULL"),
    *("NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", "FORMERR", "NOTIMP", "YXDOMAIN", "NOTAUTH"),
    *("legacy", "doh", "doh3", "dot", "doq"),
    *("default", "filter", "service", "custom", "grule", "rebind"),
    *("secure", "insecure", "bogus", "indeterminate"),
)


def seed():
    """Intern COMMON in a new database, first (call inside the write transaction creating it)."""
    for value in COMMON:  # one by one: a multi-row INSERT need not number its rows in order
        query("INSERT INTO term (value) VALUES (?) ON CONFLICT DO NOTHING", [value])


def term_ids(values) -> dict[str, int]:
    """Ids for `values`, creating the missing terms. Call inside a write transaction.

    Only ids read back as already committed are cached: an id created in this transaction
    would be wrong in the cache if the transaction rolled back. An id read from the table is
    no longer a candidate for deletion (it is being used again).
    """
    _follow_generation()
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
    if existing and query("SELECT 1 FROM term_candidate LIMIT 1").fetchone():
        for part in chunks(list(existing.values()), 500):
            query(f"DELETE FROM term_candidate WHERE term IN ({placeholders(len(part))})", part)
    _remember(existing.items())
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
    """The strings of term ids; an id whose term was deleted meanwhile (its records were
    rewritten since they were read) is absent."""
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
        # Only id -> string: an id always means its string, but a reader's snapshot may be older
        # than a deletion, and a string -> id learnt from it could be written after the deletion.
        _remember([(value, term) for term, value in rows], forward=False)
        found.update(rows)
    return found


def generation() -> int:
    """How many rounds of term deletion the store has seen (see models/privacy/unused_terms.py)."""
    return int(settings.read(GENERATION) or 0)


def _follow_generation():
    """Start the cache over when terms were deleted since it was filled."""
    current = generation()
    if current != db.obj.term_generation:
        _forget()
        db.obj.term_generation = current


def _select_ids(values) -> dict[str, int]:
    found = {}
    for part in chunks(values, 500):
        condition, params = db.obj.dialect.term_in(part)
        found.update(query(f"SELECT value, id FROM term WHERE {condition}", params).fetchall())
    return found


def _forget():
    db.obj.term_cache.clear()
    db.obj.term_value_cache.clear()
    db.obj.term_cache_bytes = 0


def _remember(pairs, forward=True):
    """Cache (string, id) pairs: strings by id, and (`forward`) ids by string."""
    pairs = list(pairs)
    cost = sum(len(value) for value, _ in pairs) + _ENTRY_OVERHEAD * len(pairs)
    if db.obj.term_cache_bytes + cost > CACHE_BYTES:
        _forget()
    db.obj.term_cache_bytes += cost
    if forward:
        db.obj.term_cache.update(pairs)
    db.obj.term_value_cache.update((term, value) for value, term in pairs)
