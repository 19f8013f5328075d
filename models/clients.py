"""Client entries: listing with last-activity times, deletion, aliases."""

from .database import db, write_transaction
from .tables import CLIENT_META_FIELDS
from .utils import chunks, placeholders

_ENTRY_COLUMNS = "c.id, e.id, e.name, c.client_id, c.alias, " + ", ".join(
    f"c.{f}" for f in CLIENT_META_FIELDS
)


def list_clients(endpoint: str | None = None, client_ids=None) -> dict:
    """Endpoints with their selected clients, as
    {endpoint: {"lastActivityTime": ms, "clients": {client_id: entry}}}.

    A client's last activity is its newest stored record (None when it has none); an
    endpoint's counts all its records, selected clients or not, and its lost-record mark.
    """
    where, params = [], []
    if endpoint is not None:
        where.append("e.name = ?")
        params.append(endpoint)
    if client_ids:
        where.append(f"c.client_id IN ({placeholders(len(client_ids))})")
        params += client_ids
    sql = (
        f"SELECT {_ENTRY_COLUMNS}, (SELECT MAX(r.ts) FROM record r WHERE r.client = c.id)"
        " FROM client c JOIN endpoint e ON e.id = c.endpoint"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY e.name, c.client_id"
    )
    items: dict[str, dict] = {}
    endpoint_ids = {}
    for row in db.execute_sql(sql, params):
        _, endpoint_id, name, client_id = row[:4]
        endpoint_ids[endpoint_id] = name
        item = items.setdefault(name, {"lastActivityTime": None, "clients": {}})
        item["clients"][client_id] = _entry(row)
    for endpoint_id, last in endpoint_last_activity(endpoint_ids).items():
        items[endpoint_ids[endpoint_id]]["lastActivityTime"] = last
    return items


def endpoint_last_activity(endpoint_ids) -> dict[int, int | None]:
    """max(newest stored record, lost mark) per endpoint id."""
    found = {}
    for part in chunks(endpoint_ids, 500):
        rows = db.execute_sql(
            "SELECT e.id, e.lost_mark, (SELECT MAX(r.ts) FROM record r WHERE r.endpoint = e.id)"
            f" FROM endpoint e WHERE e.id IN ({placeholders(len(part))})",
            part,
        )
        for endpoint_id, mark, newest in rows:
            times = [t for t in (mark, newest) if t is not None]
            found[endpoint_id] = max(times) if times else None
    return found


def _entry(row) -> dict:
    alias = row[4]
    meta = dict(zip(CLIENT_META_FIELDS, row[5 : 5 + len(CLIENT_META_FIELDS)], strict=True))
    return {
        "lastActivityTime": row[-1],
        "alias": alias,
        "host": meta["host"],
        "mac": meta["mac"],
        "ip": meta["ip"],
        "vendor": meta["vendor"],
        "os": {"type": meta["os_type"], "arch": meta["os_arch"], "version": meta["os_version"]},
    }


def get_client(endpoint: str, client_id: str) -> dict | None:
    """One client entry (as in list_clients), or None when it does not exist."""
    item = list_clients(endpoint, [client_id]).get(endpoint)
    return item["clients"][client_id] if item else None


def set_alias(endpoint: str, client_id: str, alias: str) -> dict | None:
    """Set (or with "" clear) a client's alias; the updated entry, None if unknown."""
    with write_transaction():
        cursor = db.execute_sql(
            "UPDATE client SET alias = ? WHERE client_id = ?"
            " AND endpoint = (SELECT id FROM endpoint WHERE name = ?)",
            (alias, client_id, endpoint),
        )
        if cursor.rowcount == 0:
            return None
        return get_client(endpoint, client_id)


def raise_lost_marks(marks: dict[int, int]):
    """Record, per endpoint id, the newest timestamp of records it just lost."""
    for endpoint_id, newest in marks.items():
        db.execute_sql(
            "UPDATE endpoint SET lost_mark = ? WHERE id = ?"
            " AND (lost_mark IS NULL OR lost_mark < ?)",
            (newest, endpoint_id, newest),
        )


def purge_client_records(client_ids, end_ms: int) -> int:
    """Delete the records of these client entry ids up to `end_ms`, raising the endpoints'
    lost marks. Call inside a write transaction. Returns the number of records deleted."""
    deleted = 0
    marks: dict[int, int] = {}
    for part in chunks(client_ids, 500):
        ids = placeholders(len(part))
        for endpoint_id, newest in db.execute_sql(
            f"SELECT endpoint, MAX(ts) FROM record WHERE client IN ({ids}) AND ts <= ?"
            " GROUP BY endpoint",
            part + [end_ms],
        ):
            marks[endpoint_id] = max(newest, marks.get(endpoint_id, newest))
        deleted += db.execute_sql(
            f"DELETE FROM record WHERE client IN ({ids}) AND ts <= ?", part + [end_ms]
        ).rowcount
    raise_lost_marks(marks)
    return deleted


def delete_clients(endpoints=None, client_ids=None, end_ms: int = 0) -> list[tuple[str, str]]:
    """Purge the selected clients' records up to `end_ms` and delete the entries left without
    records, in one transaction. Returns the deleted (endpoint, client_id), sorted."""
    where, params = [], []
    if endpoints:
        where.append(f"e.name IN ({placeholders(len(endpoints))})")
        params += endpoints
    if client_ids:
        where.append(f"c.client_id IN ({placeholders(len(client_ids))})")
        params += client_ids
    with write_transaction():
        selected = db.execute_sql(
            "SELECT c.id, e.name, c.client_id FROM client c JOIN endpoint e ON e.id = c.endpoint"
            + (" WHERE " + " AND ".join(where) if where else ""),
            params,
        ).fetchall()
        purge_client_records([ident for ident, _, _ in selected], end_ms)
        # An entry with a record newer than end_ms shows the client came back: it stays.
        deleted = []
        for part in chunks(selected, 500):
            ids = [ident for ident, _, _ in part]
            kept = {
                ident
                for (ident,) in db.execute_sql(
                    f"SELECT id FROM client WHERE id IN ({placeholders(len(ids))})"
                    " AND EXISTS (SELECT 1 FROM record WHERE record.client = client.id)",
                    ids,
                )
            }
            gone = [row for row in part if row[0] not in kept]
            if gone:
                db.execute_sql(
                    f"DELETE FROM client WHERE id IN ({placeholders(len(gone))})",
                    [ident for ident, _, _ in gone],
                )
                deleted += [(name, client) for _, name, client in gone]
    return sorted(deleted)
