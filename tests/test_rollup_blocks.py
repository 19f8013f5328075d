"""The long blocks of the names' rollups (16 and 4 days, 6 hours) are summed from the days and
hours they are made of once they close, not counted batch by batch: statistics over any window
still equal the records, with records that come late, deletions, and a database whose blocks
were all counted batch by batch before."""

from collections import Counter

import pytest

from models.runtime.clock import now_ms
from schemas.datetimes import format_ms, parse_datetime

from support.helpers import AUTH, ingest, record
from support.stores import run_sql

DAY = 86_400_000
HOUR = 3_600_000
BLOCK = 16 * DAY
START = (now_ms() // BLOCK - 4) * BLOCK  # a 16-day block boundary, 64 to 80 days ago
NAMES = ["a.example", "b.example", "c.example", "d.example"]

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


def day_of_records(day: int) -> list[dict]:
    """Twelve records of one day, at different hours, of three clients and every action."""
    return [
        record(
            "e1" if i % 3 else "e2",
            "xyz"[i % 3],
            format_ms(START + day * DAY + (i * 5 % 24) * HOUR + i * 1000),
            NAMES[(i + day) % 4],
            action=[0, 1, None, 2][i % 4],
        )
        for i in range(12)
    ]


def truth(sent: list[dict], start: int, end: int, **where) -> dict[str, int]:
    found = Counter()
    for item in sent:
        ts = parse_datetime(item["timestamp"])
        if start <= ts <= end and all(item.get(k) == v for k, v in where.items()):
            found[item["question"]] += 1
    return dict(found)


def asked(client, start: int, end: int, extra="") -> dict[str, int]:
    response = client.get(
        f"/v2/statistic/count/question?startTime={format_ms(start)}&endTime={format_ms(end)}&limit=100{extra}",
        headers=AUTH,
    )
    assert response.status_code == 200, response.json
    return {row["value"]: row["count"] for row in response.json["counts"]}


WINDOWS = [
    (START, START + 2 * BLOCK - 1),  # two whole 16-day blocks
    (START + 3 * DAY + 5 * HOUR, START + 37 * DAY + 2 * HOUR),  # blocks, days, hours, part hours
    (START + 33 * DAY, START + 41 * DAY - 1),  # past the last built 4-day block
    (START + 39 * DAY + 7 * HOUR, START + 40 * DAY + 13 * HOUR + 5),  # 6-hour blocks, built and not
    (START, START + 41 * DAY),
    (START + 40 * DAY, START + 44 * DAY - 1),  # a whole 4-day block not summed yet
    (START + 40 * DAY + 18 * HOUR, START + 41 * DAY - 1),  # a whole 6-hour block not summed yet
    (START + 32 * DAY, START + 48 * DAY - 1),  # a whole 16-day block not summed yet
]


def assert_statistics_equal_records(client, sent):
    for start, end in WINDOWS:
        assert asked(client, start, end) == truth(sent, start, end), (format_ms(start), format_ms(end))
        assert asked(client, start, end, "&action[]=0") == truth(sent, start, end, action=0)


def dim_ids(database) -> dict[str, int]:
    """{dim description: its id}, from the stored layout."""
    (layout,) = run_sql(database, "SELECT value FROM store_setting WHERE name = 'rollup_layout'")[0]
    return {description: int(ident) for ident, _, description in (e.partition(":") for e in layout.split(";"))}


def block_periods(database, description: str) -> set[int]:
    dim = dim_ids(database)[description]
    return {row[0] for row in run_sql(database, "SELECT DISTINCT period FROM rollup WHERE dim = ?", [dim])}


@pytest.fixture
def sent(client):
    """41 days of records, a batch a day in time order, as a feed sends them."""
    found = []
    for day in range(41):
        found += day_of_records(day)
        ingest(client, *day_of_records(day))
    return found


def test_closed_blocks_are_summed_and_statistics_equal_the_records(app, client, sent):
    database = app.config["ANALYTICS_DATABASE"]
    # The newest record is on day 40: 16-day blocks 0 and 1 have closed, 2 has not; 4-day blocks
    # up to day 40; 6-hour blocks up to an hour before the newest record.
    assert block_periods(database, "question+action/23040m@all") == {START // BLOCK, START // BLOCK + 1}
    assert max(block_periods(database, "question+action/5760m@all")) == START // (4 * DAY) + 9
    assert_statistics_equal_records(client, sent)


def test_records_arriving_after_their_block_closed_count_in_it(client, sent):
    late = [record("e1", "x", format_ms(START + 2 * DAY + 3 * HOUR), "late.example", action=0) for _ in range(3)]
    late += [record("e2", "w", format_ms(START + 40 * DAY + 20 * HOUR), "a.example")]  # not closed yet
    ingest(client, *late)
    assert_statistics_equal_records(client, sent + late)


def test_a_deletion_takes_its_counts_out_of_built_and_open_blocks(client, sent):
    end = START + 39 * DAY + 10 * HOUR
    response = client.delete("/v2/client", json={"clientIds": ["y"], "endTime": format_ms(end)}, headers=AUTH)
    assert response.status_code == 200, response.json
    left = [item for item in sent if not (item["clientId"] == "y" and item["timestamp"] <= format_ms(end))]
    assert_statistics_equal_records(client, left)


def test_a_database_whose_blocks_were_counted_batch_by_batch_goes_on_from_them(app, client, sent):
    # As a database from before the marks: every block counted, the open ones too; no mark kept.
    database = app.config["ANALYTICS_DATABASE"]
    layout = dim_ids(database)
    for block, source, ratio in (("23040m", "1440m", 16), ("5760m", "1440m", 4), ("360m", "60m", 6)):
        dim, source_dim = (layout[f"question+action/{p}@all"] for p in (block, source))
        built = max(block_periods(database, f"question+action/{block}@all"))
        run_sql(
            database,
            f"INSERT INTO rollup (dim, period, endpoint, value, n) SELECT ?, period / {ratio}, endpoint, value, SUM(n)"
            f" FROM rollup WHERE dim = ? AND period >= ? GROUP BY period / {ratio}, endpoint, value",
            [dim, source_dim, (built + 1) * ratio],
        )
    run_sql(database, "DELETE FROM store_setting WHERE name = 'blocks_built_through'")
    more = day_of_records(41) + day_of_records(42) + [record("e1", "x", format_ms(START + 5 * DAY), "late.example")]
    ingest(client, *more)
    assert_statistics_equal_records(client, sent + more)
    assert asked(client, START, START + 43 * DAY) == truth(sent + more, START, START + 43 * DAY)
