"""Appending records: endpoints, client entries with their metadata, terms and rows in one
transaction per batch."""

from . import rollups
from .database import db, query, query_many, write_transaction
from .tables import CLIENT_META_FIELDS
from .terms import term_ids
from .utils import chunks, placeholders

# Record columns that hold Term ids (the record dicts carry their strings under these keys).
TERM_COLUMNS = (
    "profile",
    "question",
    "rr_type",
    "status",
    "protocol",
    "trigger_type",
    "trigger_value",
    "spoof_target",
    "src_country",
    "src_city",
    "src_isp",
    "dst_country",
    "dst_isp",
    # Source addresses and whole answer sets repeat too (a client's address; the answers of a
    # domain), so they are interned like the rest: rows stay a few dozen bytes of small integers.
    "src_ip",
    "answers",
)
PLAIN_COLUMNS = ("ts", "action", "src_asn", "dst_asn")
_ROW_FIELDS = ("endpoint", "client", *TERM_COLUMNS, *PLAIN_COLUMNS)  # of the inserted tuples

_INSERT_RECORD = (
    "INSERT INTO record (endpoint, client, "
    + ", ".join(TERM_COLUMNS + PLAIN_COLUMNS)
    + ") VALUES ("
    + placeholders(2 + len(TERM_COLUMNS) + len(PLAIN_COLUMNS))
    + ")"
)

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


def store_records(records: list[dict], in_transaction=None) -> int:
    """Store validated records (see schemas.records.parse_record) all or nothing.

    `in_transaction`, if given, is called inside the same transaction once the records are
    written: what it writes commits (or rolls back) together with them.
    """
    if not records:
        return 0
    with write_transaction():
        endpoints = endpoint_ids({r["endpoint_id"] for r in records})
        clients = _upsert_clients(records, endpoints)
        terms = term_ids(r[column] for r in records for column in TERM_COLUMNS if r[column] is not None)
        rows = [
            (endpoints[r["endpoint_id"]], clients[(r["endpoint_id"], r["client_id"])])
            + tuple(None if r[c] is None else terms[r[c]] for c in TERM_COLUMNS)
            + tuple(r[c] for c in PLAIN_COLUMNS)
            for r in records
        ]
        query_many(_INSERT_RECORD, rows)
        rollups.add_rows(rows, _ROW_FIELDS)
        if in_transaction is not None:
            in_transaction()
    return len(records)


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


def _upsert_clients(records, endpoints) -> dict[tuple[str, str], int]:
    """Create or update the client entries of a batch; their ids by (endpoint, client)."""
    newest: dict[tuple[str, str], dict[str, tuple[int, str]]] = {}
    for r in records:
        fields = newest.setdefault((r["endpoint_id"], r["client_id"]), {})
        for name, value in r["meta"].items():
            seen = fields.get(name)
            if seen is None or r["ts"] >= seen[0]:
                fields[name] = (r["ts"], value)
    width = 2 + 2 * len(CLIENT_META_FIELDS)
    ids = {}
    for part in chunks(newest.items(), 500):
        params = []
        for (endpoint, client), fields in part:
            params += (endpoints[endpoint], client)
            for name in CLIENT_META_FIELDS:
                ts, value = fields.get(name, (None, ""))
                params += (value, ts)
        rows = query(
            f"INSERT INTO client ({_CLIENT_COLUMNS}) VALUES "
            + ", ".join([f"({placeholders(width)})"] * len(part))
            + _CLIENT_UPSERT_TAIL,
            params,
        ).fetchall()
        by_id = {ident: name for name, ident in endpoints.items()}
        ids.update(((by_id[endpoint], client), ident) for ident, endpoint, client in rows)
    return ids


def newest_record_id() -> int:
    """The highest record id ever assigned (AUTOINCREMENT: never reused)."""
    return db.obj.dialect.newest_record_id(query)
