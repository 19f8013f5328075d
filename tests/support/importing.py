"""What the importer tests share: the sources they read, built here as Pi-hole and AdGuard Home
write them (FTL's database, its rows; querylog.json lines and their DNS answers), and what they
read back (the activity log over HTTP, and row counts of the store for what HTTP does not show:
the import positions, duplicates)."""

import base64
import ipaddress
import json
import sqlite3
import struct

import models.stores.bound

from support import stores
from support.helpers import AUTH

WHOLE_WINDOW = "startTime=2000-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z"


def logged(client) -> list[dict]:
    """Every record in the activity log, oldest first."""
    records, page = [], 0
    while True:
        response = client.get(f"/v2/activity-log?{WHOLE_WINDOW}&sortOrder=asc&pageSize=500&page={page}", headers=AUTH)
        assert response.status_code == 200, response.json
        records += response.json["queries"]
        if len(response.json["queries"]) < 500:
            return records
        page += 1


def questions(client) -> list[str]:
    return [r["question"] for r in logged(client)]


def count_rows(database, table: str) -> int:
    return stores.scalar(database, f"SELECT COUNT(*) FROM {table}")


# The long-term database of FTL v6 (src/database/query-table.h, network-table.c): the tables
# the importer reads, as FTL creates them, plus the `queries` view over the linking tables.
FTL_SCHEMA = """
CREATE TABLE ftl (id INTEGER PRIMARY KEY NOT NULL, value BLOB NOT NULL, description TEXT);
CREATE TABLE counters (id INTEGER PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
CREATE TABLE query_storage (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER NOT NULL,
    type INTEGER NOT NULL, status INTEGER NOT NULL, domain INTEGER NOT NULL,
    client INTEGER NOT NULL, forward INTEGER, additional_info INTEGER, reply_type INTEGER,
    reply_time REAL, dnssec INTEGER, list_id INTEGER, ede INTEGER);
CREATE INDEX idx_query_storage_timestamp ON query_storage (timestamp);
CREATE TABLE domain_by_id (id INTEGER PRIMARY KEY, domain TEXT NOT NULL);
CREATE TABLE client_by_id (id INTEGER PRIMARY KEY, ip TEXT NOT NULL, name TEXT);
CREATE TABLE forward_by_id (id INTEGER PRIMARY KEY, forward TEXT NOT NULL);
CREATE TABLE addinfo_by_id (id INTEGER PRIMARY KEY, type INTEGER NOT NULL, content NOT NULL);
CREATE UNIQUE INDEX domain_by_id_domain_idx ON domain_by_id(domain);
CREATE UNIQUE INDEX client_by_id_client_idx ON client_by_id(ip, name);
CREATE UNIQUE INDEX forward_by_id_forward_idx ON forward_by_id(forward);
CREATE UNIQUE INDEX addinfo_by_id_idx ON addinfo_by_id(type, content);
CREATE VIEW queries AS SELECT q.id, q.timestamp, q.type, q.status,
    COALESCE(d.domain, q.domain) AS domain, COALESCE(c.ip, q.client) AS client,
    COALESCE(f.forward, q.forward) AS forward,
    COALESCE(a.content, q.additional_info) AS additional_info,
    q.reply_type, q.reply_time, q.dnssec, q.list_id, q.ede
    FROM query_storage q
    LEFT JOIN domain_by_id d ON q.domain = d.id LEFT JOIN client_by_id c ON q.client = c.id
    LEFT JOIN forward_by_id f ON q.forward = f.id
    LEFT JOIN addinfo_by_id a ON q.additional_info = a.id;
CREATE TABLE network (id INTEGER PRIMARY KEY NOT NULL, hwaddr TEXT UNIQUE NOT NULL,
    interface TEXT NOT NULL, firstSeen INTEGER NOT NULL, lastQuery INTEGER NOT NULL,
    numQueries INTEGER NOT NULL, macVendor TEXT, aliasclient_id INTEGER);
CREATE TABLE network_addresses (network_id INTEGER NOT NULL, ip TEXT UNIQUE NOT NULL,
    lastSeen INTEGER NOT NULL DEFAULT (cast(strftime('%s', 'now') as int)), name TEXT,
    nameUpdated INTEGER, FOREIGN KEY(network_id) REFERENCES network(id));
CREATE TABLE aliasclient (id INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, comment TEXT);
"""

T0 = 1714564800  # 2024-05-01T12:00:00Z

# FTL's numbers: query types 1 A, 2 AAAA, 16 HTTPS, 105 = 100 + CNAME; reply types 2
# NXDOMAIN, 4 IP, 7 SERVFAIL.
A, AAAA, HTTPS, CNAME_OTHER = 1, 2, 16, 105
NXDOMAIN, IP, SERVFAIL = 2, 4, 7


