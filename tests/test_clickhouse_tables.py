"""The ClickHouse record store's first step (docs/clickhouse.md "The plan"): the setting read,
and refused at start while the store is incomplete; the tables made on chDB, their views filled,
an insert sent twice stored once; one process a chDB folder; a cluster's statements."""

import os
import subprocess
import sys
import textwrap
import time

import dnstap_pb
import pytest
from test_dnstap import dnstap_response, send_and_stop

from feeds import sinks
from models.clickhouse import connection, tables
from models.clickhouse.target import BadTarget, Target, from_settings, parse

from support import stores
from support.chdb import record_row
from support.collecting import FEED, Collector, short_folder, store_process
from support.helpers import API_KEY
from support.servers import ROOT, Gunicorn, free_port, niceness, refuse_in_fast_lane, thread_name

# The ClickHouse store held to the SQL one: the `engine` is the SQL store's (chDB is the other side).
pytestmark = pytest.mark.sql_store


def test_a_setting_names_a_server_or_a_folder():
    assert parse("clickhouse://reader:s%40cret@ch.example:9000/dns?cluster=farm") == Target(
        database="dns", host="ch.example", port=9000, user="reader", password="s@cret", cluster="farm"
    )
    assert parse("clickhouses://ch.example/dns") == Target(database="dns", host="ch.example", port=8443, secure=True)
    assert parse("clickhouse://ch.example") == Target(database="default", host="ch.example")
    assert parse("chdb:///var/lib/dns//records/") == Target(database="analytics", folder="/var/lib/dns/records")
    assert parse("chdb:///srv/ch?database=lab") == Target(database="lab", folder="/srv/ch")
    # What a message shows of a server leaves its password out.
    assert str(parse("clickhouse://u:pw@h:1/d")) == "clickhouse://u@h:1/d"


@pytest.mark.parametrize(
    "text, said",
    [
        ("chdb://records", "chdb:// takes a folder, not a host ('records'): write chdb:///ABSOLUTE/FOLDER"),
        ("chdb:///", "chdb:// needs an absolute folder, not '/'"),
        ("chdb:///srv/ch?cluster=farm", "?cluster= is for a ClickHouse server; chDB is one process"),
        ("chdb:///srv/ch?shards=2", "unknown option 'shards' (the one option is ?database=NAME)"),
        ("chdb:///srv/ch?database=a-b", "the database 'a-b' is not a plain name"),
        ("clickhouse:///dns", "a ClickHouse server needs a host"),
        ("clickhouse://h/dns?shards=2", "unknown option 'shards' (the one option is ?cluster=NAME)"),
        ("clickhouse://h/dns-1", "the database 'dns-1' is not a plain name"),
        ("clickhouse://h/dns?cluster=", "the cluster '' is not a plain name"),
        ("clickhouse://h:port/dns", "Port could not be cast to integer value"),
        ("postgresql://h/dns", "'postgresql' is not a ClickHouse: use clickhouse://"),
        ("/srv/records", "'/srv/records' is not a ClickHouse"),
    ],
)
def test_a_setting_that_names_no_clickhouse_is_refused_saying_why(text, said):
    with pytest.raises(BadTarget) as refused:
        parse(text)
    assert str(refused.value).startswith("ANALYTICS_RECORD_STORE: ")
    assert said in str(refused.value)


def test_unset_the_records_stay_in_the_database_and_set_it_names_the_clickhouse():
    assert from_settings({}) is None
    assert from_settings({"ANALYTICS_RECORD_STORE": " "}) is None
    assert from_settings({"ANALYTICS_RECORD_STORE": "chdb:///srv/records"}) == Target("analytics", "/srv/records")
    with pytest.raises(BadTarget, match="not a ClickHouse"):  # a wrong value says what is wrong with it
        from_settings({"ANALYTICS_RECORD_STORE": "mysql://h/d"})


