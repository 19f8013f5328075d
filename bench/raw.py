"""The baseline: the same wire records put into the project's own schema with plain
sqlite3.executemany, one transaction per batch - the fastest honest way to store them."""

import json
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta

# Run in the project's own interpreter and directory: the schema, indexes, pragmas and the
# record columns that hold interned terms are the service's, not a copy that could drift.
_CREATE_SCHEMA = """
import json, sys
import models
from models.database import SQLITE_PRAGMAS
from models.ingestion import PLAIN_COLUMNS, TERM_COLUMNS
models.open_database(sys.argv[1])
with models.connection():
    models.create_schema()
print(json.dumps({"pragmas": SQLITE_PRAGMAS, "terms": TERM_COLUMNS, "plain": PLAIN_COLUMNS}))
"""
META = (("host", "host"), ("mac", "mac"), ("ip", "ip"), ("vendor", "vendor"))
OS_META = (("os_type", "type"), ("os_arch", "arch"), ("os_version", "version"))
INSERT_CLIENT = (
    "INSERT INTO client (id, endpoint, client_id, "
    + ", ".join(f"{name}, {name}_ts" for name, _ in META + OS_META)
    + ") VALUES ("
    + ", ".join(["?"] * (3 + 2 * len(META + OS_META)))
    + ")"
)
# Every record column the loader can fill, in the order of its values tuple.
COLUMN_VALUES = (
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
    "src_ip",
    "answers",
    "ts",
    "action",
    "src_asn",
    "dst_asn",
)
_compact_json = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def create_schema(path: str, code_dir: str) -> dict:
    """Create the service's schema in a new file; the service's connection pragmas ("pragmas")
    and record columns: those holding term ids ("terms") and those holding values ("plain")."""
    done = subprocess.run(
        [sys.executable, "-c", _CREATE_SCHEMA, path], cwd=code_dir, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


class RawLoader:
    """Ids of endpoints, clients and terms come from in-memory dicts; each batch is one
    BEGIN IMMEDIATE ... COMMIT with the same pragmas (WAL, synchronous) as the service."""

    def __init__(self, path: str, layout: dict):
        self.conn = sqlite3.connect(path, isolation_level=None)
        for name, value in layout["pragmas"].items():
            if name != "auto_vacuum":  # fixed when the schema was created
                self.conn.execute(f"PRAGMA {name} = {value}")
        unknown = set(layout["terms"] + layout["plain"]) - set(COLUMN_VALUES)
        if unknown:
            raise RuntimeError(f"the raw loader does not know the record columns {sorted(unknown)}")
        self.terms_at = [COLUMN_VALUES.index(name) for name in layout["terms"]]
        self.plain_at = [COLUMN_VALUES.index(name) for name in layout["plain"]]
        columns = ", ".join(layout["terms"] + layout["plain"])
        marks = ", ".join(["?"] * (2 + len(layout["terms"]) + len(layout["plain"])))
        self.insert = f"INSERT INTO record (endpoint, client, {columns}) VALUES ({marks})"
        self.terms: dict[str, int] = {}
        self.endpoints: dict[str, int] = {}
        self.clients: dict[tuple[int, str], int] = {}

    def store(self, records: list[dict]):
        new_terms, new_endpoints, new_clients = [], [], []
        terms, endpoints, clients = self.terms, self.endpoints, self.clients

        def term(value):
            if not value:
                return None
            ident = terms.get(value)
            if ident is None:
                ident = terms[value] = len(terms) + 1
                new_terms.append((ident, value))
            return ident

        rows = []
        for r in records:
            ts = (datetime.fromisoformat(r["timestamp"]) - _EPOCH) // _MS
            endpoint = endpoints.get(r["endpointId"])
            if endpoint is None:
                endpoint = endpoints[r["endpointId"]] = len(endpoints) + 1
                new_endpoints.append((endpoint, r["endpointId"]))
            client = clients.get((endpoint, r["clientId"]))
            if client is None:
                client = clients[(endpoint, r["clientId"])] = len(clients) + 1
                new_clients.append(_client_row(client, endpoint, r, ts))
            src = r.get("sourceGeoip") or {}
            answers = r.get("answers") or []
            dst = (answers[0].get("geoip") or {}) if answers else {}
            # The values in COLUMN_VALUES order; the schema decides which become term ids.
            values = (
                r.get("profileId"),
                r["question"].lower().rstrip("."),
                r.get("rrType"),
                r.get("statusCode"),
                r.get("protocol"),
                r.get("trigger"),
                r.get("triggerValue"),
                r.get("spoofTarget"),
                src.get("countryCode"),
                src.get("city"),
                src.get("isp"),
                dst.get("countryCode"),
                dst.get("isp"),
                r.get("sourceIp") or None,
                _compact_json(answers) if answers else None,
                ts,
                r.get("action"),
                src.get("asn"),
                dst.get("asn"),
            )
            rows.append(
                (endpoint, client)
                + tuple(term(values[i]) for i in self.terms_at)
                + tuple(values[i] for i in self.plain_at)
            )
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT INTO endpoint (id, name) VALUES (?, ?)", new_endpoints)
            conn.executemany(INSERT_CLIENT, new_clients)
            conn.executemany("INSERT INTO term (id, value) VALUES (?, ?)", new_terms)
            conn.executemany(self.insert, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self):
        self.conn.close()


def _client_row(ident: int, endpoint: int, record: dict, ts: int) -> tuple:
    meta = record.get("client") or {}
    system = meta.get("os") or {}
    row = [ident, endpoint, record["clientId"]]
    for _, key in META:
        row += (meta.get(key) or "", ts if meta.get(key) else None)
    for _, key in OS_META:
        row += (system.get(key) or "", ts if system.get(key) else None)
    return tuple(row)
