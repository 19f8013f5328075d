"""Geography from the operator's own databases (MaxMind GeoLite2 / GeoIP2 or DB-IP Lite, `.mmdb`):
as a batch is stored (the store's one enrichment step, models/ingest/enrichment.py, every way in), its
records' source address and answers' addresses get the country, city, ISP and AS number the feed
left empty. The lookup is here, in the wire, because it reads and writes the answers' JSON;
`configure` hands it to the store. Nothing is fetched: the operator supplies and updates the
files (ANALYTICS_GEOIP_DB: a City or Country database; ANALYTICS_ASN_DB: an ASN database), and a
file replaced on disk is read again within RELOAD_SECONDS."""

import functools
import json
import logging
import os
import threading
import time

import maxminddb

import models.ingest.enrichment
from catalogue import FIELDS

log = logging.getLogger(__name__)

RELOAD_SECONDS = 10.0  # how often the files' modification times are looked at, at most
_ANSWER_MEMO = 4096  # answer sets (their JSON) enriched and remembered
_AT = {field.name: i for i, field in enumerate(FIELDS)}
# Where a record keeps (country, city, ISP, AS number) of its source and its destination (the
# first answer's; records keep no destination city), and an answer's geoip keys.
_SOURCE = tuple(_AT[name] for name in ("srcCountry", "sourceCity", "srcIsp", "srcAsn"))
_DESTINATION = (_AT["dstCountry"], None, _AT["dstIsp"], _AT["dstAsn"])
_GEO_KEYS = ("countryCode", "city", "isp", "asn")
_EMPTY = ("", "", "", None)  # how a geoip says it does not know


class Databases:
    """The open databases (either may be None), looked up through a cache of addresses."""

    def __init__(self, city_path: str | None, asn_path: str | None):
        self.paths = (city_path, asn_path)
        self.readers = tuple(_open(path) if path else None for path in self.paths)
        self.stamps = tuple(_stamp(path) for path in self.paths)
        self.lookup = functools.lru_cache(maxsize=65536)(self._lookup)
        self.answers = {}

    def _lookup(self, ip: str) -> tuple:
        """(countryCode, city, isp, asn) of `ip`; "" / None where the databases do not say."""
        country = city = isp = ""
        asn = None
        city_db, asn_db = self.readers
        try:
            found = city_db.get(ip) if city_db else None
            if found:
                country = (found.get("country") or found.get("registered_country") or {}).get("iso_code") or ""
                city = ((found.get("city") or {}).get("names") or {}).get("en") or ""
                isp = found.get("isp") or ""  # GeoIP2-ISP style databases
            found = asn_db.get(ip) if asn_db else None
            if found:
                asn = found.get("autonomous_system_number")
                isp = isp or found.get("autonomous_system_organization") or ""
        except ValueError:  # not an address these databases know how to read
            return "", "", "", None
        asn = asn if isinstance(asn, int) and 0 <= asn < 2**32 else None
        return country[:8], city, isp, asn

    def enrich(self, values: tuple) -> tuple:
        """A record's values with what the feed left empty filled in."""
        row = None
        source_ip = values[_AT["sourceIp"]]
        if source_ip and any(values[at] in (None, "") for at in _SOURCE):
            row = list(values)
            _fill(row, _SOURCE, self.lookup(source_ip))
        answers = values[_AT["answers"]]
        if answers:
            enriched, first = self._answers(answers)
            if enriched != answers:
                row = row or list(values)
                row[_AT["answers"]] = enriched
                # The destination is the first answer's, as validation takes it.
                _fill(row, _DESTINATION, first)
        return values if row is None else tuple(row)

    def _answers(self, text: str) -> tuple[str, tuple]:
        """(the answers' JSON with each answer's geoip filled in from its first address, the
        first answer's geoip as (countryCode, city, isp, asn))."""
        found = self.answers.get(text)
        if found is None:
            answers = json.loads(text)
            for answer in answers:
                ips = answer.get("ips") or []
                if not ips:
                    continue
                known = answer.get("geoip") or {}
                merged = [known.get(key) for key in _GEO_KEYS]
                _fill(merged, (0, 1, 2, 3), self.lookup(ips[0]))
                if any(value not in ("", None) for value in merged):
                    answer["geoip"] = {
                        key: _EMPTY[i] if merged[i] in (None, "") else merged[i] for i, key in enumerate(_GEO_KEYS)
                    }
            first = answers[0].get("geoip") or {}
            found = (json.dumps(answers, separators=(",", ":")), tuple(first.get(key) for key in _GEO_KEYS))
            if len(self.answers) >= _ANSWER_MEMO:
                self.answers.clear()
            self.answers[text] = found
        return found


def _fill(row: list, positions: tuple, looked_up: tuple) -> None:
    """Fill the place (country, city) at `positions` if the feed gave neither, and the network
    (ISP, AS number) if it gave neither: a feed's country is never paired with a database's
    city. A position None is a value the row does not keep."""
    for part in (slice(0, 2), slice(2, 4)):
        pairs = [(at, value) for at, value in zip(positions[part], looked_up[part], strict=True) if at is not None]
        if all(row[at] in (None, "") for at, _ in pairs):
            for at, value in pairs:
                if value not in (None, ""):
                    row[at] = value


def _open(path: str):
    try:
        return maxminddb.open_database(path)
    except (OSError, ValueError, maxminddb.InvalidDatabaseError) as exc:
        raise RuntimeError(f"{path}: not a readable MaxMind database ({exc})") from None


def _stamp(path: str | None):
    if not path:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size, status.st_ino)


_active: Databases | None = None
_checked = 0.0
_lock = threading.Lock()


def configure(city_path: str | None, asn_path: str | None) -> None:
    """Have the store's enrichment step fill records from these files from now on (None, None:
    no geography). RuntimeError, naming the file, when one cannot be read: a setting that names
    a file must name a readable one."""
    global _active, _checked
    _active = Databases(city_path, asn_path) if (city_path or asn_path) else None
    _checked = time.monotonic()
    models.ingest.enrichment.configure(None if _active is None else fill)


def fill(values: tuple) -> tuple:
    """A validated record's values (catalogue order) with its geography filled in."""
    databases = _current()
    return values if databases is None else databases.enrich(values)


def _current() -> Databases | None:
    """The active databases, read again if a file changed on disk (a failed read keeps the
    previous ones, and says so in the log)."""
    global _active, _checked
    databases = _active
    if databases is None or time.monotonic() - _checked < RELOAD_SECONDS:
        return databases
    with _lock:
        _checked = time.monotonic()
        if tuple(_stamp(path) for path in databases.paths) != databases.stamps:
            try:
                _active = Databases(*databases.paths)
                log.info("geoip: read %s again", ", ".join(path for path in databases.paths if path))
            except RuntimeError as exc:
                log.warning("geoip: %s; keeping the databases read before", exc)
                databases.stamps = tuple(_stamp(path) for path in databases.paths)
        return _active