def test_a_local_feed_stores_into_chdb_and_one_worker_serves_it(tmp_path):
    """The chDB form end to end, each in a process of its own as an install runs them: a feed's
    local sink stores into the folder; gunicorn given two workers refuses it in one line; with
    one worker it serves what the feed stored, and a feed run meanwhile is refused, naming the
    process that has the folder."""
    refuse_in_fast_lane("gunicorn")
    environment = {
        **os.environ,
        "ANALYTICS_DATABASE": str(tmp_path / "analytics.db"),
        "ANALYTICS_RECORD_STORE": f"chdb://{tmp_path}/records",
        "ANALYTICS_API_KEY": API_KEY,
    }
    lines = tmp_path / "records.ndjson"
    lines.write_text('{"endpointId": "home", "clientId": "laptop", "question": "example.com"}\n')
    feed = [sys.executable, "-m", "feeds", "ingest", str(lines)]
    stored = subprocess.run(feed, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120)
    assert stored.returncode == 0, stored.stderr
    two = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "-w", "2", "-b", f"127.0.0.1:{free_port()}"]
        + ["wsgi:app"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert two.returncode != 0
    assert "is opened by one process, and gunicorn was given 2 workers: run it with -w 1" in two.stderr
    assert "Traceback" not in two.stderr, two.stderr
    server = Gunicorn(tmp_path, environment, workers=1)  # started: it answers
    try:
        status, body = server.call("GET", "/v2/activity-log?startTime=-1d", headers={"Authorization": API_KEY})
        assert status == 200 and [q["question"] for q in body["queries"]] == ["example.com"], body
        status, _ = server.call("GET", "/v2/statistic/count?startTime=-1d", headers={"Authorization": API_KEY})
        assert status == 200
        more = tmp_path / "more.ndjson"
        more.write_text('{"endpointId": "home", "clientId": "tv", "question": "example.org"}\n')
        meanwhile = subprocess.run(
            [*feed[:-1], str(more)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
        )
        assert meanwhile.returncode != 0
        assert f"chdb://{tmp_path}/records is open in process " in meanwhile.stderr
        assert "Traceback" not in meanwhile.stderr, meanwhile.stderr
    finally:
        server.stop()


def test_a_collectors_local_sink_stores_into_chdb(tmp_path, monkeypatch):
    """collect-dnstap with its local sink on a chDB folder: the store's process stores the
    batches, so the collector, once sure at its start that it can open the folder, lets it go
    (it kept it, and every batch failed: the folder was open in another process, its own). It
    stores batches of 5,000 by default (a ClickHouse insert's fixed cost), and its store's
    process, ClickHouse's threads with it, gives way to the reading one."""
    database = str(tmp_path / "analytics.db")
    monkeypatch.setenv("ANALYTICS_RECORD_STORE", f"chdb://{tmp_path}/records")
    port = free_port()
    with short_folder("chdb-dnstap-") as folder:
        collector = Collector(folder, database, "--listen", f"127.0.0.1:{port}", program=FEED)
        send_and_stop(port, [dnstap_response(name, protocol=dnstap_pb.UDP) for name in ("one.example", "two.example")])
        # Stored once the record numbers' counter (in ANALYTICS_DATABASE) has moved past them.
        numbered = "SELECT value FROM store_setting WHERE name = 'clickhouse_numbered_through'"
        deadline = time.monotonic() + 30
        while stores.run_sql(database, numbered) != [("2",)] and time.monotonic() < deadline:
            time.sleep(0.1)
        store = store_process(collector.process.pid)
        assert niceness(store) == min(19, niceness(collector.process.pid) + sinks.STORE_NICENESS)
        # (ClickHouse's memory worker raises its own priority where it may: it frees memory)
        threads = {
            thread: niceness(store, thread)
            for thread in os.listdir(f"/proc/{store}/task")
            if thread_name(store, thread) not in ("MemoryWorker", None)
        }
        assert set(threads.values()) - {None} == {niceness(store)}, threads
        assert "MergeMutate" in {thread_name(store, thread) for thread in threads}
        assert collector.stop() == 0
        said = collector.output()
    assert "2 records delivered" in said and "NOT delivered" not in said, said
    assert "Storing batches of up to 5000 records (--batch-size), 50000 when" in said, said
    environment = {
        **os.environ,
        "ANALYTICS_DATABASE": database,
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_RETENTION_DAYS": "0",
    }
    server = Gunicorn(tmp_path, environment, workers=1)
    try:
        window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
        status, body = server.call("GET", f"/v2/activity-log?{window}", headers={"Authorization": API_KEY})
        assert status == 200 and sorted(q["question"] for q in body["queries"]) == ["one.example", "two.example"]
        # The export as ClickHouse writes it, streamed by the worker: the header and a line each.
        status, text = server.fetch("GET", f"/v2/activity-log/csv?{window}", headers={"Authorization": API_KEY})
        lines = text.decode().split("\r\n")
        assert status == 200 and len(lines) == 4 and lines[-1] == "", text
        assert [line.split(",")[4] for line in lines[1:3]] == ["two.example", "one.example"], text
    finally:
        server.stop()


def test_records_go_in_and_come_back_as_they_were(clickhouse):
    rows = [
        record_row(1, 1_700_000_000_123),
        record_row(
            2,
            1_700_000_000_999,
            client="phone",
            question="ünïcode.example",
            answers='["192.0.2.1"]',
            response_time_ms=12.5,
            cached=True,
            src_asn=2**63 - 1,
            dst_asn=-(2**63),
            action=-1,
        ),
        record_row(3, 1_600_000_000_000, endpoint="office", src_ip="2001:db8::1", spoof_target='a,"b"\nc'),
    ]
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, rows, times=tables.TIME_COLUMNS)
    columns = ", ".join("toUnixTimestamp64Milli(ts)" if c == "ts" else c for c in tables.RECORD_COLUMNS)
    back = clickhouse.rows(f"SELECT {columns} FROM analytics.records ORDER BY id")
    assert back == rows


def test_the_views_keep_last_activity_and_first_seen(clickhouse):
    rows = [
        record_row(1, 1_700_000_000_000, question="a.example"),
        record_row(2, 1_700_000_005_000, question="a.example", client="phone"),
        record_row(3, 1_699_000_000_000, question="a.example", endpoint="office"),
    ]
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, rows[:2], times=tables.TIME_COLUMNS)
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, rows[2:], times=tables.TIME_COLUMNS)
    assert clickhouse.rows(
        "SELECT endpoint, client, toUnixTimestamp64Milli(max(ts)) FROM analytics.last_activity "
        "GROUP BY endpoint, client ORDER BY endpoint, client"
    ) == [
        ("home", "laptop", 1_700_000_000_000),
        ("home", "phone", 1_700_000_005_000),
        ("office", "laptop", 1_699_000_000_000),
    ]
    assert clickhouse.rows(
        "SELECT endpoint, toUnixTimestamp64Milli(min(first)), toUnixTimestamp64Milli(max(last)) "
        "FROM analytics.names_seen WHERE question = {q:String} GROUP BY endpoint ORDER BY endpoint",
        {"q": "a.example"},
    ) == [
        ("", 1_699_000_000_000, 1_700_000_005_000),
        ("home", 1_700_000_000_000, 1_700_000_005_000),
        ("office", 1_699_000_000_000, 1_699_000_000_000),
    ]


