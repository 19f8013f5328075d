"""Appending records: endpoints, client entries with their metadata, terms and rows in one
transaction per batch."""

from itertools import chain

from catalogue import CLIENT, ENDPOINT, FIELDS, TERM
from models.engine.database import insert_rows, query, write_transaction
from models.engine.sql import placeholders, statement_parts
from models.ingest import enrichment
from models.privacy import privacy
from models.records import domains, freezing
from models.records.terms import term_ids
from models.runtime.clock import now_ms
from models.schema.endpoints import endpoint_ids
from models.schema.tables import CLIENT_META_FIELDS
from models.statistics import counting

# Where each kind of value sits in a new record's values (catalogue order).
_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_TS, _ENDPOINT, _CLIENT, _QUESTION = _AT["ts"], _AT["endpoint"], _AT["client"], _AT["question"]
# Record columns that hold Term ids: source addresses and whole answer sets repeat too (a
# client's address; the answers of a domain), so every string is interned: rows stay a few
# dozen bytes of small integers.
TERM_COLUMNS = tuple(field.sql for field in FIELDS if field.storage == TERM)
_TERMS_AT = [_AT[sql] for sql in TERM_COLUMNS]
_VALUES_AT = [i for i, field in enumerate(FIELDS) if field.storage not in (TERM, ENDPOINT, CLIENT)]
_INSERTED = ["endpoint", "client", *TERM_COLUMNS, *(FIELDS[i].sql for i in _VALUES_AT)]
_INSERT_RECORD = f"INSERT INTO record ({', '.join(_INSERTED)})"

# A field is taken from the batch when the batch saw it at a time at least as new as the
# stored one; a field the batch did not see (timestamp NULL) keeps its stored value.
_CLIENT_UPSERT_TAIL = (
    " ON CONFLICT (endpoint, client_id) DO UPDATE SET "
    + ", ".join(
        f"{f} = CASE WHEN excluded.{f}_ts >= COALESCE(client.{f}_ts, excluded.{f}_ts) "
        f"THEN excluded.{f} ELSE client.{f} END, "
        f"{f}_ts = CASE WHEN excluded.{f}_ts >= COALESCE(client.{f}_ts, excluded.{f}_ts) "
        f"THEN excluded.{f}_ts ELSE client.{f}_ts END"
        for f in CLIENT_META_FIELDS
    )
    + " RETURNING id, endpoint, client_id"
)
_CLIENT_COLUMNS = "endpoint, client_id, " + ", ".join(f"{f}, {f}_ts" for f in CLIENT_META_FIELDS)


def store_records(records: list[tuple], in_transaction=None, first=None) -> int:
    """Store new records all or nothing. A new record is (values, client metadata): the
    values of catalogue.FIELDS in its order (strings for terms, the endpoint's name and the
    client's id; None: unknown), and {client column: value} of what it says of its client.

    `in_transaction`, if given, is called inside the same transaction once the records are
    written: what it writes commits (or rolls back) together with them; `first`, if given, is
    called in it before anything is written (an exception from it writes nothing).
    The batch is enriched first, once (models/ingest/enrichment.py: geography, privacy settings).
    """
    if not records:
        return 0
    return privacy.storing(_store, enrichment.enriched, records, in_transaction, first)


def _store(records: list[tuple], in_transaction, first) -> int:
    # Everything that needs no ids is done before taking the write lock, which writers share:
    # the batch column by column, its strings, its clients' metadata.
    columns = list(zip(*(values for values, _ in records), strict=True))
    client_keys = list(zip(columns[_ENDPOINT], columns[_CLIENT], strict=True))
    strings = set(chain.from_iterable(columns[i] for i in _TERMS_AT))
    strings.discard(None)
    questions = set(columns[_QUESTION])
    strings |= domains.domains_of(questions)
    metadata = newest_metadata(records, client_keys, columns[_TS])
    with write_transaction():
        if first is not None:
            first()
        endpoints = endpoint_ids(set(columns[_ENDPOINT]))
        clients = upsert_clients(metadata, endpoints)
        terms = term_ids(strings)
        terms[None] = None
        # The stored columns: ids in place of names and strings.
        stored = [
            list(map(endpoints.__getitem__, columns[_ENDPOINT])),
            list(map(clients.__getitem__, client_keys)),
            *(list(map(terms.__getitem__, columns[i])) for i in _TERMS_AT),
            *(columns[i] for i in _VALUES_AT),
        ]
        # Many rows a statement (see models.engine.sqlite): with executemany a busy thread beside the
        # request (another request, an export) had each row wait for the interpreter lock.
        insert_rows(_INSERT_RECORD, len(_INSERTED), list(zip(*stored, strict=True)))
        mapped = domains.map_questions(terms, questions)
        # Counted behind the request (models/statistics/counting.py), unless too many wait already.
        if counting.catch_up(counting.behind_limit, {"ts": columns[_TS], **dict(zip(_INSERTED, stored, strict=True))}):
            # What the count let go of, past the hot horizon: at least as many as arrived, so
            # that freezing keeps up with a backfill of old records.
            freezing.freeze(now_ms(), max(freezing.STEP_RECORDS, len(records)))
        if in_transaction is not None:
            in_transaction()
    domains.remember(mapped)
    return len(records)


