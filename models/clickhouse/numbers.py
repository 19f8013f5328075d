"""Record numbers for the ClickHouse store (docs/clickhouse.md "Record numbers"): handed out by a
counter in ANALYTICS_DATABASE, in the writers' turn, so that a reader by number after a cursor
never sees a lower number commit later."""

from models.schema import settings

_COUNTER = "clickhouse_numbered_through"


def take(connection, count: int) -> int:
    """The first of `count` new numbers, the counter moved past them. Call inside the write
    transaction that stores them: a batch whose insert reached ClickHouse but whose transaction
    did not commit left numbers above the counter, so the counter is first raised to the highest
    number ClickHouse holds."""
    counted = int(settings.read(_COUNTER) or 0)
    held = connection.rows(
        f"SELECT max(id) FROM {connection.target.database}.records WHERE id > {{counted:UInt64}}",
        {"counted": counted},
    )
    first = max(counted, held[0][0] if held and held[0][0] is not None else 0) + 1
    settings.write(_COUNTER, str(first + count - 1))
    return first


def raise_to(number: int) -> None:
    """Move the counter up to `number` (never down): records copied in with their numbers
    (models/clickhouse/copying.py). Call inside a write transaction."""
    if number > top():
        settings.write(_COUNTER, str(number))


def top() -> int:
    """The highest number whose batch has committed (0: none)."""
    return int(settings.read(_COUNTER) or 0)
