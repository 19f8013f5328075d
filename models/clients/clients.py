"""Client entries: listing with last-activity times, deletion, aliases, the not-logged mark."""

from collections import namedtuple

from models.clients.deletion import client_selection, delete_records, delete_to_anonymous
from models.engine.database import db, query, snapshot, write_transaction
from models.engine.sql import chunks, placeholders
from models.privacy import privacy, unused_terms
from models.records import freezing
from models.schema.endpoints import endpoint_ids
from models.schema.tables import CLIENT_META_FIELDS
from models.statistics import rollups

_ENTRY_COLUMNS = "e.name, c.client_id, c.alias, " + ", ".join(f"c.{f}" for f in CLIENT_META_FIELDS) + ", c.unlogged"
# A client entry: its endpoint's name, its client id, alias, metadata, whether it is marked
# not logged (None: logged), and the time of its newest stored record (None when it has none).
ClientRow = namedtuple("ClientRow", ["endpoint", "client_id", "alias", *CLIENT_META_FIELDS, "unlogged", "last_ts"])


@snapshot()
def list_clients(endpoint: str | None = None, client_ids=None, endpoint_limit=None) -> tuple[dict, list]:
    """The selected client entries, and the last activity of their endpoints:
    ({endpoint name: ms or None}, [ClientRow]), ordered by endpoint name then client id.

    A client's last activity is its newest stored record (None when it has none); an
    endpoint's counts all its records, selected clients or not, and its lost-record mark.
    """
    names, entries = client_entries(endpoint, client_ids, endpoint_limit, freezing.newest_sql("c"))
    last = endpoint_last_activity(names)
    return {name: last[ident] for ident, name in names.items()}, entries  # in the listing's order


def client_entries(endpoint, client_ids, endpoint_limit, newest: str = "NULL") -> tuple[dict, list]:
    """The selected client entries as ClientRows (their last_ts the SQL `newest` of entry `c`),
    ordered by endpoint name then client id, and their endpoints' names by id."""
    selection, params = client_selection([endpoint] if endpoint is not None else None, client_ids, endpoint_limit)
    order = db.obj.dialect.binary_order
    sql = (
        f"SELECT e.id, {_ENTRY_COLUMNS}, {newest}"
        f" FROM client c JOIN endpoint e ON e.id = c.endpoint WHERE c.id IN ({selection})"
        f" ORDER BY {order('e.name')}, {order('c.client_id')}"
    )
    entries, names = [], {}
    for endpoint_id, *row in query(sql, params):
        names[endpoint_id] = row[0]
        entries.append(ClientRow._make(row))
    return names, entries


def endpoint_last_activity(endpoint_ids) -> dict[int, int | None]:
    """max(newest stored record, lost mark) per endpoint id."""
    found = {}
    for part in chunks(endpoint_ids, 500):
        rows = query(
            "SELECT e.id, e.lost_mark, (SELECT MAX(r.ts) FROM record r WHERE r.endpoint = e.id),"
            " (SELECT MAX(b.last_ts) FROM record_block b WHERE b.endpoint = e.id)"
            f" FROM endpoint e WHERE e.id IN ({placeholders(len(part))})",
            part,
        )
        for endpoint_id, mark, newest, frozen in rows:
            times = [t for t in (mark, newest, frozen) if t is not None]
            found[endpoint_id] = max(times) if times else None
    return found


def get_client(endpoint: str, client_id: str) -> ClientRow | None:
    """One client entry, or None when it does not exist."""
    _, entries = list_clients(endpoint, [client_id])
    return entries[0] if entries else None


def set_alias(endpoint: str, client_id: str, alias: str) -> bool:
    """Set (or with "" clear) a client's alias; whether the client has an entry. Its entry with
    its last activity is the record store's to read (list_clients)."""
    with write_transaction():
        cursor = query(
            "UPDATE client SET alias = ? WHERE client_id = ? AND endpoint = (SELECT id FROM endpoint WHERE name = ?)",
            (alias, client_id, endpoint),
        )
        return cursor.rowcount > 0