def test_an_insert_sent_again_with_its_token_is_stored_once(clickhouse):
    batch = [record_row(1, 1_700_000_000_000), record_row(2, 1_700_000_000_001)]
    for _ in range(2):
        clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, batch, times=tables.TIME_COLUMNS, token="b-1")
        # The views are fed once too (one row: the batch's one client, nothing to merge it with).
        assert clickhouse.rows("SELECT count() FROM analytics.last_activity") == [(1,)]
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, batch[:1], times=tables.TIME_COLUMNS, token="b-2")
    assert clickhouse.rows("SELECT count() FROM analytics.records") == [(3,)]


def test_making_the_tables_again_changes_nothing(clickhouse):
    clickhouse.insert("analytics.records", tables.RECORD_COLUMNS, [record_row(1, 1_700_000_000_000)], times=("ts",))
    tables.create(clickhouse)
    assert clickhouse.rows("SELECT count() FROM analytics.records") == [(1,)]
    assert clickhouse.rows("SELECT count() FROM analytics.last_activity") == [(1,)]


def test_tables_made_before_rows_were_numbered_are_brought_up_to_it(clickhouse):
    """The tables a view fills, as made before `made` (models/clickhouse/derived.py) was in
    their key: made again, they have it, and their rows stay."""
    target = Target(database="earlier", folder=clickhouse.target.folder)
    earlier = clickhouse.on_database(target)
    try:
        for statement in tables.statements(target):
            earlier.command(statement.replace(",\n    made UInt64", "").replace(", made)", ")"))
        keys = "SELECT name, sorting_key FROM system.tables WHERE database = 'earlier' AND sorting_key LIKE '%made%'"
        assert earlier.rows(keys) == []
        earlier.insert("earlier.records", tables.RECORD_COLUMNS, [record_row(1, 1_700_000_000_000)], times=("ts",))
        assert tables.upgrades(earlier)
        tables.create(earlier)
        assert sorted(earlier.rows(keys)) == [
            ("last_activity", "endpoint, client, made"),
            ("names_seen", "endpoint, question, registrable_domain, made"),
        ]
        assert tables.upgrades(earlier) == []
        assert earlier.rows("SELECT client, made FROM earlier.last_activity") == [("laptop", 0)]
        assert earlier.rows("SELECT endpoint, made FROM earlier.names_seen ORDER BY endpoint") == [("", 0), ("home", 0)]
    finally:
        earlier.command("DROP DATABASE IF EXISTS earlier")


