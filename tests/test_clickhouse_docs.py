"""The example queries of docs/clickhouse.md ("Reading the tables from Grafana") run on the
record store's own tables (chDB), Grafana's macros replaced by the SQL they stand for, and
answer what the records stored say: the docs follow the tables."""

import os
import re
from collections import Counter

from models.clickhouse import tables
from models.runtime.clock import now_ms

from support.chdb import record_row
from support.servers import ROOT

MINUTE = 60_000
DAY = 86_400_000


# Named in backquotes in the section's prose, and no column: the database, a function.
_NOT_COLUMNS = {"analytics", "min"}


def _section() -> str:
    with open(os.path.join(ROOT, "docs", "clickhouse.md"), encoding="utf-8") as doc:
        text = doc.read()
    return text.split("## Reading the tables from Grafana", 1)[1].split("\n## ", 1)[0]


def _examples() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", _section(), flags=re.S)


def _named_in_prose() -> set[str]:
    """The columns the section's prose names: `ts`, `sum(n)`, `field = ''`..."""
    prose = re.sub(r"```sql\n.*?```", "", _section(), flags=re.S)
    named = set()
    for quoted in re.findall(r"`([^`]+)`", prose):
        found = re.fullmatch(r"(?:(?:sum|max|min)\()?([a-z_]+)\)?(?: = '.*')?", quoted)
        if found:
            named.add(found.group(1))
    return named - _NOT_COLUMNS


def _as_run(sql: str, start_ms: int, end_ms: int) -> str:
    """Grafana's macros as the plugin expands them for a window and one-minute buckets."""
    window = rf"\1 >= fromUnixTimestamp64Milli({start_ms}) AND \1 <= fromUnixTimestamp64Milli({end_ms})"
    sql = re.sub(r"\$__timeFilter\((\w+)\)", window, sql)
    return re.sub(r"\$__timeInterval\((\w+)\)", r"toStartOfInterval(\1, INTERVAL 60 second)", sql)


def test_the_columns_the_grafana_section_names_are_the_tables(clickhouse):
    found = clickhouse.rows(
        "SELECT table, name FROM system.columns WHERE database = 'analytics' AND table IN {tables:Array(String)}",
        {"tables": [table.name for table in tables.TABLES]},
    )
    known = {table for table, _ in found} | {column for _, column in found}
    named = _named_in_prose()
    assert {"ts", "action", "response_time_ms", "n", "first", "last_activity"} <= named, "the prose is read"
    assert named - known == set()


def test_the_grafana_examples_answer_what_the_records_say(clickhouse):
    examples = _examples()
    assert len(examples) == 5, "each example below is checked: a new one needs its check"
    now = now_ms() // MINUTE * MINUTE
    rows = [
        record_row(1, now - 3 * MINUTE, action=0, question="ads.example", registrable_domain="ads.example"),
        record_row(2, now - 3 * MINUTE + 5, action=0, question="ads.example", registrable_domain="ads.example"),
        record_row(3, now - 2 * MINUTE, action=1),
        record_row(
            4, now - 2 * MINUTE + 9, action=0, client="tv", question="t.example", registrable_domain="t.example"
        ),
        record_row(5, now - 2 * DAY, action=1, client="tv"),  # outside the window, inside the year
    ]
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, rows, times=tables.TIME_COLUMNS)
    window = (now - 10 * MINUTE, now)
    by_minute, blocked, per_day, last_seen, new_names = (clickhouse.rows(_as_run(sql, *window)) for sql in examples)
    inside = [row for row in rows if window[0] <= row[1] <= window[1]]
    action_at = tables.RECORD_COLUMNS.index("action")
    summed = Counter()
    for _, action, n in by_minute:
        summed[action] += n
    assert summed == Counter(str(row[action_at]) for row in inside)
    assert len(by_minute) == 3, "two minutes, one with two actions"
    assert blocked == [("ads.example", 2), ("t.example", 1)]
    assert sum(n for _, n in per_day) == len(rows) and len(per_day) == 2
    assert [(endpoint, client) for endpoint, client, _ in last_seen] == [("home", "tv"), ("home", "laptop")]
    # example.com was first asked two days ago: not new in the window.
    assert [question for question, _ in new_names] == ["t.example", "ads.example"]
