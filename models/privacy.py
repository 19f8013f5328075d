"""Privacy settings per endpoint, applied to every batch before anything of it is written.

Settings are stored per endpoint name (so an endpoint can have them before its first record),
the operator's default under DEFAULT; a field an endpoint does not set is the default's. What a
setting removes never reaches the store: not the records, the client entries, the interned
strings, the rollups or the realtime stream (which reads the records).
"""

import hashlib
import hmac
import ipaddress
import json
import secrets

from catalogue import FIELDS

from .database import query, write_transaction
from .domains import registrable_domain

DEFAULT = "_default"
CLIENT_IP = ("keep", "truncate", "hash", "drop")
KEEP_DROP = ("keep", "drop")
QUESTION = ("keep", "registrableDomain", "drop")
# Today's behaviour: everything kept. Prefixes: what truncation keeps of an address.
BUILT_IN = {
    "clientIp": "keep",
    "ipv4Prefix": 24,
    "ipv6Prefix": 48,
    "clientMetadata": "keep",
    "question": "keep",
    "answers": "keep",
}
# A hashed address: 64 bits of a keyed hash under 100::/64, the IPv6 discard-only prefix (RFC
# 6666): still an address (groupable, exported and imported as one), never a real one.
_HASHED = ipaddress.IPv6Address("100::")
# Where each value a setting touches sits in a new record's values (catalogue order).
_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_META_ADDRESS = "ip"


def settings() -> dict[str, dict]:
    """{endpoint name or DEFAULT: the fields it sets}."""
    return {name: json.loads(text) for name, text in query("SELECT endpoint, settings FROM privacy_setting")}


def effective(stored: dict[str, dict], endpoint: str) -> dict:
    """The settings in force for `endpoint`: its own fields, else the default's, else built-in."""
    return {**BUILT_IN, **stored.get(DEFAULT, {}), **(stored.get(endpoint, {}) if endpoint != DEFAULT else {})}


def change(endpoint: str, fields: dict) -> dict:
    """Set some fields of an endpoint's (or DEFAULT's) settings; the settings in force after.
    Call inside a write transaction. New settings apply to the records stored from then on."""
    stored = settings()
    own = {**stored.get(endpoint, {}), **fields}
    query(
        "INSERT INTO privacy_setting (endpoint, settings, hash_key) VALUES (?, ?, ?)"
        " ON CONFLICT (endpoint) DO UPDATE SET settings = excluded.settings",
        [endpoint, json.dumps(own, sort_keys=True), secrets.token_hex(32)],
    )
    stored[endpoint] = own
    return effective(stored, endpoint)


class Changed(Exception):
    """The settings changed between reading them for a batch and storing it."""


class Rules:
    """The settings a batch is stored under: read before the batch is prepared, and confirmed
    unchanged under the write lock (`confirm`), so that a change made meanwhile applies."""

    def __init__(self, endpoints):
        self.stored = settings()
        self.applied, self.keys = {}, {}
        if not self.stored:
            return
        applied = {name: effective(self.stored, name) for name in endpoints}
        self.applied = {name: rules for name, rules in applied.items() if rules != BUILT_IN}
        hashing = [name for name, rules in self.applied.items() if rules["clientIp"] == "hash"]
        if hashing:
            self.keys = _hash_keys(hashing)
            self.stored = settings()  # a key made for an endpoint added its (empty) row

    def confirm(self):
        """Raise Changed unless the settings are still those read; call under the write lock."""
        if settings() != self.stored:
            raise Changed()


def _hash_keys(endpoints: list[str]) -> dict[str, bytes]:
    """Each endpoint's own hash key (made on first use, kept in the store, never shown)."""
    marks = ", ".join("?" * len(endpoints))
    found = f"SELECT endpoint, hash_key FROM privacy_setting WHERE endpoint IN ({marks}) AND hash_key <> ''"
    if len(query(found, endpoints).fetchall()) < len(endpoints):
        with write_transaction():
            for name in endpoints:
                query(
                    "INSERT INTO privacy_setting (endpoint, settings, hash_key) VALUES (?, '{}', ?)"
                    " ON CONFLICT (endpoint) DO UPDATE SET hash_key = excluded.hash_key"
                    " WHERE privacy_setting.hash_key = ''",
                    [name, secrets.token_hex(32)],
                )
    marks = ", ".join("?" * len(endpoints))
    rows = query(f"SELECT endpoint, hash_key FROM privacy_setting WHERE endpoint IN ({marks})", endpoints)
    return {name: bytes.fromhex(key) for name, key in rows}


def apply(records: list[tuple], rules: Rules) -> list[tuple]:
    """The batch as its endpoints' settings let it be stored (see store_records for the shape)."""
    applied, keys = rules.applied, rules.keys
    if not applied:
        return records
    endpoint_at = _AT["endpoint"]
    out = []
    for values, meta in records:
        rules = applied.get(values[endpoint_at])
        out.append((values, meta) if rules is None else _applied(values, meta, rules, keys.get(values[endpoint_at])))
    return out


def _applied(values: tuple, meta: dict, rules: dict, key: bytes | None) -> tuple[tuple, dict]:
    values = list(values)
    meta = dict(meta) if meta else {}
    address = rules["clientIp"]
    if address != "keep":
        values[_AT["src_ip"]] = _address(values[_AT["src_ip"]], rules, key)
        if meta.get(_META_ADDRESS):
            meta[_META_ADDRESS] = _address(meta[_META_ADDRESS], rules, key) or ""
        client = values[_AT["client"]]
        if _is_address(client):  # a client known by its address is that address
            values[_AT["client"]] = _address(client, rules, key) or "anonymous"
    if rules["clientMetadata"] == "drop":
        meta = {_META_ADDRESS: meta[_META_ADDRESS]} if meta.get(_META_ADDRESS) else {}
    if rules["question"] != "keep":
        question = values[_AT["question"]]
        values[_AT["question"]] = registrable_domain(question) if rules["question"] == "registrableDomain" else ""
        # A blocking rule's text names what it matched.
        values[_AT["trigger_value"]] = None
    if rules["answers"] == "drop":
        for sql in ("answers", "spoof_target", "dst_country", "dst_isp", "dst_asn"):
            values[_AT[sql]] = None
    return tuple(values), meta


def _is_address(text) -> bool:
    try:
        ipaddress.ip_address(text)
    except (TypeError, ValueError):
        return False
    return True


def _address(text: str | None, rules: dict, key: bytes | None) -> str | None:
    """An address as the setting keeps it (None: dropped, or none to begin with)."""
    if not text:
        return None
    mode = rules["clientIp"]
    if mode == "drop":
        return None
    address = ipaddress.ip_address(text)
    if mode == "truncate":
        prefix = rules["ipv4Prefix"] if address.version == 4 else rules["ipv6Prefix"]
        return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False).network_address)
    digest = hmac.new(key, address.packed, hashlib.sha256).digest()[:8]
    return str(_HASHED + int.from_bytes(digest, "big"))
