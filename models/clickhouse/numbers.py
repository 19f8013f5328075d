"""Record numbers for the ClickHouse store (docs/clickhouse.md "Record numbers"): handed out by a
counter in ANALYTICS_DATABASE, in the writers' turn, so that a reader by number after a cursor
never sees a lower number commit later."""

from models.clickhouse import unstored
from models.schema import settings

_COUNTER = "clickhouse_numbered_through"


def take(connection, count: int) -> int:
    """The first of `count` new numbers, the counter moved past them. Call inside the write
    transaction that stores them. Records above the counter are a batch ClickHouse took whose
    transaction never committed (a process that died in between): they were never stored, and
    are erased before their numbers are handed out again."""
    counted = top()
    unstored.erase(connection, "id > {counted:UInt64}", {"counted": counted})
    settings.write(_COUNTER, str(counted + count))
    return counted + 1


def top() -> int:
    """The highest number whose batch has committed (0: none)."""
    return int(settings.read(_COUNTER) or 0)
