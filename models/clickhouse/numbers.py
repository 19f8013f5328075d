"""Record numbers for the ClickHouse store (docs/clickhouse.md "Record numbers"): handed out by a
counter in ANALYTICS_DATABASE, in the writers' turn, so that a reader by number after a cursor
never sees a lower number commit later."""

from models.schema import settings

_COUNTER = "clickhouse_numbered_through"


def take(count: int) -> int:
    """The first of `count` new numbers, the counter moved past them. Call inside the write
    transaction that stores them, once the records above the counter are erased (a batch
    ClickHouse took whose transaction never committed: ingestion.py)."""
    counted = top()
    settings.write(_COUNTER, str(counted + count))
    return counted + 1


def raise_to(number: int) -> None:
    """Move the counter up to `number` (never down): records copied in with their numbers
    (models/clickhouse/copying.py). Call inside a write transaction."""
    if number > top():
        settings.write(_COUNTER, str(number))


def top() -> int:
    """The highest number whose batch has committed (0: none)."""
    return int(settings.read(_COUNTER) or 0)
