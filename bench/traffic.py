"""Deterministic synthetic traffic of a filtering DNS resolver, generated batch by batch."""

import ipaddress
import json
import math
import random
from bisect import bisect
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate

DAY_MS = 86_400_000
ENDPOINTS = 50
CLIENTS = 2_000
DOMAINS = 20_000
DAYS = 30

# What happens to a query, by share of all queries: (outcome, weight). Blocked ~15.8 %,
# resolved 78.5 %, spoofed 2.5 %, redirected 1 %, failed 2.2 % - a family/ad-blocking resolver.
OUTCOMES = (
    ("resolve", 0.770),
    ("allow", 0.015),
    ("filter", 0.125),
    ("service", 0.020),
    ("deny", 0.008),
    ("rebind", 0.001),
    ("safesearch", 0.025),
    ("redirect", 0.010),
    ("grule", 0.004),
    ("fail", 0.022),
)
RR_TYPES = (
    ("A", 45),
    ("AAAA", 30),
    ("HTTPS", 16),
    ("CNAME", 2),
    ("TXT", 2),
    ("PTR", 2),
    ("MX", 1),
    ("SRV", 1),
    ("SOA", 1),
)
PROTOCOLS = (("doh", 42), ("dot", 22), ("legacy", 20), ("doh3", 10), ("doq", 6))
BLOCKLISTS = (("ads", 50), ("trackers", 35), ("malware", 6), ("phishing", 5), ("crypto", 4))
SERVICES = {
    "youtube": ("youtube.com", "googlevideo.com", "ytimg.com"),
    "tiktok": ("tiktok.com", "tiktokcdn.com", "tiktokv.com"),
    "facebook": ("facebook.com", "fbcdn.net"),
    "instagram": ("instagram.com", "cdninstagram.com"),
    "netflix": ("netflix.com", "nflxvideo.net"),
    "roblox": ("roblox.com", "rbxcdn.com"),
    "twitch": ("twitch.tv", "ttvnw.net"),
    "snapchat": ("snapchat.com",),
    "discord": ("discord.com", "discord.gg"),
}
# Safe search: the search engine's name and what it is rewritten to.
SAFESEARCH = (
    ("www.google.com", "forcesafesearch.google.com", "216.239.38.120"),
    ("www.bing.com", "strict.bing.com", "204.79.197.220"),
    ("duckduckgo.com", "safe.duckduckgo.com", "52.142.124.215"),
    ("www.youtube.com", "restrict.youtube.com", "216.239.38.120"),
)
LOCATIONS = ("us-nyc", "us-sfo", "de-fra", "gb-lon", "jp-tyo", "sg-sin")
# Where answers point: (countryCode, isp, asn) of the big hosting networks.
HOSTING = (
    ("US", "Cloudflare", 13335),
    ("US", "Amazon", 16509),
    ("US", "Google", 15169),
    ("US", "Akamai", 20940),
    ("US", "Fastly", 54113),
    ("IE", "Microsoft", 8075),
    ("DE", "Hetzner", 24940),
    ("FR", "OVH", 16276),
    ("NL", "DigitalOcean", 14061),
    ("SG", "Alibaba", 45102),
)
# Where endpoints sit: (countryCode, city, isp, asn) of their uplink.
NETWORKS = (
    ("US", "New York", "Comcast", 7922),
    ("US", "Chicago", "AT&T", 7018),
    ("US", "Austin", "Spectrum", 11427),
    ("DE", "Berlin", "Deutsche Telekom", 3320),
    ("GB", "London", "BT", 2856),
    ("FR", "Paris", "Orange", 3215),
    ("NL", "Amsterdam", "KPN", 1136),
    ("JP", "Tokyo", "NTT", 4713),
    ("BR", "Sao Paulo", "Vivo", 26599),
    ("IN", "Mumbai", "Jio", 55836),
)
DEVICES = (
    ("iphone", "Apple", "ios", "arm64", "17.5"),
    ("ipad", "Apple", "ios", "arm64", "17.4"),
    ("macbook", "Apple", "macos", "arm64", "14.5"),
    ("android", "Samsung", "android", "arm64", "14"),
    ("pixel", "Google", "android", "arm64", "14"),
    ("windows-pc", "Dell", "windows", "x86_64", "11"),
    ("laptop", "Lenovo", "linux", "x86_64", "6.8"),
    ("tv", "LG", "webos", "arm", "6.0"),
    ("chromecast", "Google", "android", "arm", "12"),
    ("echo", "Amazon", "fireos", "arm", "7"),
    ("xbox", "Microsoft", "windows", "x86_64", "10"),
    ("printer", "HP", "", "", ""),
    ("nas", "Synology", "linux", "x86_64", "5.10"),
)
PREFIXES = (
    "www", "api", "cdn", "static", "img", "m", "mail", "login", "app", "edge", "assets", "media",
    "ws", "push", "telemetry", "metrics", "pixel", "sync", "update", "auth", "video", "files",
)  # fmt: skip
SYLLABLES = (
    "ka", "lo", "mi", "ne", "ra", "to", "vi", "zen", "bri", "cor", "dex", "fa", "gra", "hub",
    "io", "jet", "kin", "lum", "max", "nova", "ox", "pix", "qua", "ro", "sky", "tek", "ul",
    "vox", "wi", "xo", "yu", "zap", "net", "soft", "cloud", "ly", "ify", "go", "shop", "news",
)  # fmt: skip
TLDS = (("com", 60), ("net", 10), ("org", 6), ("io", 6), ("de", 5), ("co.uk", 4), ("app", 3), ("tv", 3), ("fr", 3))
ZIPF_S = 1.0
# The pool of names each outcome asks from (others: "normal"); safe search asks SAFESEARCH's.
POOLS = {"filter": "blocklist", "allow": "blocklist", "service": "service", "safesearch": "safesearch"}
RARE_NAME = "wpad"


