"""Records frozen into blocks past the hot horizon (models/records/freezing.py), read back with the rows
(models/records/thawing.py), through the API."""

import csv
import io
import time

import pytest

import models.clients.activity
from models.records import blocks
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support import stores
from support.helpers import AUTH, clients, ingest, record

OLD_DAY = "2024-05-01"
HOUR, DAY = 3_600_000, 86_400_000
_QUESTION = blocks.COLUMNS.index("question")
WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2030-01-01T00:00:00Z"

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


def recent(seconds_ago: float, question: str):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))
    return record("ep1", "c1", stamp, question)


def log(client, query=""):
    response = client.get(f"/v2/activity-log?{WINDOW}&pageSize=100{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return [q["question"] for q in response.json["queries"]]


def frozen(database) -> int:
    return stores.scalar(database, "SELECT COALESCE(SUM(n), 0) FROM record_block")


def test_records_past_the_hot_horizon_are_frozen_and_read_back_with_the_rows(client, database):
    ingest(client, *[record("ep1", "c1", f"{OLD_DAY}T10:{i:02d}:00Z", f"old{i}.example") for i in range(5)])
    ingest(client, recent(60, "new0.example"), recent(30, "new1.example"))
    assert frozen(database) == 5, "the 2024 records are frozen, the last minute's are rows"
    assert stores.scalar(database, "SELECT COUNT(*) FROM record") == 2
    assert log(client) == ["new1.example", "new0.example", *[f"old{i}.example" for i in range(4, -1, -1)]]
    assert log(client, "&question[]=old3.example") == ["old3.example"], "a name found in the blocks' filters"
    count = client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"]
    assert count == 7


def test_a_record_arriving_late_for_a_frozen_hour_is_read_in_its_place(client, database):
    ingest(client, record("ep1", "c1", f"{OLD_DAY}T10:00:00Z", "first.example"))
    ingest(client, record("ep1", "c1", f"{OLD_DAY}T10:30:00Z", "third.example"))
    assert frozen(database) == 2
    ingest(client, record("ep1", "c1", f"{OLD_DAY}T10:15:00Z", "second.example"))
    assert frozen(database) == 3, "frozen in a block of its own for the same hour"
    assert stores.scalar(database, "SELECT COUNT(DISTINCT hour), COUNT(*) FROM record_block") == 1
    assert log(client) == ["third.example", "second.example", "first.example"]


def test_records_an_output_has_not_sent_stay_rows(client, database):
    made = {"kind": "http", "url": "http://127.0.0.1:9/x", "paused": True, "start": "oldest"}
    assert client.post("/v2/output", json=made, headers=AUTH).status_code == 201
    ingest(client, *[record("ep1", "c1", f"{OLD_DAY}T10:{i:02d}:00Z", f"old{i}.example") for i in range(3)])
    assert frozen(database) == 0, "the paused output's cursor is before them"
    assert stores.scalar(database, "SELECT COUNT(*) FROM record") == 3


def test_a_deletion_takes_its_records_out_of_the_blocks_and_leaves_the_others_packed(client, database):
    ingest(client, *[record("ep1", f"c{i % 2}", f"{OLD_DAY}T10:{i:02d}:00Z", f"q{i}.example") for i in range(6)])
    ingest(client, *[record("ep1", "c2", f"{OLD_DAY}T1{i + 1}:00:00Z", f"other{i}.example") for i in range(3)])
    assert frozen(database) == 9
    blocks_before = stores.scalar(database, "SELECT COUNT(*) FROM record_block")
    response = client.delete("/v2/activity-log?clientId[]=c0&endTime=2024-05-01T10:03:00Z", headers=AUTH)
    assert response.json == {"deletedCount": 2}
    assert log(client, "&clientId[]=c0&clientId[]=c1") == ["q5.example", "q4.example", "q3.example", "q1.example"]
    assert frozen(database) == 7 and stores.scalar(database, "SELECT COUNT(*) FROM record") == 0, "nothing melted"
    # c2's blocks (other hours) were not touched; the one block of hour 10 was packed again.
    assert stores.scalar(database, "SELECT COUNT(*) FROM record_block") == blocks_before
    count = client.get(f"/v2/statistic/count?{WINDOW}&clientId[]=c0", headers=AUTH).json["count"]
    assert count == 1, "counted down from the statistics"

    body = {"endpointIds": ["ep1"], "clientIds": ["c1"], "endTime": 2_000_000_000_000}
    assert client.delete("/v2/client", json=body, headers=AUTH).json["deletedCount"] == 1
    assert log(client) == ["other2.example", "other1.example", "other0.example", "q4.example"]
    assert frozen(database) == 4 and stores.scalar(database, "SELECT COUNT(*) FROM record") == 0
    assert client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 4
    entries = clients(client)["ep1"]["clients"]
    assert set(entries) == {"c0", "c2"} and entries["c0"]["lastActivityTime"] == "2024-05-01T10:04:00.000Z"


def test_an_export_reads_frozen_records_in_their_place_among_the_rows_of_their_hours(client, database):
    ingest(client, *[record("ep1", "c1", f"{OLD_DAY}T10:{i:02d}:00Z", f"a{i}.old.example.org") for i in (0, 2, 4)])
    ingest(client, record("ep2", "c1", f"{OLD_DAY}T10:03:00Z", "other.example.net"))
    assert frozen(database) == 4
    # An output from now on keeps what comes next as rows: a late record for the frozen hour.
    made = {"kind": "http", "url": "http://127.0.0.1:9/x", "paused": True, "start": "now"}
    assert client.post("/v2/output", json=made, headers=AUTH).status_code == 201
    ingest(client, record("ep1", "c1", f"{OLD_DAY}T10:01:00Z", "late.old.example.org", status="blocked"))
    assert frozen(database) == 4 and stores.scalar(database, "SELECT COUNT(*) FROM record") == 1

    def exported(query, window=WINDOW):
        response = client.get(f"/v2/activity-log/csv?{window}{query}", headers=AUTH)
        assert response.status_code == 200
        table = list(csv.reader(io.StringIO(response.get_data(as_text=True), newline="")))
        at = {name: i for i, name in enumerate(table[0])}
        return [(row[at["question"]], row[at["registrableDomain"]], row[at["endpointId"]]) for row in table[1:]]

    ep1 = [(f"a{i}.old.example.org", "example.org", "ep1") for i in (4, 2)]
    ep1 += [("late.old.example.org", "example.org", "ep1"), ("a0.old.example.org", "example.org", "ep1")]
    both = [*ep1[:1], ("other.example.net", "example.net", "ep2"), *ep1[1:]]
    assert exported("") == both, "the window alone: frozen records picked and merged in Python"
    assert exported("&sortOrder=asc") == both[::-1]
    assert exported("&endpointId[]=ep1") == ep1
    assert exported("&clientId[]=c1") == both, "a client named: the blocks' records staged for SQL"
    assert exported("", "startTime=2024-05-01T10:01:00Z&endTime=2024-05-01T10:03:00Z") == both[1:4]


def test_response_time_percentiles_rank_frozen_records_with_the_rows(client, database):
    old = [
        record("ep1", "a", f"{OLD_DAY}T10:0{i}:00Z", f"o{i}.example", responseTimeMs=ms)
        for i, ms in enumerate([1, 2, 3])
    ]
    ingest(client, *old)
    new = [
        {**recent(60 - i, f"n{i}.example"), "clientId": "b", "responseTimeMs": ms} for i, ms in enumerate([4, 10, 100])
    ]
    ingest(client, *new)
    assert frozen(database) == 3 and stores.scalar(database, "SELECT COUNT(*) FROM record") == 3
    body = client.get(f"/v2/statistic/latency?{WINDOW}", headers=AUTH).json
    # Nearest rank over 1 2 3 4 10 100: the median is the 3rd, the 95th percentile the 6th.
    assert (body["count"], body["p50Ms"], body["p95Ms"], body["maxMs"]) == (6, 3.0, 100.0, 100.0)
    groups = client.get(f"/v2/statistic/latency/clientId?{WINDOW}", headers=AUTH).json["latencies"]
    assert [(g["value"], g["count"], g["p50Ms"]) for g in groups] == [("a", 3, 2.0), ("b", 3, 10.0)]


def test_retention_drops_whole_blocks_and_melts_the_one_it_cuts_through(make_app, tmp_path, database):
    app = make_app(INSTANCE_PATH=str(tmp_path / "i"), ANALYTICS_RETENTION_DAYS=30)
    client = app.test_client()
    newest = now_ms() - 60_000
    cutoff = newest + 60_000 - 30 * DAY

    def at(ms, client_id, question):
        return record("ep1", client_id, format_ms(ms), question)

    ingest(
        client,
        *[at(cutoff - 3 * HOUR - i * 60_000, "gone", f"gone{i}.example") for i in range(3)],  # blocks before
        at(cutoff - 30_000, "cut", "before.example"),  # the block of the cutoff's hour (or the one before)
        at(cutoff + 30_000, "cut", "after.example"),
        at(cutoff + 3 * HOUR, "kept", "kept.example"),  # a block after
        at(newest, "kept", "new.example"),  # a row
    )
    assert frozen(database) == 6
    # From the start of the UTC day of the oldest record: past the records' horizon statistics
    # count whole days, so a window starting later in that day (as cutoff - DAY did between
    # 00:00 and 03:01 UTC) leaves that day out once the records are gone.
    oldest = cutoff - 3 * HOUR - 2 * 60_000
    window = f"startTime={format_ms(oldest // DAY * DAY)}&endTime={format_ms(now_ms() + DAY)}"
    assert client.get(f"/v2/statistic/count?{window}", headers=AUTH).json["count"] == 7
    result = app.test_cli_runner().invoke(args=["retention"])
    assert result.exit_code == 0, result.output
    assert "Deleted 4 records older than 30 days" in result.output
    left = client.get(f"/v2/activity-log?{window}", headers=AUTH).json["queries"]
    assert [q["question"] for q in left] == ["new.example", "kept.example", "after.example"]
    assert stores.records_scalar(database, "SELECT COUNT(*) FROM {records}") == 3
    assert stores.scalar(database, "SELECT COUNT(*) FROM record_block WHERE last_ts < ?", [cutoff]) == 0
    # The statistics keep what they counted: the records' own horizon is not theirs.
    assert client.get(f"/v2/statistic/count?{window}", headers=AUTH).json["count"] == 7
    last = {name: entry["lastActivityTime"] for name, entry in clients(client)["ep1"]["clients"].items()}
    assert last == {"gone": None, "cut": format_ms(cutoff + 30_000), "kept": format_ms(newest)}


def test_pages_over_frozen_hours_and_rows_follow_one_order(client, database):
    old = [
        record(
            "ep1",
            f"c{i % 3}",
            f"{OLD_DAY}T{10 + hour}:{i:02d}:00Z",
            f"h{hour}-{i}.example",
            statusCode=["NOERROR", "NXDOMAIN"][i % 2],
        )
        for hour in range(3)
        for i in range(7)
    ]
    ingest(client, *old)
    ingest(client, *[recent(100 - i, f"new{i}.example") for i in range(5)])
    assert frozen(database) == 21
    for query in ("", "&sortOrder=asc", "&clientId[]=c1", "&statusCode[]=NXDOMAIN", "&searchQuestion=h1-"):
        whole = log(client, query)
        pages = []
        for page in range(20):
            response = client.get(f"/v2/activity-log?{WINDOW}&pageSize=4&page={page}{query}", headers=AUTH)
            found = [q["question"] for q in response.json["queries"]]
            if not found:
                break
            pages += found
        assert pages == whole, query
        assert len(whole) == {"": 26, "&sortOrder=asc": 26, "&clientId[]=c1": 11, "&statusCode[]=NXDOMAIN": 9}.get(
            query, 7
        )


def test_a_busy_hour_is_shared_out_by_client_and_read_whole(client, database):
    # 600 records of one endpoint's hour, 12 clients: three blocks of about 200, each holding
    # whole clients, so that a read after one client unpacks a third of the hour.
    busy = [
        record("ep1", f"c{i % 12}", f"{OLD_DAY}T10:{i // 10:02d}:{i % 10:02d}Z", f"n{i % 40}.example")
        for i in range(600)
    ]
    ingest(client, *busy)
    assert frozen(database) == 600
    shares = stores.run_sql(database, "SELECT n, client_filter FROM record_block ORDER BY id")
    assert [n for n, _ in shares] == [200, 200, 200]
    entries = dict(stores.run_sql(database, "SELECT client_id, id FROM client"))
    held = [sorted(name for name, entry in entries.items() if blocks.may_hold(bytes(f), [entry])) for _, f in shares]
    assert sorted(name for names in held for name in names) == sorted(entries), "each client in one share"
    assert all(len(names) < 12 for names in held)
    counts = client.get(f"/v2/statistic/count/question?{WINDOW}&clientId[]=c5", headers=AUTH).json
    assert {c["value"]: c["count"] for c in counts["counts"]} == {f"n{(5 + 12 * k) % 40}.example": 5 for k in range(10)}
    assert log(client, "&clientId[]=c5")[:3] == ["n33.example", "n21.example", "n9.example"]
    deleted = client.delete("/v2/client", json={"endpointIds": ["ep1"], "clientIds": ["c5"]}, headers=AUTH)
    assert deleted.json["deletedCount"] == 1
    assert frozen(database) == 550 and client.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 550


def names_in_blocks(database) -> set:
    """(question, hour, block) of every name each block holds, read from the blocks' data."""
    held = set()
    for ident, hour, data in stores.run_sql(database, "SELECT id, hour, data FROM record_block"):
        held |= {(question, hour, ident) for (question,) in blocks.unpack(bytes(data), only={_QUESTION})}
    return held


def postings(database) -> set:
    return set(stores.run_sql(database, "SELECT question, hour, block FROM block_question"))


def test_the_blocks_a_name_is_in_are_kept_as_blocks_are_made_packed_again_and_melted(client, database):
    # A search reads the blocks holding its names from block_question alone, with no filter
    # behind it: a block missing there would be a record missing from the search.
    busy = [
        record("ep1", f"c{i % 12}", f"{OLD_DAY}T10:{i // 10:02d}:{i % 10:02d}Z", f"n{i % 40}.example")
        for i in range(600)
    ]
    ingest(client, *busy, *[record("ep2", "c1", f"{OLD_DAY}T1{h}:00:00Z", "lone.example") for h in range(3)])
    ingest(client, record("ep1", "c0", f"{OLD_DAY}T10:30:30Z", "late.example"))  # a block of its own
    assert frozen(database) == 604
    made = postings(database)
    assert made == names_in_blocks(database) and len(made) == 3 * 40 + 3 + 1

    deleted = client.delete("/v2/client", json={"endpointIds": ["ep1"], "clientIds": ["c5"]}, headers=AUTH)
    assert deleted.json["deletedCount"] == 1, "its share of the hour packed again without it"
    unlogged = client.put("/v2/client/logging/ep2/c1", json={"logged": False}, headers=AUTH)
    assert unlogged.status_code == 200, unlogged.json
    assert frozen(database) == 551 and postings(database) == names_in_blocks(database) != made

    assert log(client, "&searchQuestion=late.example&searchQuestionMode=apex") == ["late.example"]
    assert log(client, "&question[]=n5.example&question[]=lone.example") == ["n5.example"] * 10
    assert log(client, "&searchQuestion=n17.&searchQuestionMode=startsWith&clientId[]=c5") == []


def test_counts_of_clients_frozen_records_follow_the_window_to_the_millisecond(client, database):
    # Counted from the blocks in Python (filters naming clients and endpoints only): a block's
    # hour reaches past the window's edges, which must be kept to.
    ingest(
        client,
        *[record("ep1", "ab"[i % 2], f"{OLD_DAY}T10:{i:02d}:{i % 7:02d}Z", f"n{i % 5}.example") for i in range(60)],
        *[record("ep2", "a", f"{OLD_DAY}T1{i}:30:00Z", "other.example") for i in range(3)],
    )
    assert frozen(database) == 63
    for start, end in [("10:07:03.500", "10:31:04.250"), ("09:00:00", "10:20:06.001"), ("10:59:00", "12:30:00")]:
        window = f"startTime={OLD_DAY}T{start}Z&endTime={OLD_DAY}T{end}Z"
        for filters in ("&clientId[]=a", "&clientId[]=a&endpointId[]=ep1", "&clientId[]=b&clientId[]=a"):
            query = f"{window}{filters}"
            found = client.get(f"/v2/activity-log?{query}&pageSize=100", headers=AUTH).json["queries"]
            listed = [q["question"] for q in found]
            count = client.get(f"/v2/statistic/count?{query}", headers=AUTH).json["count"]
            assert count == len(listed), (start, end, filters)
            names = client.get(f"/v2/statistic/count/question?{query}&limit=100", headers=AUTH).json["counts"]
            assert {c["value"]: c["count"] for c in names} == {n: listed.count(n) for n in set(listed)}
            series = client.get(f"/v2/statistic/timeseries?{query}&interval=900", headers=AUTH).json["queries"]
            assert sum(point["count"] for point in series) == count


def test_an_export_builds_a_busy_frozen_hour_in_spans_of_time(client, database, monkeypatch):
    monkeypatch.setattr(models.clients.activity, "EXPORT_RECORDS", 3)
    # 20 records of one hour, two clients (a block is ordered by client), some in the same ms.
    # Records a ms apart too: a span's last ms holds records.
    seconds = (0, 1, 1, 1, 2, 2.999, 3, 3, 4, 5, 5.999, 6, 7, 7, 8, 9, 9, 9, 9, 10)
    stamps = [f"{OLD_DAY}T10:00:{second:06.3f}Z" for second in seconds]
    ingest(client, *[record("ep1", f"c{i % 2}", stamp, f"q{i}.example") for i, stamp in enumerate(stamps)])
    assert frozen(database) == 20
    made = {"kind": "http", "url": "http://127.0.0.1:9/x", "paused": True, "start": "now"}
    assert client.post("/v2/output", json=made, headers=AUTH).status_code == 201
    ingest(client, record("ep1", "c1", f"{OLD_DAY}T10:00:03Z", "late.example"))  # a row of that hour
    assert frozen(database) == 20

    def exported(order):
        response = client.get(f"/v2/activity-log/csv?{WINDOW}&sortOrder={order}", headers=AUTH)
        table = list(csv.reader(io.StringIO(response.get_data(as_text=True), newline="")))
        return [row[table[0].index("question")] for row in table[1:]]

    newest_first = log(client)
    assert len(newest_first) == 21 and exported("desc") == newest_first
    assert exported("asc") == newest_first[::-1]


def test_a_clients_first_seen_names_come_from_its_first_frozen_records(client, database):
    ingest(
        client,
        *[
            record("ep1", who, f"{OLD_DAY}T10:{minute}:00Z", name)
            for who, minute, name in [
                ("c2", "01", "a.example"),  # another client's: not c1's first
                ("c1", "05", "a.example"),
                ("c1", "20", "b.example"),
                ("c1", "50", "a.example"),
                ("c1", "55", "c.example"),
            ]
        ],
    )
    assert frozen(database) == 5

    def first_seen(start, end):
        window = f"startTime={OLD_DAY}T10:{start}:00Z&endTime={OLD_DAY}T10:{end}:00Z"
        response = client.get(f"/v2/statistic/first-seen/question?{window}&clientId[]=c1", headers=AUTH)
        return [(n["value"], n["firstSeen"][11:16], n["count"]) for n in response.json["names"]]

    assert first_seen("00", "59") == [("c.example", "10:55", 1), ("b.example", "10:20", 1), ("a.example", "10:05", 2)]
    assert first_seen("10", "59") == [("c.example", "10:55", 1), ("b.example", "10:20", 1)], "a.example was older"
    assert first_seen("00", "30") == [("b.example", "10:20", 1), ("a.example", "10:05", 1)], "none after the end"
