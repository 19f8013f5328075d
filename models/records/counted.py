"""The mark counting has read the records up to (models/statistics/counting.py): the highest
record id whose counts are in. A reader of records by id like the outputs' cursors, so freezing
waits for it, and reads count the records past it from the records themselves."""

from models.engine.database import db
from models.schema import settings

MARK = "rollups_counted_through"
# The mark in SQL, read in the statement that reads the counts, so both are one snapshot.
COUNTED_SQL = f"(SELECT CAST(value AS BIGINT) FROM store_setting WHERE name = '{MARK}')"


def counted_through() -> int:
    """The highest record id whose counts are in."""
    mark = settings.read(MARK)
    return int(mark) if mark is not None else 0


def waiting_records(alias: str = "r") -> tuple[str, str, list]:
    """(FROM item of the record table as `alias`, condition, params) of the records not counted
    yet, for a statement that reads the counts too: it reads the mark itself (one snapshot); the
    mark read here first only tells the planner that the range of ids is short."""
    condition = f"{alias}.id > ? AND {alias}.id > {COUNTED_SQL}"
    return db.obj.dialect.by_id("record", alias), condition, [counted_through()]
