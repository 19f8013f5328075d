"""Privacy settings per endpoint, and clients marked not logged, applied to every batch
before anything of it is written.

Settings are stored per endpoint name (so an endpoint can have them before its first record),
the operator's default under DEFAULT; a field an endpoint does not set is the default's. What a
setting removes never reaches the store: not the records, the client entries, the interned
strings, the rollups or the realtime stream (which reads the records). A client marked not
logged (its entry's `unlogged`, see models/clients.py) has no record stored, and its queries
are counted in the anonymous statistics (models/anonymous.py) or, as its endpoint's
`unlogged_clients` says, not at all.
"""

import hashlib
import hmac
import ipaddress
import json
import secrets

from catalogue import FIELDS

from . import anonymous
from .database import query, write_transaction
from .domains import registrable_domain

DEFAULT = "_default"
KEEP, DROP, TRUNCATE, HASH, DOMAIN = "keep", "drop", "truncate", "hash", "domain"
COUNTED, NOT_COUNTED = "counted", "not_counted"
CLIENT_IP = (KEEP, TRUNCATE, HASH, DROP)
KEEP_DROP = (KEEP, DROP)
QUESTION = (KEEP, DOMAIN, DROP)
UNLOGGED = (COUNTED, NOT_COUNTED)
# Today's behaviour: everything kept. Prefixes: what truncation keeps of an address.
BUILT_IN = {
    "client_ip": KEEP,
    "ipv4_prefix": 24,
    "ipv6_prefix": 48,
    "client_metadata": KEEP,
    "question": KEEP,
    "answers": KEEP,
    "unlogged_clients": COUNTED,
}
# A hashed address: 64 bits of a keyed hash under 100::/64, the IPv6 discard-only prefix (RFC
# 6666): still an address (groupable, exported and imported as one), never a real one.
_HASHED = ipaddress.IPv6Address("100::")
# Where each value a setting touches sits in a new record's values (catalogue order).
_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_ENDPOINT, _CLIENT, _SRC_IP, _QUESTION = _AT["endpoint"], _AT["client"], _AT["src_ip"], _AT["question"]
# What the answers say: the answer set and the first answer's geography, and a spoofed target.
_ANSWER_AT = [_AT[sql] for sql in ("answers", "spoof_target", "dst_country", "dst_isp", "dst_asn")]
# Finer than the address's network: gone with an address that is hashed or dropped.
_SOURCE_CITY = _AT["src_city"]
_META_ADDRESS = "ip"
# A client known only by an address that is dropped.
ANONYMOUS = "anonymous"


def settings() -> dict[str, dict]:
    """{endpoint name or DEFAULT: the fields it sets}."""
    return {name: json.loads(text) for name, text in query("SELECT endpoint, settings FROM privacy_setting")}


def effective(stored: dict[str, dict], endpoint: str) -> dict:
    """The settings in force for `endpoint`: its own fields, else the default's, else built-in."""
    return {**BUILT_IN, **stored.get(DEFAULT, {}), **(stored.get(endpoint, {}) if endpoint != DEFAULT else {})}


def in_force(endpoint_limit=None) -> dict[str, dict]:
    """{DEFAULT and every endpoint with settings of its own: the settings in force}, the
    default first then by name; with an endpoint limit, every endpoint in it instead (the
    default is not the limited key's to see or change)."""
    stored = settings()
    if endpoint_limit is None:
        names = [DEFAULT, *sorted(name for name in stored if name != DEFAULT)]
    else:
        names = sorted(endpoint_limit)
    return {name: effective(stored, name) for name in names}


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
        self.stored, self.unlogged = settings(), unlogged_clients()
        self.applied, self.keys = {}, {}
        if not self.stored:
            return
        applied = {name: effective(self.stored, name) for name in endpoints}
        self.applied = {name: rules for name, rules in applied.items() if rules != BUILT_IN}
        hashing = [name for name, rules in self.applied.items() if rules["client_ip"] == HASH]
        if hashing:
            self.keys = _hash_keys(hashing)
            self.stored = settings()  # a key made for an endpoint added its (empty) row

    def confirm(self):
        """Raise Changed unless the settings are still those read; call under the write lock."""
        if settings() != self.stored or unlogged_clients() != self.unlogged:
            raise Changed()

    def first(self, then=None):
        """A `first` for store_records: confirm, then call `then` (if any)."""
        return _both(self.confirm, then)

    def split(self, records: list[tuple]) -> tuple[list, list]:
        """(the records to store, those of clients not logged to count anonymously); the
        records of clients not logged whose endpoint does not count them are in neither."""
        if not self.unlogged:
            return records, []
        kept, counted = [], []
        for record in records:
            values = record[0]
            if (values[_ENDPOINT], values[_CLIENT]) not in self.unlogged:
                kept.append(record)
            elif effective(self.stored, values[_ENDPOINT])["unlogged_clients"] == COUNTED:
                counted.append(record)
        return kept, counted