@dataclass(frozen=True)
class Domain:
    name: str
    apex: str


def _cumulative(weights) -> list[float]:
    """Cumulative weights normalised to end at exactly 1.0, so that bisect(table, random())
    is always a valid index."""
    total = float(sum(weights))
    table = [w / total for w in accumulate(weights)]
    table[-1] = 1.0
    return table


def _pick(table, rng):
    return table[0][bisect(table[1], rng.random())]


def _table(pairs):
    """(values, cumulative weights) of (value, weight) pairs."""
    return [value for value, _ in pairs], _cumulative([weight for _, weight in pairs])


def _zipf(count: int) -> list[float]:
    return [1.0 / (rank + 1) ** ZIPF_S for rank in range(count)]


class Traffic:
    """The world (endpoints, clients, domains) and its traffic: `batch(i)` is the i-th batch of
    wire records (QueryData dicts as POST /v2/ingest takes them), the same on every call and
    computed without the others, so any sender can make any batch and nothing is held."""

    def __init__(self, records: int, end_ms: int, batch_size: int = 5000, seed: int = 1):
        self.records, self.batch_size, self.seed = records, batch_size, seed
        self.end_ms = end_ms
        self.start_ms = end_ms - DAYS * DAY_MS
        rng = random.Random(seed)
        self._build_domains(rng)
        self._build_clients(rng)
        self._build_clock()
        self._outcomes = _table(OUTCOMES)
        self._rr_types = _table(RR_TYPES)
        self._protocols = _table(PROTOCOLS)
        self._minutes: dict[int, str] = {}
        self._extras: dict[tuple[str, str], str] = {}
        self._client_json = [json.dumps(base, separators=(",", ":"))[1:-1] for base, _ in self.clients]
        self._answer_json = {key: json.dumps(value, separators=(",", ":")) for key, value in self._answer_lists.items()}

    @property
    def batches(self) -> int:
        return math.ceil(self.records / self.batch_size)

    # --- the world ---------------------------------------------------------------------

    def _build_domains(self, rng):
        """20,000 names under ~5,000 apexes; popularity is Zipf by a shuffled rank."""
        special = {name: ("safesearch", None) for name, _, _ in SAFESEARCH}
        for service, apexes in SERVICES.items():
            for apex in apexes:
                special[apex] = ("service", service)
                special["www." + apex] = ("service", service)
        names = dict(special)
        tlds = _table(TLDS)
        while len(names) < DOMAINS:
            apex = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) + "." + _pick(tlds, rng)
            if apex in names:
                continue
            # ~10 % of apexes are on a blocklist, with every name under them.
            kind = ("blocklist", _pick(_table(BLOCKLISTS), rng)) if rng.random() < 0.10 else ("normal", None)
            names[apex] = kind
            for prefix in rng.sample(PREFIXES, rng.randint(0, 6)):
                if len(names) < DOMAINS:
                    names.setdefault(f"{prefix}.{apex}", kind)
        order = list(names)
        rng.shuffle(order)
        weights = _zipf(len(order))
        pools: dict[str, list[tuple[Domain, float, str | None]]] = {}
        # The answers of a query by key: a (name, rrType) resolution, an rrType blocked (sinkhole
        # address), None (no answer). Keys not listed have no answer either.
        self._answer_lists = {None: [], "A": [{"ips": ["0.0.0.0"]}], "AAAA": [{"ips": ["::"]}]}
        for name, weight in zip(order, weights, strict=True):
            kind, detail = names[name]
            pools.setdefault(kind, []).append((Domain(name, self._apex(name)), weight, detail))
            if kind != "safesearch":
                self._answer_lists.update(self._answers(name, rng))
        for name, _, address in SAFESEARCH:
            geoip = {"countryCode": "US", "city": "", "isp": "Google", "asn": 15169}
            self._answer_lists[(name, "A")] = [{"ips": [address], "geoip": geoip}]
        self.domains = order
        self.pools = {
            kind: ([(d, detail) for d, _, detail in entries], _cumulative([w for _, w, _ in entries]))
            for kind, entries in pools.items()
        }
        # The most popular normal apex: the searchQuestion probes look for it.
        self.top_apex = self.pools["normal"][0][0][0].apex
        # The least popular normal name is a single-label one, as devices ask for (WPAD): the
        # one name without a dot, which a rare `excludes` probe finds. Renamed in place, so no
        # draw of the generator moves.
        normal = self.pools["normal"][0]
        self.domains[self.domains.index(normal[-1][0].name)] = RARE_NAME
        normal[-1] = (Domain(RARE_NAME, RARE_NAME), normal[-1][1])
        self._answer_lists[None] = NO_ANSWERS

    def share(self, matches) -> float:
        """The expected share of all records whose question passes `matches(name)`."""
        total = 0.0
        for kind, (entries, cumulative) in self.pools.items():
            if kind == "safesearch":  # asked from SAFESEARCH, evenly
                continue
            pool = sum(weight for outcome, weight in OUTCOMES if POOLS.get(outcome, "normal") == kind)
            for (domain, _), before, upto in zip(entries, [0.0, *cumulative], cumulative, strict=False):
                if matches(domain.name):
                    total += pool * (upto - before)
        safesearch = sum(weight for outcome, weight in OUTCOMES if outcome == "safesearch")
        return total + safesearch * sum(bool(matches(name)) for name, _, _ in SAFESEARCH) / len(SAFESEARCH)

    def rare_apex(self, share: float) -> str:
        """The least popular normal apex asked by at least `share` of all records, whose text
        no other name holds (but at its end): the rare searches' target."""
        for domain, _ in reversed(self.pools["normal"][0]):
            apex = domain.apex
            if "." not in apex or any(apex in name and not name.endswith(apex) for name in self.domains):
                continue
            if self.share(lambda name, apex=apex: apex in name) >= share:
                return apex
        raise ValueError(f"no apex is asked by {share:.4%} of the records")

    @staticmethod
    def _apex(name: str) -> str:
        parts = name.split(".")
        keep = 3 if name.endswith(".co.uk") else 2
        return ".".join(parts[-keep:])

    @staticmethod
    def _answers(name: str, rng) -> dict:
        """A name's A and AAAA answers, with the geoip of the network hosting it."""
        country, isp, asn = rng.choice(HOSTING)
        geoip = {"countryCode": country, "city": "", "isp": isp, "asn": asn}
        v4 = [str(ipaddress.IPv4Address(rng.randint(0x0B000000, 0xDFFFFFFF))) for _ in range(rng.randint(1, 2))]
        v6 = [ipaddress.IPv6Address((0x2606_4700 << 96) | rng.getrandbits(64)).compressed]
        return {(name, "A"): [{"ips": v4, "geoip": geoip}], (name, "AAAA"): [{"ips": v6, "geoip": geoip}]}

    def _build_clients(self, rng):
        """2,000 clients over 50 endpoints of Zipf-like size; each client has its own rate."""
        self.endpoints = []
        for index in range(ENDPOINTS):
            country, city, isp, asn = rng.choice(NETWORKS)
            self.endpoints.append(
                {
                    "name": f"ep-{rng.getrandbits(32):08x}",
                    "profiles": [f"prof-{rng.getrandbits(24):06x}" for _ in range(rng.randint(1, 3))],
                    "ips": [str(ipaddress.IPv4Address(rng.randint(0x0B000000, 0xDFFFFFFF))) for _ in range(2)],
                    "geoip": {"countryCode": country, "city": city, "isp": isp, "asn": asn},
                    "subnet": index,
                }
            )
        sizes = _cumulative(_zipf(ENDPOINTS))
        owners = list(range(ENDPOINTS)) + [bisect(sizes, rng.random()) for _ in range(CLIENTS - ENDPOINTS)]
        protocols = _table(PROTOCOLS)
        self.clients, weights = [], []
        for number, owner in enumerate(owners):
            endpoint = self.endpoints[owner]
            device, vendor, os_type, arch, version = rng.choice(DEVICES)
            client_id = f"{device}-{rng.getrandbits(24):06x}"
            meta = {
                "host": f"{client_id}.lan",
                "mac": ":".join(f"{rng.getrandbits(8):02x}" for _ in range(6)),
                "ip": f"10.{endpoint['subnet']}.{number // 250}.{number % 250 + 2}",
                "vendor": vendor,
                "os": {"type": os_type, "arch": arch, "version": version},
            }
            base = {
                "endpointId": endpoint["name"],
                "clientId": client_id,
                "profileId": rng.choice(endpoint["profiles"]),
                "sourceIp": rng.choice(endpoint["ips"]),
                "sourceGeoip": endpoint["geoip"],
                "client": meta,
            }
            self.clients.append((base, _pick(protocols, rng)))
            weights.append(rng.lognormvariate(0.0, 1.0))  # a few chatty devices, many quiet ones
        self._client_cum = _cumulative(weights)
        self.client_weights = weights

    def _build_clock(self):
        """Quarter-hour cells with a daily rhythm (busiest at 20:00 UTC, quietest at 08:00)."""
        cell_ms = 15 * 60_000
        cells = DAYS * DAY_MS // cell_ms
        weights = []
        for cell in range(cells):
            hour = (cell * cell_ms % DAY_MS) / 3_600_000
            weights.append(1.0 + 0.6 * math.cos(2 * math.pi * (hour - 20) / 24))
        self._cell_ms = cell_ms
        self._clock = [0.0] + _cumulative(weights)

    def _time(self, x: float) -> int:
        """The timestamp at fraction x of all records: records are spread in time order."""
        clock = self._clock
        cell = bisect(clock, x) - 1  # 0 <= x < 1, so a cell of the table
        within = (x - clock[cell]) / (clock[cell + 1] - clock[cell])
        return self.start_ms + int((cell + within) * self._cell_ms)

    def format_ms(self, ms: int) -> str:
        """RFC 3339 with milliseconds; the minute's text is cached (records come in time order)."""
        minute, rest = divmod(ms, 60_000)
        prefix = self._minutes.get(minute)
        if prefix is None:
            if len(self._minutes) > 100_000:
                self._minutes.clear()
            prefix = datetime.fromtimestamp(minute * 60, UTC).strftime("%Y-%m-%dT%H:%M:")
            self._minutes[minute] = prefix
        return f"{prefix}{rest // 1000:02d}.{rest % 1000:03d}Z"

    # --- the traffic -------------------------------------------------------------------

    def batch(self, index: int) -> list[dict]:
        """The index-th batch as wire records (QueryData dicts), in time order."""
        clients, answers = self.clients, self._answer_lists
        records = []
        for ci, ts, protocol, rr_type, question, action, trigger, value, spoof, status, answer in self._events(index):
            record = dict(clients[ci][0])
            record.update(
                timestamp=ts,
                protocol=protocol,
                rrType=rr_type,
                question=question,
                action=action,
                trigger=trigger,
                statusCode=status,
                answers=answers.get(answer, NO_ANSWERS),
            )
            if value:
                record["triggerValue"] = value
            if spoof:
                record["spoofTarget"] = spoof
            records.append(record)
        return records

    def batch_json(self, index: int) -> bytes:
        """The same batch as a JSON array, put together from pre-encoded pieces: json.dumps of
        the dicts costs more than the server's whole parse on this kind of machine, and the
        load generator must not be what limits the ingest rate."""
        clients, answers, extra = self._client_json, self._answer_json, self._extra_json
        parts = [
            f'{{{clients[ci]},"timestamp":"{ts}","protocol":"{protocol}","rrType":"{rr_type}",'
            f'"question":"{question}","action":{action},"trigger":"{trigger}","statusCode":"{status}"'
            f'{extra(value, spoof)},"answers":{answers.get(answer, "[]")}}}'
            for ci, ts, protocol, rr_type, question, action, trigger, value, spoof, status, answer in self._events(
                index
            )
        ]
        return ("[" + ",".join(parts) + "]").encode()

    def _extra_json(self, value: str, spoof: str) -> str:
        text = self._extras.get((value, spoof))
        if text is None:
            pairs = (("triggerValue", value), ("spoofTarget", spoof))
            text = "".join(f',"{name}":{json.dumps(item)}' for name, item in pairs if item)
            self._extras[(value, spoof)] = text
        return text

    def _events(self, index: int):
        """The batch's records as tuples: (client index, timestamp, protocol, rrType, question,
        action, trigger, triggerValue, spoofTarget, statusCode, answers key)."""
        rng = random.Random((self.seed << 32) | index)
        random_ = rng.random
        first = index * self.batch_size
        last = min(first + self.batch_size, self.records)
        clients, client_cum, total = self.clients, self._client_cum, self.records
        outcomes, rr_types, protocols = self._outcomes, self._rr_types, self._protocols
        pools = self.pools
        for position in range(first, last):
            ci = bisect(client_cum, random_())
            ts = self.format_ms(self._time((position + random_()) / total))
            protocol = clients[ci][1] if random_() < 0.95 else protocols[0][bisect(protocols[1], random_())]
            rr_type = rr_types[0][bisect(rr_types[1], random_())]
            outcome = outcomes[0][bisect(outcomes[1], random_())]
            status, value, spoof, answer = "NOERROR", "", "", None
            if outcome == "filter" or outcome == "allow":
                domains, cum = pools["blocklist"]
                domain, blocklist = domains[bisect(cum, random_())]
                if outcome == "allow":
                    action, trigger, value, answer = 1, "custom", f"@@||{domain.apex}^", (domain.name, rr_type)
                else:
                    action, trigger, value = 0, "filter", blocklist
                    if random_() < 0.2:
                        status = "NXDOMAIN"
                    else:
                        answer = rr_type
            elif outcome == "service":
                domains, cum = pools["service"]
                domain, service = domains[bisect(cum, random_())]
                action, trigger, value, answer = 0, "service", service, rr_type
            elif outcome == "safesearch":
                name, spoof, _ = SAFESEARCH[int(random_() * len(SAFESEARCH))]
                yield ci, ts, protocol, rr_type, name, 2, "filter", "safesearch", spoof, status, (name, rr_type)
                continue
            else:
                domains, cum = pools["normal"]
                domain = domains[bisect(cum, random_())][0]
                if outcome == "resolve":
                    action, trigger = 1, "default"
                    if random_() < 0.10:
                        status = "NXDOMAIN"
                    else:
                        answer = (domain.name, rr_type)
                elif outcome == "fail":
                    action, trigger = -1, "default"
                    status = "SERVFAIL" if random_() < 0.8 else "REFUSED"
                elif outcome == "redirect":
                    action, trigger, value = 3, "grule", "geo-redirect"
                    spoof, answer = LOCATIONS[int(random_() * len(LOCATIONS))], (domain.name, rr_type)
                else:
                    action, trigger, answer = 0, OUTCOME_TRIGGERS[outcome], rr_type
                    if outcome == "deny":
                        value = f"||{domain.apex}^"
                    elif outcome == "grule":
                        value = "newly-registered-domains"
            yield ci, ts, protocol, rr_type, domain.name, action, trigger, value, spoof, status, answer


NO_ANSWERS: list = []
OUTCOME_TRIGGERS = {"deny": "custom", "rebind": "rebind", "grule": "grule"}
_BLOCKED = {"A": [{"ips": ["0.0.0.0"]}], "AAAA": [{"ips": ["::"]}]}


def _blocked(rr_type: str):
    return _BLOCKED.get(rr_type)
