"""Pi-hole: the queries in FTL's long-term database (pihole-FTL.db), read-only, in id order.

Rows come from `query_storage` with its linking tables (the same joins as FTL's `queries`
view, plus the client's name from `client_by_id`, which the view leaves out); databases
older than `query_storage` have a plain `queries` table, read as it is. Client metadata
(MAC, vendor, host name) comes from the `network` and `network_addresses` tables.
"""

import contextlib
import math
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator

import click

from .common import Batch, SkipRow, SourceError, compact, ip_or_none, text_or_none
from .dns_message import rr_type_name
from .source import Reading

# FTL's query types (docs.pi-hole.net, "Supported query types"). 14 is OTHER: the type is
# unknown, so it stays empty. Types FTL has no number for are stored as 100 + the real type.
QUERY_TYPES = {
    1: "A",
    2: "AAAA",
    3: "ANY",
    4: "SRV",
    5: "SOA",
    6: "PTR",
    7: "TXT",
    8: "NAPTR",
    9: "MX",
    10: "DS",
    11: "RRSIG",
    12: "DNSKEY",
    13: "NS",
    15: "SVCB",
    16: "HTTPS",
}
OTHER_TYPE_OFFSET = 100

# FTL's query status -> (action, trigger, triggerValue when no list id is known, prefix of
# the triggerValue "<prefix>:<list_id>" when it is). Allowed statuses whose row carries a
# list id were let through by an allow entry: see _decision.
STATUSES = {
    0: (None, None, None, None),  # UNKNOWN
    1: (0, "filter", "gravity", "adlist"),  # GRAVITY
    2: (1, "default", None, None),  # FORWARDED
    3: (1, "default", None, None),  # CACHE
    4: (0, "custom", "regex", "regex"),  # REGEX (deny)
    5: (0, "custom", "denylist", "denylist"),  # DENYLIST (exact)
    6: (0, "filter", "upstream", None),  # EXTERNAL_BLOCKED_IP
    7: (0, "filter", "upstream", None),  # EXTERNAL_BLOCKED_NULL
    8: (0, "filter", "upstream", None),  # EXTERNAL_BLOCKED_NXRA
    9: (0, "filter", "gravity", "adlist"),  # GRAVITY_CNAME
    10: (0, "custom", "regex", "regex"),  # REGEX_CNAME
    11: (0, "custom", "denylist", "denylist"),  # DENYLIST_CNAME
    12: (1, "default", None, None),  # RETRIED
    13: (1, "default", None, None),  # RETRIED_DNSSEC
    14: (1, "default", None, None),  # IN_PROGRESS: already forwarded, answered with the first
    15: (0, "default", "database-busy", None),  # DBBUSY
    16: (0, "default", "special-domain", None),  # SPECIAL_DOMAIN
    17: (1, "default", None, None),  # CACHE_STALE
    18: (0, "filter", "upstream", None),  # EXTERNAL_BLOCKED_EDE15
}

# FTL's reply type -> the rcode the client got. NODATA, CNAME, IP, DOMAIN, RRNAME, DNSSEC and
# BLOB are all answers without error; UNKNOWN (no reply yet), OTHER and NONE (dropped) say
# nothing about an rcode.
REPLY_STATUS = {
    1: "NOERROR",  # NODATA
    2: "NXDOMAIN",
    3: "NOERROR",  # CNAME
    4: "NOERROR",  # IP
    5: "NOERROR",  # DOMAIN
    6: "NOERROR",  # RRNAME
    7: "SERVFAIL",
    8: "REFUSED",
    9: "NOTIMP",
    11: "NOERROR",  # DNSSEC
    13: "NOERROR",  # BLOB
}
FAILED_STATUS = {"SERVFAIL", "REFUSED"}
# Statuses that say whether the answer came from FTL's cache (others say nothing of it).
CACHED = {2: False, 3: True, 12: False, 13: False, 14: False, 17: True}
# FTL's DNSSEC status (enum dnssec_status); 0 is unknown.
DNSSEC = {1: "secure", 2: "insecure", 3: "bogus", 4: "abandoned", 5: "truncated"}