def set_logged(endpoint: str, client_id: str, logged: bool) -> tuple[ClientRow, int]:
    """Mark a client as logged or not (see models/privacy/privacy.py): (the entry, made with its
    endpoint when the client has not been seen yet; how many stored records went). Marked not
    logged, its records stored so far and its entry's metadata (but the alias) go too, their
    counts left in the statistics as its queries from then on are (anonymously, or not at all)."""
    with write_transaction():
        endpoint_id = mark_logged(endpoint, client_id, logged)
        deleted = 0
        if not logged:
            selection, params = client_selection([endpoint], [client_id])
            entries = query(f"SELECT id, endpoint FROM client WHERE id IN ({selection})", params).fetchall()
            # Its frozen records as rows, so that their strings are noted too.
            freezing.melt_holding(sorted({row[1] for row in entries}), [row[0] for row in entries])
            unused_terms.note_records(f"client IN ({selection})", params)
            if privacy.effective(privacy.settings(), endpoint)["unlogged_clients"] == privacy.COUNTED:
                deleted = delete_to_anonymous(endpoint, client_id)
            else:
                deleted = delete_records([endpoint], [client_id])
            clear_metadata(endpoint_id, client_id)
        return get_client(endpoint, client_id), deleted


def mark_logged(endpoint: str, client_id: str, logged: bool) -> int:
    """Mark a client entry logged or not, made with its endpoint when it has not been seen yet;
    its endpoint's id. Call inside a write transaction."""
    (endpoint_id,) = endpoint_ids([endpoint]).values()
    query(
        "INSERT INTO client (endpoint, client_id, unlogged) VALUES (?, ?, ?)"
        " ON CONFLICT (endpoint, client_id) DO UPDATE SET unlogged = excluded.unlogged",
        [endpoint_id, client_id, None if logged else True],
    )
    return endpoint_id


def clear_metadata(endpoint_id: int, client_id: str) -> None:
    """Forget a client entry's metadata (not its alias): a client no longer logged."""
    cleared = ", ".join(f"{field} = '', {field}_ts = NULL" for field in CLIENT_META_FIELDS)
    query(f"UPDATE client SET {cleared} WHERE endpoint = ? AND client_id = ?", [endpoint_id, client_id])


def purge_records(endpoints, client_ids, end_ms: int, endpoint_limit, batch_size: int, after_batch=None) -> int:
    """The bulk of a client deletion, outside a transaction: the selected clients' records up to
    `end_ms`, in write transactions of at most `batch_size` records each (delete_records, with
    `after_batch(deleted so far)` in each), so that the batches being stored get their turn
    between them (one transaction of 400,000 records held ingest for 7 s). Each leaves records,
    rollups and lost marks consistent: a deletion cut short is finished by the next. How many
    records went. delete_clients ends the deletion."""
    return delete_records(
        endpoints, client_ids, end_ms, batch_size=batch_size, endpoint_limit=endpoint_limit, after_batch=after_batch
    )


def delete_clients(endpoints=None, client_ids=None, end_ms: int = 0, endpoint_limit=None) -> tuple[list, int]:
    """Purge the selected clients' records up to `end_ms` and delete the entries left without
    records, in one transaction: (the deleted (endpoint, client_id), sorted; how many records
    went). After purge_records, what is left is what was stored meanwhile.

    An entry that still has a record (newer than end_ms) shows the client came back: it stays.
    """
    selection, params = client_selection(endpoints, client_ids, endpoint_limit)
    with write_transaction():
        deleted = delete_records(endpoints, client_ids, end_ms, endpoint_limit=endpoint_limit)
        gone = query(
            "SELECT c.id, e.name, c.client_id FROM client c JOIN endpoint e ON e.id = c.endpoint"
            f" WHERE c.id IN ({selection})"
            f" AND NOT {freezing.has_records_sql('c')}",
            params,
        ).fetchall()
        for part in chunks([ident for ident, _, _ in gone], 500):
            # Counts past the records' horizon that still name the entry go with it.
            rollups.forget(None, client_ids=placeholders(len(part)), params=part)
            query(f"DELETE FROM client WHERE id IN ({placeholders(len(part))})", part)
    return sorted((name, client) for _, name, client in gone), deleted