def test_counts_made_before_hours_were_counted_are_brought_up_to_them(clickhouse):
    """The counts table and its view as made before hours and quarter hours were counted
    (`period`): made again, the table has it in its key, its rows stay (a day's own: period 0),
    the view counts the hours of what comes next, and the comment says from when."""
    target = Target(database="before_hours", folder=clickhouse.target.folder)
    earlier = clickhouse.on_database(target)
    try:
        for statement in tables.statements(target):
            if "daily_counts_view" in statement:
                statement = (
                    "CREATE MATERIALIZED VIEW before_hours.daily_counts_view TO before_hours.daily_counts AS "
                    "SELECT toDate32(ts) AS day, '' AS field, CAST(endpoint AS String) AS endpoint, '' AS value, "
                    "'' AS second, '' AS domain, toInt64(count()) AS n FROM before_hours.records GROUP BY day, endpoint"
                )
            elif "before_hours.daily_counts (" in statement:
                statement = statement.replace(",\n    period UInt8", "").replace(", period)", ")")
                statement = statement.replace(f"\nCOMMENT '{tables.SHORT_FROM}0'", "")
            earlier.command(statement)
        earlier.insert("before_hours.records", tables.RECORD_COLUMNS, [record_row(1, 1_700_000_000_000)], times=("ts",))
        assert tables.short_counts_from(earlier) == 0  # (no comment: read as counted from the start)
        assert tables.upgrades(earlier)
        now = time.time() * 1000
        tables.create(earlier)
        tomorrow = (int(now) // 86_400_000 + 1) * 86_400_000
        assert tables.short_counts_from(earlier) == tomorrow
        assert earlier.rows(
            "SELECT sorting_key FROM system.tables WHERE database = 'before_hours' AND name = 'daily_counts'"
        ) == [("field, endpoint, value, second, period",)]
        assert tables.upgrades(earlier) == []
        earlier.insert("before_hours.records", tables.RECORD_COLUMNS, [record_row(2, 1_700_003_700_000)], times=("ts",))
        assert earlier.rows(
            "SELECT toString(day), period, field, n FROM before_hours.daily_counts WHERE field IN ('', '/60m') "
            "ORDER BY day, field, period"
        ) == [("2023-11-14", 0, "", 1), ("2023-11-14", 0, "", 1), ("2023-11-14", 23, "/60m", 1)]
    finally:
        earlier.command("DROP DATABASE IF EXISTS before_hours")


def test_counts_made_with_the_earlier_columns_get_these_types_and_codecs(clickhouse):
    """The counts table as made before a client's names were counted (`second` and `n` with the
    default codec, `domain` a plain String): made again, the three are as tables.py makes them
    now, its rows stay, and a second start changes nothing."""
    target = Target(database="earlier_codecs", folder=clickhouse.target.folder)
    earlier = clickhouse.on_database(target)
    earlier_kinds = {"second": "LowCardinality(String)", "domain": "String CODEC(ZSTD(1))", "n": "Int64"}
    now_kinds = dict(next(table for table in tables.TABLES if table.name == "daily_counts").columns)
    try:
        for statement in tables.statements(target):
            for column, kind in earlier_kinds.items():
                statement = statement.replace(f"    {column} {now_kinds[column]}", f"    {column} {kind}")
            earlier.command(statement)
        kinds = (
            "SELECT name, type, compression_codec FROM system.columns WHERE database = 'earlier_codecs' "
            "AND table = 'daily_counts' AND name IN ('second', 'domain', 'n') ORDER BY name"
        )
        assert earlier.rows(kinds) == [
            ("domain", "String", "CODEC(ZSTD(1))"),
            ("n", "Int64", ""),
            ("second", "LowCardinality(String)", ""),
        ]
        earlier.insert(
            "earlier_codecs.records", tables.RECORD_COLUMNS, [record_row(1, 1_700_000_000_000)], times=("ts",)
        )
        assert tables.upgrades(earlier)
        tables.create(earlier)
        assert earlier.rows(kinds) == [
            ("domain", "LowCardinality(String)", "CODEC(ZSTD(3))"),
            ("n", "Int64", "CODEC(T64, ZSTD(1))"),
            ("second", "LowCardinality(String)", "CODEC(ZSTD(3))"),
        ]
        assert tables.upgrades(earlier) == []
        assert earlier.rows(
            "SELECT second, domain, sum(n) FROM earlier_codecs.daily_counts WHERE field = 'client+question' "
            "GROUP BY second, domain"
        ) == [("example.com", "example.com", 1)]
    finally:
        earlier.command("DROP DATABASE IF EXISTS earlier_codecs")


def test_records_made_with_the_n_gram_index_get_the_names_bloom_filter(clickhouse):
    """The records as made before the log's searches found their names first: made again, the
    n-gram index is gone, and the bloom filter on the names is there, built for the parts."""
    target = Target(database="before_names", folder=clickhouse.target.folder)
    earlier = clickhouse.on_database(target)
    asked = "INDEX asked question TYPE bloom_filter(0.01) GRANULARITY 1"
    n_grams = tables._RETIRED_INDEXES["records"][0]
    try:
        for statement in tables.statements(target):
            earlier.command(statement.replace(asked, n_grams))
        earlier.insert("before_names.records", tables.RECORD_COLUMNS, [record_row(1, 1_700_000_000_000)], times=("ts",))
        indexes = "SELECT name, type FROM system.data_skipping_indices WHERE database = 'before_names' ORDER BY name"
        assert ("names", "ngrambf_v1") in earlier.rows(indexes)
        tables.create(earlier)
        assert earlier.rows(indexes) == [("asked", "bloom_filter"), ("clients", "bloom_filter"), ("numbers", "minmax")]
        assert tables.upgrades(earlier) == []
        assert earlier.rows(
            "SELECT count() FROM before_names.records WHERE question IN ('example.com') "
            "SETTINGS force_data_skipping_indices = 'asked'"
        ) == [(1,)]
    finally:
        earlier.command("DROP DATABASE IF EXISTS before_names")


def test_a_chdb_folder_serves_one_process(clickhouse, tmp_path):
    folder = clickhouse.target.folder
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                from models.clickhouse import connection
                from models.clickhouse.target import Target
                try:
                    connection.connect(Target(database="analytics", folder={folder!r}))
                except connection.FolderInUse as refused:
                    print(refused)
            """),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.stdout.strip() == (
        f"ANALYTICS_RECORD_STORE: chdb://{folder} is open in process {os.getpid()}: chDB lets one process "
        "open a folder, so the service runs with one worker (-w 1) and feeds send to it with --url "
        "(or use a ClickHouse server: clickhouse://...)"
    ), other.stderr
    # In this process: the same folder is the same connection, another one is refused by name.
    assert connection.connect(clickhouse.target) is clickhouse
    with pytest.raises(connection.FolderInUse, match="chDB opens one folder a process"):
        connection.connect(Target(database="analytics", folder=str(tmp_path / "elsewhere")))


def test_a_processs_threads_opening_the_store_at_once_share_one_connection(tmp_path):
    """A worker's threads (a request, the retention and delivery loops) reach for the store as it
    starts: each gets the one connection, none is refused by the folder's lock as if another
    process had it (which is what two openings in one process did)."""
    opened = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import threading
                from models.clickhouse.target import Target
                from models.stores.clickhouse import ClickHouseStore

                store = ClickHouseStore(Target(database="analytics", folder={str(tmp_path / "records")!r}))
                together, got = threading.Barrier(8), []

                def reach():
                    together.wait()
                    try:
                        got.append(store.connection)
                    except Exception as failed:
                        got.append(failed)

                threads = [threading.Thread(target=reach) for _ in range(8)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                print(len(got), len(set(map(id, got))), [str(g) for g in got if isinstance(g, Exception)])
            """),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert opened.stdout.strip() == "8 1 []", opened.stdout + opened.stderr