# FTL's `ftl` table: property 2 is the Unix time the database was created.
FTL_CREATED = 2
# FTL's stand-in hardware address of a client whose MAC it does not know.
MOCK_HWADDR_PREFIX = "ip-"


def open_database(path: str) -> sqlite3.Connection:
    """A read-only connection; SourceError if it is no Pi-hole FTL database."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot open it: {exc}") from None
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    except sqlite3.OperationalError as exc:  # e.g. no permission, or FTL holding a lock
        conn.close()
        raise SourceError(f"cannot read it: {exc}") from None
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise SourceError(f"not a Pi-hole FTL database: {exc}") from None
    if not {"query_storage", "queries"} & tables:
        conn.close()
        raise SourceError("not a Pi-hole FTL database: it has no query_storage or queries table")
    return conn


def identity(conn: sqlite3.Connection, path: str) -> str:
    """What tells this database from another one, even after it is moved or copied: its
    creation time from the `ftl` table, else its path."""
    with contextlib.suppress(sqlite3.Error):
        row = conn.execute("SELECT value FROM ftl WHERE id = ?", [FTL_CREATED]).fetchone()
        if row is not None and row[0] is not None:
            return f"created-{row[0]}"
    return f"path-{os.path.abspath(path)}"


def last_query_id(conn: sqlite3.Connection) -> int:
    """The newest query's id; -1 when there is none (FTL numbers the first query 0)."""
    newest = _fetch(conn, f"SELECT MAX(id) FROM {_query_table(conn)}")[0][0]
    return -1 if newest is None else newest


def resume_point(conn: sqlite3.Connection, position: dict) -> tuple[int, float | None, int]:
    """(the id to go on after, the timestamp the rows must be newer than or None, the queries
    FTL deleted before they were imported).

    FTL numbers its queries from 0 again once its table is empty (flushed, or every row aged
    out). The saved position holds the id and the time of the last query imported: when the
    table no longer reaches that id, or the row with that id is another query, the numbering
    started over, and the rows to import are all those newer than the last one imported.
    When the row imported last is gone but the numbering goes on, FTL aged out the oldest
    rows past it (MAXDBDAYS) while the feed was behind: the ids between it and the oldest row
    left were lost (FTL's ids have no other gaps)."""
    if not position:
        return -1, None, 0
    after, stamp = position["id"], position.get("ts")
    table = _query_table(conn)
    row = _fetch(conn, f"SELECT timestamp FROM {table} WHERE id = ?", [after])
    if last_query_id(conn) < after or (row and stamp is not None and row[0][0] != stamp):
        return -1, stamp, 0
    aged_out = 0
    if not row:
        oldest = _fetch(conn, f"SELECT MIN(id) FROM {table} WHERE id > ?", [after])[0][0]
        aged_out = max(oldest - after - 1, 0) if oldest is not None else 0
    return after, None, aged_out


class PiholeSource:
    """FTL's database at `path` (a feeds.source.Source): one reading, its queries after the
    last one committed, in batches of `size`, as records of `endpoint`."""

    def __init__(self, path: str, endpoint: str, size: int):
        self.name, self.endpoint, self.size = path, endpoint, size

    def keys(self) -> list[str]:
        with contextlib.closing(open_database(self.name)) as conn:
            return [_key(conn, self.name, self.endpoint)]

    def readings(self, position, announce: bool) -> Iterator[Reading]:
        with contextlib.closing(open_database(self.name)) as conn:
            key = _key(conn, self.name, self.endpoint)
            after, newer_than, aged_out = resume_point(conn, position(key))
            last = last_query_id(conn)
            if newer_than is not None:
                click.echo("FTL numbered its queries anew (its table was emptied): importing the newer ones.", err=True)
            elif after >= 0 and announce:
                click.echo(f"Resuming after query id {after}.", err=True)
            yield Reading(
                key,
                batches(conn, after, last, self.size, self.endpoint, read_network(conn), newer_than),
                start=max(after, 0),
                end=last,
                label=f"Importing {os.path.basename(self.name)}",
                bar=announce,
                aged_out=aged_out,
            )


def _key(conn, path: str, endpoint: str) -> str:
    return f"pihole:{endpoint}:{identity(conn, path)}"


