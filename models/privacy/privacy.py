"""Privacy settings per endpoint, and clients marked not logged, applied to every batch
before anything of it is written.

Settings are stored per endpoint name (so an endpoint can have them before its first record),
the operator's default under DEFAULT; a field an endpoint does not set is the default's. What a
setting removes never reaches the store: not the records, the client entries, the interned
strings, the rollups or the realtime stream (which reads the records). Records stored before a
setting was made stricter, and records reaching an age step, are made coarser later by the
privacy job (models/privacy/rewrites.py), with the field-by-field rules here. A client marked not
logged (its entry's `unlogged`, see models/clients/clients.py) has no record stored, and its queries
are counted in the anonymous statistics (models/statistics/anonymous.py) or, as its endpoint's
`unlogged_clients` says, not at all.
"""

import hashlib
import hmac
import ipaddress
import json
import secrets
from functools import partial

from catalogue import FIELDS
from models.engine.database import query, write_transaction
from models.records.domains import registrable_domain
from models.runtime.clock import now_ms
from models.statistics import anonymous

DEFAULT = "_default"
KEEP, DROP, TRUNCATE, HASH, DOMAIN = "keep", "drop", "truncate", "hash", "domain"
COUNTED, NOT_COUNTED = "counted", "not_counted"
# Today's behaviour: everything kept. Prefixes: what truncation keeps of an address.
BUILT_IN = {
    "client_ip": KEEP,
    "ipv4_prefix": 24,
    "ipv6_prefix": 48,
    "client_metadata": KEEP,
    "question": KEEP,
    "answers": KEEP,
    "unlogged_clients": COUNTED,
    "age_steps": [],
}
DAY_MS = 86_400_000
# The fields an age step sets, and how strict each choice is: a step, or a change, can only
# make a record's detail coarser (a smaller prefix is stricter too).
RANKS = {
    "client_ip": {KEEP: 0, TRUNCATE: 1, HASH: 2, DROP: 3},
    "client_metadata": {KEEP: 0, DROP: 1},
    "question": {KEEP: 0, DOMAIN: 1, DROP: 2},
    "answers": {KEEP: 0, DROP: 1},
}
PREFIXES = ("ipv4_prefix", "ipv6_prefix")
# A hashed address: 64 bits of a keyed hash under 100::/64, the IPv6 discard-only prefix (RFC
# 6666): still an address (groupable, exported and imported as one), never a real one.
_HASHED = ipaddress.IPv6Address("100::")
HASHED_NETWORK = ipaddress.IPv6Network("100::/64")
# Where each value a setting touches sits in a new record's values (catalogue order).
_AT = {field.sql: i for i, field in enumerate(FIELDS)}
_TS, _ENDPOINT, _CLIENT, _SRC_IP, _QUESTION = (_AT[sql] for sql in ("ts", "endpoint", "client", "src_ip", "question"))
# What the answers say: the answer set and the first answer's geography, and a spoofed target.
_ANSWER_AT = [_AT[sql] for sql in ("answers", "spoof_target", "dst_country", "dst_isp", "dst_asn")]
_TRIGGER_VALUE = _AT["trigger_value"]
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


def stricter(settings: dict, step: dict) -> dict:
    """`settings` made coarser by what `step` sets where the step is stricter (never finer)."""
    out = dict(settings)
    for field, ranks in RANKS.items():
        if field in step and ranks[step[field]] > ranks[out[field]]:
            out[field] = step[field]
    for field in PREFIXES:
        if field in step:
            out[field] = min(out[field], step[field])
    return out


def ages(settings: dict) -> list[tuple[int, dict]]:
    """[(age in ms from which they apply, the settings a record of that age is kept under)],
    youngest first: the settings themselves from age 0, then each age step's."""
    found = [(0, settings)]
    for step in sorted(settings["age_steps"], key=lambda step: step["after_days"]):
        found.append((step["after_days"] * DAY_MS, stricter(found[-1][1], step)))
    return found


def at_age(spans: list[tuple[int, dict]], age_ms: int) -> dict:
    """The settings of `ages` for a record `age_ms` old."""
    kept = spans[0][1]
    for since, settings in spans:
        if age_ms >= since:
            kept = settings
    return kept