class AlreadyStored(Exception):
    """The batch's idempotency key was used before: nothing was stored this time."""

    def __init__(self, accepted: int):
        super().__init__(accepted)
        self.accepted = accepted


def store_once(records: list[tuple], key: str, now_ms: int, store=None) -> int:
    """store_records (or `store`, a store's own with its arguments), remembering `key` in the
    same transaction; AlreadyStored (and nothing written) when a batch with this key was stored
    before. The key is looked at first, under the write lock: a replay costs one lookup, and two
    at once cannot both store."""

    def not_yet():
        row = query("SELECT accepted FROM ingest_batch WHERE key = ?", [key]).fetchone()
        if row is not None:
            raise AlreadyStored(row[0])

    def remember():
        query("INSERT INTO ingest_batch (key, created, accepted) VALUES (?, ?, ?)", [key, now_ms, len(records)])

    if not records:
        with write_transaction():
            not_yet()
            remember()
        return 0
    return (store or store_records)(records, in_transaction=remember, first=not_yet)


def forget_batch_keys(before_ms: int) -> int:
    """Forget the idempotency keys of batches stored before `before_ms`."""
    with write_transaction():
        return query("DELETE FROM ingest_batch WHERE created < ?", [before_ms]).rowcount


def newest_metadata(records, client_keys, stamps) -> dict[tuple[str, str], tuple[dict, dict]]:
    """Per client of the batch, the newest value of each metadata field it saw and the time it
    saw it: ({field: value}, {field: ts}). Ties go to the later record."""
    # A feed's records of one client usually carry the same fields: then its newest record
    # says everything, found in one pass (sorting the batch and merging every record's fields
    # cost 8 us a record). A client whose records differ is merged field by field.
    newest: dict[tuple[str, str], tuple[int, int]] = {}  # client -> (ts, index) of its newest
    fields: dict[tuple[str, str], set] = {}  # client -> every field its records carry
    for i, (key, ts, (_, meta)) in enumerate(zip(client_keys, stamps, records, strict=True)):
        if not meta:
            fields.setdefault(key, set())
            continue
        seen = fields.get(key)
        if seen is None:
            fields[key] = set(meta)
        elif not seen.issuperset(meta):
            seen.update(meta)
        best = newest.get(key)
        if best is None or ts >= best[0]:
            newest[key] = (ts, i)
    found, mixed = {}, {}
    for key, seen in fields.items():
        if key not in newest:
            found[key] = ({}, {})
            continue
        ts, i = newest[key]
        meta = records[i][1]
        if len(seen) == len(meta):
            found[key] = (dict(meta), dict.fromkeys(meta, ts))
        else:
            mixed[key] = []
    if mixed:
        for i, key in enumerate(client_keys):
            if key in mixed:
                mixed[key].append(i)
        found.update((key, _merged_metadata(indexes, records, stamps)) for key, indexes in mixed.items())
    return found


def _merged_metadata(indexes, records, stamps) -> tuple[dict, dict]:
    """The newest value of each field among the records at `indexes`, and its time."""
    values, times = {}, {}
    for i in sorted(indexes, key=stamps.__getitem__):  # stable: ties keep batch order
        meta = records[i][1]
        if meta:
            values.update(meta)
            times.update(dict.fromkeys(meta, stamps[i]))
    return values, times


def upsert_clients(metadata, endpoints) -> dict[tuple[str, str], int]:
    """Create or update the client entries of a batch (see newest_metadata); their ids by
    (endpoint, client)."""
    width = 2 + 2 * len(CLIENT_META_FIELDS)
    by_id = {ident: name for name, ident in endpoints.items()}
    ids = {}
    # A few sizes of statement (see utils.statement_parts): one of 500 clients holds 0.8 MB.
    for part in statement_parts(list(metadata.items()), 500):
        params = []
        for (endpoint, client), (values, times) in part:
            params += (endpoints[endpoint], client)
            for name in CLIENT_META_FIELDS:
                params += (values.get(name, ""), times.get(name))
        rows = query(
            f"INSERT INTO client ({_CLIENT_COLUMNS}) VALUES "
            + ", ".join([f"({placeholders(width)})"] * len(part))
            + _CLIENT_UPSERT_TAIL,
            params,
        ).fetchall()
        ids.update(((by_id[endpoint], client), ident) for ident, endpoint, client in rows)
    return ids
