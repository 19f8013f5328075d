"""The counts a store made by an earlier version counts only from the day after its upgrade
(tables.SHORT_FROM's marks: the hours by client and by name, a client's names a day), made for
the days before it: `flask --app wsgi count-clickhouse-hours` (docs/clickhouse.md "The tables")."""

from models.clickhouse import counts, deletion, tables
from models.clickhouse.dims import COLUMNS, DAY_MS, WITH_RECORDS, counted, day_text, field
from models.engine.database import write_transaction
from models.privacy import rewrites as privacy_rewrites


class UnderWay(Exception):
    """A privacy rewrite or a deletion is under way: each takes a day's counts away in one turn
    of the writers and changes the records in another (a rewrite adds them back after its
    mutation), so a day counted between the two would be counted wrong."""


def count_earlier(connection, said=lambda day: None) -> int:
    """Count what a store made before counts only from a day on (tables.SHORT_FROM: the
    fields of an upgrade) for the days before it that hold records, then say
    that they count from the first record on: the statistics read them, not the records, over
    those days too. A day at a time in the writers' turn, so that no batch, deletion or expiry
    touches the day meanwhile: its rows of those fields (what the view counted since the
    upgrade, what deletions took away of records never counted) are brought to its records'
    counts by rows of the difference. `said(day)` after each day (days since 1970); how many
    days were counted. Run again after a stop, it counts the days left, and those done again,
    to the same counts. Raises UnderWay (at the day it reached) while a privacy rewrite
    has a task left or a deletion (retention's too) is between its two turns."""
    marks = tables.later_marks(connection)
    if not marks:
        return 0
    records, table = f"{connection.target.database}.records", f"{connection.target.database}.daily_counts"
    keys = ", ".join(COLUMNS[:-1])
    first, stored = connection.rows(f"SELECT toInt32(min(toDate32(ts))), count() FROM {records}")[0]
    last = (max(marks.values()) - 1) // DAY_MS
    days = 0
    for day in range(first, last + 1) if stored else ():
        which = tuple(dim for dim in WITH_RECORDS if marks.get(field(dim), 0) > day * DAY_MS)
        params = {"day": day_text(day), "fields": [field(dim) for dim in which]}
        with write_transaction():
            if privacy_rewrites.next_task() is not None:
                raise UnderWay(f"a privacy rewrite is under way (counted up to {day_text(day)})")
            if deletion.begun():
                raise UnderWay(f"a deletion is under way (counted up to {day_text(day)})")
            # What the day's rows of those fields must be given to sum to its records' counts (no
            # DELETE: a mutation a day took seconds of waiting).
            true = counted(records, "toDate32(ts) = toDate32({day:Date32})", which)
            held = (
                f"SELECT {keys}, -n AS n FROM {table} "
                "WHERE day = toDate32({day:Date32}) AND field IN {fields:Array(String)}"
            )
            counts.add(
                connection,
                f"SELECT {keys}, sum(n) AS n FROM ({true} UNION ALL {held}) GROUP BY {keys} HAVING n != 0",
                params,
                None,
            )
        days += 1
        said(day)
    tables.all_short_counted(connection)
    return days