def tightened(before: dict, after: dict) -> dict:
    """The fields (and prefixes) `after` keeps coarser than `before`: what records stored under
    `before` must be rewritten to ({} when none)."""
    changed = {}
    for field, ranks in RANKS.items():
        if ranks[after[field]] > ranks[before[field]]:
            changed[field] = after[field]
    narrower = any(after[field] < before[field] for field in PREFIXES)
    if after["client_ip"] == TRUNCATE and (before["client_ip"] == KEEP or before["client_ip"] == TRUNCATE and narrower):
        changed.update(client_ip=TRUNCATE, **{field: after[field] for field in PREFIXES})
    return changed


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
    Call inside a write transaction (models.privacy.rewrites.change calls it, and queues the rewrite
    of the records stored before when the change is stricter)."""
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

    def __init__(self, endpoints, now: int):
        self.stored, self.unlogged, self.now = settings(), unlogged_clients(), now
        self.applied, self.keys = {}, {}
        if not self.stored:
            return
        applied = {name: effective(self.stored, name) for name in endpoints}
        self.applied = {name: ages(rules) for name, rules in applied.items() if rules != BUILT_IN}
        hashing = [name for name, spans in self.applied.items() if any(r["client_ip"] == HASH for _, r in spans)]
        if hashing:
            self.keys = hash_keys(hashing)
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


def storing(store, enriched, records: list[tuple], in_transaction, first, count_unlogged=None) -> int:
    """store(records as `enriched(records, rules)` keeps them under their endpoints' settings,
    in_transaction, first), with the settings confirmed under the write lock: enriched and
    stored again under new settings when they changed meanwhile (store: models.ingest.ingestion's,
    which calls `first` under the write lock; enriched: models.ingest.enrichment's, which applies
    them). The records of clients not logged are not stored, but counted (`count_unlogged(records)`
    in the transaction: a store that keeps its counts elsewhere; None: the rollups); all count as
    accepted."""
    endpoint_names = {values[_ENDPOINT] for values, _ in records}
    while True:
        rules = Rules(endpoint_names, now_ms())
        kept, counted = enriched(records, rules)
        then = in_transaction
        if counted:
            add = anonymous.Counts(counted).add if count_unlogged is None else partial(count_unlogged, counted)
            then = _both(add, in_transaction)
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


def hash_keys(endpoints: list[str]) -> dict[str, bytes]:
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
    """The batch as its endpoints' settings let it be stored (see store_records for the shape):
    a record older than an age step is stored as that step keeps it."""
    applied, keys, now = rules.applied, rules.keys, rules.now
    if not applied:
        return records
    out = []
    for values, meta in records:
        endpoint = values[_ENDPOINT]
        spans = applied.get(endpoint)
        if spans is None:
            out.append((values, meta))
        else:
            own = spans[0][1] if len(spans) == 1 else at_age(spans, now - values[_TS])
            out.append(_applied(values, meta, own, keys.get(endpoint)))
    return out


def _applied(values: tuple, meta: dict, rules: dict, key: bytes | None) -> tuple[tuple, dict]:
    values = list(values)
    meta = dict(meta) if meta else {}
    if rules["client_ip"] != KEEP:
        values[_SRC_IP] = address_kept(values[_SRC_IP], rules, key)
        if meta.get(_META_ADDRESS):
            meta[_META_ADDRESS] = address_kept(meta[_META_ADDRESS], rules, key) or ""
        values[_CLIENT] = client_kept(values[_CLIENT], rules, key)
        if rules["client_ip"] != TRUNCATE:
            values[_SOURCE_CITY] = None
    if rules["client_metadata"] == DROP:
        meta = {_META_ADDRESS: meta[_META_ADDRESS]} if meta.get(_META_ADDRESS) else {}
    if rules["question"] != KEEP:
        values[_QUESTION] = question_kept(values[_QUESTION], rules)
        values[_TRIGGER_VALUE] = None  # a blocking rule's text names what it matched
    if rules["answers"] == DROP:
        for at in _ANSWER_AT:
            values[at] = None
    return tuple(values), meta


def client_kept(client_id: str, rules: dict, key: bytes | None) -> str:
    """A client id as the settings keep it: one that is an address is that address."""
    if not _is_address(client_id):
        return client_id
    return address_kept(client_id, rules, key) or ANONYMOUS


def question_kept(question: str, rules: dict) -> str:
    if rules["question"] == DOMAIN:
        return registrable_domain(question)
    return "" if rules["question"] == DROP else question


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
        if address in HASHED_NETWORK:
            return text  # hashed already (a rewrite meets what an earlier one left)
        digest = hmac.new(key, address.packed, hashlib.sha256).digest()[:8]
        return str(_HASHED + int.from_bytes(digest, "big"))
    return text