def unlogged_clients() -> set[tuple[str, str]]:
    """Every (endpoint name, client id) marked not logged (a partial index holds them)."""
    return set(query("SELECT e.name, c.client_id FROM client c JOIN endpoint e ON e.id = c.endpoint WHERE c.unlogged"))


def storing(store, records: list[tuple], in_transaction, first) -> int:
    """store(records as their endpoints' settings let them be stored, in_transaction, first),
    with the settings confirmed under the write lock: stored again under new settings when they
    changed meanwhile (store: models.ingestion's, which calls `first` under the write lock).
    The records of clients not logged are not stored, but counted; all count as accepted."""
    endpoint_names = {values[_ENDPOINT] for values, _ in records}
    while True:
        rules = Rules(endpoint_names)
        kept, counted = rules.split(apply(records, rules))
        then = in_transaction
        if counted:
            counts = anonymous.Counts(counted)
            then = _both(counts.add, in_transaction)
        try:
            if kept:
                store(kept, then, rules.first(first))
            else:
                with write_transaction():
                    rules.first(first)()
                    if then is not None:
                        then()
            return len(records)
        except Changed:
            continue


def _both(one, other):
    def both():
        one()
        if other is not None:
            other()

    return both


def _hash_keys(endpoints: list[str]) -> dict[str, bytes]:
    """Each endpoint's own hash key (made on first use, kept in the store, never shown)."""
    marks = ", ".join("?" * len(endpoints))
    select = f"SELECT endpoint, hash_key FROM privacy_setting WHERE endpoint IN ({marks}) AND hash_key <> ''"
    if len(query(select, endpoints).fetchall()) < len(endpoints):
        with write_transaction():
            for name in endpoints:
                query(
                    "INSERT INTO privacy_setting (endpoint, settings, hash_key) VALUES (?, '{}', ?)"
                    " ON CONFLICT (endpoint) DO UPDATE SET hash_key = excluded.hash_key"
                    " WHERE privacy_setting.hash_key = ''",
                    [name, secrets.token_hex(32)],
                )
    return {name: bytes.fromhex(key) for name, key in query(select, endpoints)}


def apply(records: list[tuple], rules: Rules) -> list[tuple]:
    """The batch as its endpoints' settings let it be stored (see store_records for the shape)."""
    applied, keys = rules.applied, rules.keys
    if not applied:
        return records
    out = []
    for values, meta in records:
        endpoint = values[_ENDPOINT]
        own = applied.get(endpoint)
        out.append((values, meta) if own is None else _applied(values, meta, own, keys.get(endpoint)))
    return out


def _applied(values: tuple, meta: dict, rules: dict, key: bytes | None) -> tuple[tuple, dict]:
    values = list(values)
    meta = dict(meta) if meta else {}
    if rules["client_ip"] != KEEP:
        values[_SRC_IP] = address_kept(values[_SRC_IP], rules, key)
        if meta.get(_META_ADDRESS):
            meta[_META_ADDRESS] = address_kept(meta[_META_ADDRESS], rules, key) or ""
        if _is_address(values[_CLIENT]):  # a client known by its address is that address
            values[_CLIENT] = address_kept(values[_CLIENT], rules, key) or ANONYMOUS
        if rules["client_ip"] != TRUNCATE:
            values[_SOURCE_CITY] = None
    if rules["client_metadata"] == DROP:
        meta = {_META_ADDRESS: meta[_META_ADDRESS]} if meta.get(_META_ADDRESS) else {}
    if rules["question"] != KEEP:
        question = values[_QUESTION]
        values[_QUESTION] = registrable_domain(question) if rules["question"] == DOMAIN else ""
        values[_AT["trigger_value"]] = None  # a blocking rule's text names what it matched
    if rules["answers"] == DROP:
        for at in _ANSWER_AT:
            values[at] = None
    return tuple(values), meta


def _is_address(text) -> bool:
    try:
        ipaddress.ip_address(text)
    except (TypeError, ValueError):
        return False
    return True


def address_kept(text: str | None, rules: dict, key: bytes | None) -> str | None:
    """An address as the settings keep it (None: dropped, or none to begin with)."""
    if not text:
        return None
    mode = rules["client_ip"]
    if mode == DROP:
        return None
    address = ipaddress.ip_address(text)
    if mode == TRUNCATE:
        prefix = rules["ipv4_prefix"] if address.version == 4 else rules["ipv6_prefix"]
        return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False).network_address)
    if mode == HASH:
        digest = hmac.new(key, address.packed, hashlib.sha256).digest()[:8]
        return str(_HASHED + int.from_bytes(digest, "big"))
    return text