def test_a_cluster_gets_replicated_tables_behind_distributed_ones():
    made = tables.statements(parse("clickhouse://h/dns?cluster=farm"))
    assert made[0] == "CREATE DATABASE IF NOT EXISTS dns ON CLUSTER farm"
    assert all(" ON CLUSTER farm" in statement for statement in made)
    for table in tables.TABLES:
        local = next(s for s in made if s.startswith(f"CREATE TABLE IF NOT EXISTS dns.{table.name}_local "))
        assert (
            f"ENGINE = Replicated{table.engine}('/clickhouse/tables/{{shard}}/dns/{table.name}', '{{replica}}')"
            in local
        )
        assert "non_replicated_deduplication_window" not in local
        assert (
            f"CREATE TABLE IF NOT EXISTS dns.{table.name} ON CLUSTER farm AS dns.{table.name}_local "
            f"ENGINE = Distributed(farm, dns, {table.name}_local, {table.sharding})"
        ) in made
        if table.filled_by:
            view = next(s for s in made if f"VIEW IF NOT EXISTS dns.{table.name}_view " in s)
            assert f" TO dns.{table.name}_local AS " in view
            assert "FROM dns.records_local " in view
    # One ClickHouse: plain tables, no cluster, inserts deduplicated by their tokens.
    single = tables.statements(parse("clickhouse://h/dns"))
    assert not any("CLUSTER" in s or "Replicated" in s or "Distributed" in s for s in single)
    assert "SETTINGS non_replicated_deduplication_window = 10000" in single[1]
