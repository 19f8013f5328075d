"""Where a live feed's batches go: an object with `deliver(records)`, which stores a batch of
wire records (QueryData dicts, as POST /v2/ingest takes them) durably or raises."""

from typing import Protocol

import models
from models.clock import now_ms
from schemas.records import parse_records


class Sink(Protocol):
    def deliver(self, records: list[dict]) -> None: ...


class LocalStore:
    """This installation's own database (ANALYTICS_DATABASE), one transaction per batch."""

    def deliver(self, records: list[dict]) -> None:
        with models.connection():
            models.store_records(parse_records(records, now_ms()))


def make_sink() -> Sink:
    """The sink every live feed delivers to."""
    return LocalStore()