def read_network(conn: sqlite3.Connection) -> dict[str, dict]:
    """Client metadata by IP address: {"mac", "vendor", "host"} (the fields FTL knows)."""
    tables = _tables(conn)
    if "network" not in tables:
        return {}
    device = _columns(conn, "network")
    vendor = "n.macVendor" if "macVendor" in device else "NULL"
    if "network_addresses" in tables:
        address = _columns(conn, "network_addresses")
        name = "a.name" if "name" in address else "n.name" if "name" in device else "NULL"
        order = "a.lastSeen" if "lastSeen" in address else "a.rowid"
        sql = (
            f"SELECT a.ip, n.hwaddr, {vendor}, {name} FROM network_addresses a"
            f" JOIN network n ON n.id = a.network_id ORDER BY {order}"
        )
    elif "ip" in device:  # before FTL moved addresses to their own table
        name = "n.name" if "name" in device else "NULL"
        sql = f"SELECT n.ip, n.hwaddr, {vendor}, {name} FROM network n ORDER BY n.lastQuery"
    else:
        return {}
    found = {}
    # Ordered oldest first, so the device that used an address last wins it.
    for ip, hwaddr, vendor_name, host in _fetch(conn, sql):
        if not isinstance(ip, str):
            continue
        mac = hwaddr if isinstance(hwaddr, str) and not hwaddr.startswith(MOCK_HWADDR_PREFIX) else None
        found[ip] = {
            "mac": mac or None,
            "vendor": vendor_name if isinstance(vendor_name, str) else None,
            "host": host if isinstance(host, str) else None,
        }
    return found


def batches(
    conn: sqlite3.Connection,
    after_id: int,
    up_to_id: int,
    size: int,
    endpoint: str,
    network: dict,
    newer_than: float | None = None,
) -> Iterator[Batch]:
    """Batches of wire records for the queries with after_id < id <= up_to_id (and, when
    given, a timestamp above `newer_than`: see resume_point).

    Each batch is its own short SELECT (keyset on the id), so FTL is never locked out of its
    database for longer than one batch takes to read, and memory holds one batch at most.
    """
    sql = _select(conn)
    while after_id < up_to_id:
        rows = _fetch(conn, sql, [after_id, up_to_id, newer_than, newer_than, size])
        if not rows:
            return
        records, unreadable = [], 0
        for row in rows:
            try:
                records.append(to_record(row, endpoint, network))
            except SkipRow:
                unreadable += 1
        after_id = rows[-1][0]
        yield Batch(records, unreadable, {"id": after_id, "ts": rows[-1][1]}, after_id)


def to_record(row, endpoint: str, network: dict) -> dict:
    """The wire record of one row of _select's columns."""
    (_, timestamp, query_type, status, domain, client_ip, client_name, reply_type, list_id, upstream, reply_time,
     dnssec) = row  # fmt: skip
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise SkipRow("no timestamp")
    if not math.isfinite(timestamp):
        raise SkipRow("timestamp is not a number")
    ip = ip_or_none(client_ip)
    known = (network.get(client_ip) or network.get(ip) or {}) if ip else {}
    status_code = REPLY_STATUS.get(reply_type)
    action, trigger, trigger_value = _decision(status, list_id, status_code)
    return compact(
        {
            # FTL stores seconds, as a REAL with sub-second precision in recent versions.
            "timestamp": round(timestamp * 1000),
            "endpointId": endpoint,
            "clientId": client_ip or text_or_none(client_name),
            "question": domain,
            "rrType": _query_type(query_type),
            "statusCode": status_code,
            "protocol": "legacy",  # FTL answers plain DNS only (UDP/TCP port 53)
            "action": action,
            "trigger": trigger,
            "triggerValue": trigger_value,
            "sourceIp": ip,
            "upstream": text_or_none(upstream),
            # FTL keeps the reply time in seconds.
            "responseTimeMs": _milliseconds(reply_time),
            "cached": CACHED.get(status),
            "dnssec": DNSSEC.get(dnssec),
            "client": compact(
                {
                    "ip": ip,
                    "host": text_or_none(client_name) or known.get("host"),
                    "mac": known.get("mac"),
                    "vendor": known.get("vendor"),
                }
            ),
        }
    )