def make_ftl_db(path, created=T0 - 86400):
    with sqlite3.connect(path) as conn:
        conn.executescript(FTL_SCHEMA)
        conn.executemany(
            "INSERT INTO ftl (id, value, description) VALUES (?, ?, ?)",
            [
                (0, 22, "Database version"),
                (1, T0, "Unix timestamp of the latest stored query"),
                (2, created, "Unix timestamp of the database creation"),
            ],
        )
        conn.executemany(
            "INSERT INTO network (id, hwaddr, interface, firstSeen, lastQuery, numQueries, macVendor)"
            " VALUES (?, ?, 'eth0', ?, ?, 10, ?)",
            [
                (1, "dc:a6:32:00:00:01", T0 - 900, T0, "Raspberry Pi Trading Ltd"),
                # FTL's stand-in for a client whose MAC it never saw.
                (2, "ip-192.168.1.20", T0 - 900, T0, None),
            ],
        )
        conn.executemany(
            "INSERT INTO network_addresses (network_id, ip, lastSeen, name, nameUpdated) VALUES (?, ?, ?, ?, ?)",
            [(1, "192.168.1.10", T0, "pi.lan", T0), (2, "192.168.1.20", T0, "phone.lan", T0)],
        )
    return path


def add_row(path, ident, ts, domain, status=2, *, list_id=None, forward=None, reply_time=None, dnssec=None):
    """One query as FTL v6 writes it, with FTL's own id (FTL numbers them itself, from 0)."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT OR IGNORE INTO domain_by_id (domain) VALUES (?)", [domain])
        domain_id = conn.execute("SELECT id FROM domain_by_id WHERE domain = ?", [domain]).fetchone()[0]
        conn.execute("INSERT OR IGNORE INTO client_by_id (ip, name) VALUES ('192.168.1.10', NULL)")
        client_id = conn.execute("SELECT id FROM client_by_id WHERE ip = '192.168.1.10'").fetchone()[0]
        forward_id = None
        if forward is not None:
            conn.execute("INSERT OR IGNORE INTO forward_by_id (forward) VALUES (?)", [forward])
            forward_id = conn.execute("SELECT id FROM forward_by_id WHERE forward = ?", [forward]).fetchone()[0]
        conn.execute(
            "INSERT INTO query_storage (id, timestamp, type, status, domain, client, forward, reply_type,"
            " reply_time, dnssec, list_id) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)",
            [ident, ts, status, domain_id, client_id, forward_id, IP, reply_time, dnssec, list_id],
        )


RCODE = {"NOERROR": 0, "SERVFAIL": 2, "NXDOMAIN": 3}
TYPE = {"A": 1, "AAAA": 28}


def dns_response(qname: str, qtype="A", rcode="NOERROR", ips=()) -> str:
    """A base64 DNS response, packed as AdGuard packs it: the answers' names are compression
    pointers to the question's name at offset 12."""
    flags = 0x8180 | RCODE[rcode]  # QR, RD, RA
    message = struct.pack(">HHHHHH", 0x1234, flags, 1, len(ips), 0, 0)
    for label in qname.split("."):
        message += bytes([len(label)]) + label.encode()
    message += b"\x00" + struct.pack(">HH", TYPE[qtype], 1)
    for ip in ips:
        data = bytes(int(part) for part in ip.split(".")) if "." in ip else _ipv6(ip)
        rr_type = TYPE["A"] if len(data) == 4 else TYPE["AAAA"]
        message += struct.pack(">HHHIH", 0xC00C, rr_type, 1, 300, len(data)) + data
    return base64.b64encode(message).decode()


def _ipv6(ip: str) -> bytes:
    return ipaddress.IPv6Address(ip).packed


def entry(host, seconds=0, ip="192.168.1.10", *, qtype="A", cp="", result=None, **extra) -> dict:
    """One line of querylog.json, with the keys AdGuard Home writes."""
    line = {
        "T": f"2024-05-01T12:00:{seconds:02d}.123456789+00:00",
        "QH": host,
        "QT": qtype,
        "QC": "IN",
        "CP": cp,
        "IP": ip,
        "Result": result or {},
        "Elapsed": 1_234_567,
        "Upstream": "https://dns10.quad9.net:443/dns-query",
    }
    line.update(extra)
    return line


def write_log(path, *entries, mode="w"):
    with open(path, mode) as log:
        for item in entries:
            log.write((item if isinstance(item, str) else json.dumps(item)) + "\n")
    return str(path)


def crash_in_third_batch(monkeypatch):
    """Make the third batch an import stores die inside its transaction, after its position was
    saved (a power cut at the worst moment): it must roll back whole."""
    in_use = models.stores.bound.records()
    real_store = in_use.store_records
    calls = []

    def store(records, in_transaction=None):
        calls.append(len(records))
        if len(calls) < 3:
            return real_store(records, in_transaction)

        def save_then_crash():
            in_transaction()
            raise RuntimeError("power cut")

        return real_store(records, save_then_crash)

    monkeypatch.setattr(in_use, "store_records", store)
