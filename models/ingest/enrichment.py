"""The one enrichment step of the records on their way into the store.

Every way in hands its batch to models.ingest.ingestion.store_records (POST /v2/ingest by either of
its paths, a feed's local sink, the dnstap collector's store process), which passes it through
`enriched` once, before anything of it is written and outside the write lock:

1. geography: the country, city, ISP and AS number the feed left empty, of the source and of
   each answer, from the operator's databases, looked up from the addresses as they came
   (before privacy may truncate, hash or drop them). The lookup is the wire's
   (schemas/geoip.py: it reads and writes the answers' JSON, which the store does not), handed
   over by `configure`;
2. privacy: each endpoint's settings and the clients not logged (models/privacy/privacy.py);
3. the registrable domain of the question as privacy kept it: interned and mapped as the batch
   is written (models/records/domains.py), since the map holds the terms' ids.

A feed pushing to another service (--url) neither looks up nor applies anything: it sends the
records as they came, and the service that stores them enriches them, with its own databases
and settings. So a record is enriched the same way whichever way it came in, and once.
"""

from collections.abc import Callable

from models.privacy import privacy

_geography: Callable[[tuple], tuple] | None = None


def configure(geography: Callable[[tuple], tuple] | None) -> None:
    """`geography(values) -> values`: a record's values (catalogue order) with its geography
    filled in, from now on (None: none)."""
    global _geography
    _geography = geography


def enriched(records: list[tuple], rules: privacy.Rules) -> tuple[list, list]:
    """(the records to store, those of clients not logged to count anonymously: see
    privacy.Rules.split), geography filled in and then the endpoints' settings applied."""
    geography = _geography
    if geography is not None:
        records = [(geography(values), meta) for values, meta in records]
    return rules.split(privacy.apply(records, rules))