def _decision(status, list_id, status_code) -> tuple[int | None, str | None, str | None]:
    """action, trigger and triggerValue of a status (see STATUSES)."""
    action, trigger, value, prefix = STATUSES.get(status, (None, None, None, None))
    if not isinstance(list_id, int) or isinstance(list_id, bool):
        list_id = None
    # Since FTL v6 a match in an adlist (gravity, or antigravity for allow-adlists) is stored
    # as -(adlist id + 2); a domainlist entry (exact or regex) by its own id, from 0 up.
    adlist = -list_id - 2 if list_id is not None and list_id <= -2 else None
    domainlist = list_id if list_id is not None and list_id >= 0 else None
    if action == 1:
        if status_code in FAILED_STATUS:
            return -1, trigger, None
        if adlist is not None:  # let through by an allow-adlist
            return 1, "filter", f"antigravity:{adlist}"
        if domainlist is not None:  # let through by an allow entry (exact or regex)
            return 1, "custom", f"allowlist:{domainlist}"
        return action, trigger, None
    if adlist is not None and prefix == "adlist":
        value = f"adlist:{adlist}"
    elif prefix and domainlist is not None:
        value = f"{prefix}:{domainlist}"
    return action, trigger, value


def _milliseconds(seconds) -> float | None:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        return None
    return seconds * 1000 if 0 <= seconds <= 86_400 else None


def _query_type(number) -> str | None:
    if not isinstance(number, int):
        return None
    if number > OTHER_TYPE_OFFSET:
        return rr_type_name(number - OTHER_TYPE_OFFSET)
    return QUERY_TYPES.get(number)


def _select(conn: sqlite3.Connection) -> str:
    """The SELECT of one batch, for the tables and columns this database version has."""
    tables = _tables(conn)
    table = _query_table(conn)
    columns = _columns(conn, table)
    reply_type = "q.reply_type" if "reply_type" in columns else "NULL"
    # list_id was called regex_id before FTL v5.14.
    list_id = "q.list_id" if "list_id" in columns else "q.regex_id" if "regex_id" in columns else "NULL"
    reply_time = "q.reply_time" if "reply_time" in columns else "NULL"
    dnssec = "q.dnssec" if "dnssec" in columns else "NULL"
    upstream = "q.forward" if "forward" in columns else "NULL"
    domain, client_ip, client_name, joins = "q.domain", "q.client", "NULL", ""
    # As in FTL's own view: an integer points into the linking table, text is the value itself.
    if table == "query_storage" and "domain_by_id" in tables:
        domain = "CASE typeof(q.domain) WHEN 'integer' THEN d.domain ELSE q.domain END"
        joins += " LEFT JOIN domain_by_id d ON d.id = q.domain"
    if table == "query_storage" and "client_by_id" in tables:
        client_ip = "CASE typeof(q.client) WHEN 'integer' THEN c.ip ELSE q.client END"
        client_name = "CASE typeof(q.client) WHEN 'integer' THEN c.name END"
        joins += " LEFT JOIN client_by_id c ON c.id = q.client"
    if table == "query_storage" and "forward_by_id" in tables and upstream != "NULL":
        upstream = "CASE typeof(q.forward) WHEN 'integer' THEN f.forward ELSE q.forward END"
        joins += " LEFT JOIN forward_by_id f ON f.id = q.forward"
    return (
        f"SELECT q.id, q.timestamp, q.type, q.status, {domain}, {client_ip}, {client_name},"
        f" {reply_type}, {list_id}, {upstream}, {reply_time}, {dnssec} FROM {table} q{joins}"
        " WHERE q.id > ? AND q.id <= ? AND (? IS NULL OR q.timestamp > ?) ORDER BY q.id LIMIT ?"
    )


def _fetch(conn: sqlite3.Connection, sql: str, params=()) -> list:
    """All rows of `sql`. A failure is the source's (FTL holding a lock past the timeout, a
    damaged file): it ends the import with a message, and what was stored stays stored."""
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as exc:
        raise SourceError(f"reading the database failed: {exc}") from None


def _query_table(conn: sqlite3.Connection) -> str:
    return "query_storage" if "query_storage" in _tables(conn) else "queries"


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = _fetch(conn, "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    return {name for (name,) in rows}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in _fetch(conn, f"PRAGMA table_info({table})")}
