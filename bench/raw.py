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
from catalogue import FIELDS
try:
    from models.engine import database
    from models.migrations.run import create_schema
except ImportError:  # a version from before the store's rooms (bench/ab.py runs older ones)
    from models import database
    from models.tables import create_schema
try:
    from models.engine.sqlite import SQLITE_PRAGMAS
except ImportError:  # a version from before the engine seam
    SQLITE_PRAGMAS = database.SQLITE_PRAGMAS
database.open_database(sys.argv[1])
with database.connection():
    create_schema()
fields = [{"name": f.name, "sql": f.sql, "storage": f.storage, "path": f.path} for f in FIELDS]
print(json.dumps({"pragmas": SQLITE_PRAGMAS, "fields": fields}))
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
# Where the catalogue's fields that are no QueryData field of their own come from: the first
# answer's geoip. A field that is in neither place stops the run (see RawLoader).
FROM_FIRST_ANSWER = {"dstCountry": "countryCode", "dstIsp": "isp", "dstAsn": "asn"}
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
        fields = [f for f in layout["fields"] if f["storage"] not in ("time", "endpoint", "client")]
        unknown = [f["name"] for f in fields if not f["path"] and f["name"] not in FROM_FIRST_ANSWER]
        if unknown:
            raise RuntimeError(f"the raw loader does not know where the fields {unknown} come from")
        terms = [f for f in fields if f["storage"] == "term"]
        plain = [f for f in fields if f["storage"] != "term"]
        # The fields' values as two tuples, by one function made from the layout: a loop over
        # the fields per record would cost the baseline more than the conversion itself.
        self.values = eval(  # noqa: S307
            f"lambda r: (({''.join(_getter(f) + ', ' for f in terms)}), ({''.join(_getter(f) + ', ' for f in plain)}))",
            {"NONE": {}, "FIRST": [{}], "compact_json": _compact_json},
        )
        columns = ", ".join(["ts", *(f["sql"] for f in terms + plain)])
        marks = ", ".join(["?"] * (3 + len(fields)))
        self.insert = f"INSERT INTO record (endpoint, client, {columns}) VALUES ({marks})"
        # The strings a new database interns first (models/records/terms.COMMON), with their ids.
        stored = self.conn.execute("SELECT id, value FROM term")
        self.term_ids: dict[str, int] = {value: ident for ident, value in stored}
        self.next_term = max(self.term_ids.values(), default=0) + 1
        self.endpoints: dict[str, int] = {}
        self.clients: dict[tuple[int, str], int] = {}

    def store(self, records: list[dict]):
        new_terms, new_endpoints, new_clients = [], [], []
        terms, endpoints, clients = self.term_ids, self.endpoints, self.clients

        def term(value):
            if not value:
                return None
            ident = terms.get(value)
            if ident is None:
                ident = terms[value] = self.next_term
                self.next_term += 1
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
            term_values, plain_values = self.values(r)
            rows.append((endpoint, client, ts, *map(term, term_values), *plain_values))
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


def _getter(field: dict) -> str:
    """A Python expression for a field's value in a wire record `r`, as the service stores it."""
    if field["name"] in FROM_FIRST_ANSWER:
        return f'((r.get("answers") or FIRST)[0].get("geoip") or NONE).get("{FROM_FIRST_ANSWER[field["name"]]}")'
    if field["name"] == "question":
        return 'r["question"].lower().rstrip(".")'
    if field["name"] == "answers":
        return '(compact_json(r["answers"]) if r.get("answers") else None)'
    *outer, last = field["path"]
    expression = "r"
    for key in outer:
        expression = f'({expression}.get("{key}") or NONE)'
    return f'{expression}.get("{last}")'


def _client_row(ident: int, endpoint: int, record: dict, ts: int) -> tuple:
    meta = record.get("client") or {}
    system = meta.get("os") or {}
    row = [ident, endpoint, record["clientId"]]
    for _, key in META:
        row += (meta.get(key) or "", ts if meta.get(key) else None)
    for _, key in OS_META:
        row += (system.get(key) or "", ts if system.get(key) else None)
    return tuple(row)
