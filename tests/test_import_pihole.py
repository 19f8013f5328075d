"""flask import-pihole: Pi-hole's FTL database, built here with FTL's own table layout."""

import hashlib
import os
import sqlite3

import pytest

from schemas.datetimes import format_ms

from support.helpers import AUTH, clients, samples
from support.importing import (
    AAAA,
    CNAME_OTHER,
    HTTPS,
    IP,
    NXDOMAIN,
    SERVFAIL,
    T0,
    A,
    count_rows,
    crash_in_third_batch,
    logged,
    make_ftl_db,
    questions,
)


def add_query(path, ts, domain, client_ip, status=2, *, qtype=A, reply=IP, list_id=None, name=None):
    """One query as FTL stores it: strings through the linking tables, ids in query_storage."""
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT OR IGNORE INTO domain_by_id (domain) VALUES (?)", [domain])
        domain_id = conn.execute("SELECT id FROM domain_by_id WHERE domain = ?", [domain]).fetchone()[0]
        conn.execute("INSERT OR IGNORE INTO client_by_id (ip, name) VALUES (?, ?)", [client_ip, name])
        client_id = conn.execute(
            "SELECT id FROM client_by_id WHERE ip = ? AND name IS ?", [client_ip, name]
        ).fetchone()[0]
        return conn.execute(
            "INSERT INTO query_storage (timestamp, type, status, domain, client, reply_type, list_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [ts, qtype, status, domain_id, client_id, reply, list_id],
        ).lastrowid


@pytest.fixture
def ftl(tmp_path):
    return make_ftl_db(str(tmp_path / "pihole-FTL.db"))


def by_question(client) -> dict[str, dict]:
    return {r["question"]: r for r in logged(client)}


def unknown_as_none(value):
    return None if value == "" else value  # the activity log writes unknown text as ""


def test_statuses_reply_types_and_lists_map_onto_action_trigger_and_status(runner, client, ftl):
    add_query(ftl, T0, "forwarded.example", "192.168.1.10", 2, qtype=AAAA)
    add_query(ftl, T0 + 1, "cached.example", "192.168.1.10", 3, qtype=HTTPS)
    add_query(ftl, T0 + 2, "ads.example", "192.168.1.10", 1, reply=IP, list_id=3)
    add_query(ftl, T0 + 3, "cname.example", "192.168.1.10", 9, reply=NXDOMAIN)
    add_query(ftl, T0 + 4, "regex.example", "192.168.1.20", 4, reply=NXDOMAIN, list_id=12)
    add_query(ftl, T0 + 5, "deny.example", "192.168.1.20", 5, list_id=7)
    add_query(ftl, T0 + 6, "upstream.example", "192.168.1.20", 7)
    add_query(ftl, T0 + 7, "broken.example", "192.168.1.20", 2, reply=SERVFAIL)
    add_query(ftl, T0 + 8, "allowed.example", "192.168.1.20", 2, list_id=5)
    add_query(ftl, T0 + 9, "mask.icloud.com", "192.168.1.20", 16, reply=NXDOMAIN)
    add_query(ftl, T0 + 10, "new.example", "192.168.1.20", 0, qtype=CNAME_OTHER, reply=0)
    add_query(ftl, T0 + 11, "other.example", "192.168.1.20", 17, qtype=14)

    result = runner.invoke(args=["import-pihole", ftl])
    assert result.exit_code == 0, result.output
    assert "Imported 12 records" in result.output and "nothing skipped" in result.output

    got = by_question(client)
    expected = {
        # question: (action, trigger, triggerValue, statusCode, rrType)
        "forwarded.example": (1, "default", None, "NOERROR", "AAAA"),
        "cached.example": (1, "default", None, "NOERROR", "HTTPS"),
        "ads.example": (0, "filter", "adlist:3", "NOERROR", "A"),
        "cname.example": (0, "filter", "gravity", "NXDOMAIN", "A"),
        "regex.example": (0, "custom", "regex:12", "NXDOMAIN", "A"),
        "deny.example": (0, "custom", "denylist:7", "NOERROR", "A"),
        "upstream.example": (0, "filter", "upstream", "NOERROR", "A"),
        "broken.example": (-1, "default", None, "SERVFAIL", "A"),
        "allowed.example": (1, "custom", "allowlist:5", "NOERROR", "A"),
        "mask.icloud.com": (0, "default", "special-domain", "NXDOMAIN", "A"),
        "new.example": (None, None, None, None, "CNAME"),
        "other.example": (1, "default", None, "NOERROR", None),
    }
    for question, fields in expected.items():
        record = got[question]
        names = ("action", "trigger", "triggerValue", "statusCode", "rrType")
        assert tuple(unknown_as_none(record[name]) for name in names) == fields, question
        assert record["protocol"] == "legacy"
        assert record["endpointId"] == "pihole"
    assert got["forwarded.example"]["timestamp"] == "2024-05-01T12:00:00.000Z"
    assert got["forwarded.example"]["sourceIp"] == "192.168.1.10"


def test_client_entries_get_ip_mac_vendor_and_host_from_the_network_tables(runner, client, ftl):
    add_query(ftl, T0, "a.example", "192.168.1.10")
    add_query(ftl, T0 + 60.25, "b.example", "192.168.1.10")  # recent FTL stores REAL seconds
    add_query(ftl, T0, "c.example", "192.168.1.20")
    add_query(ftl, T0 + 5, "d.example", "192.168.1.30", name="laptop.lan")  # not in `network`
    add_query(ftl, T0 + 6, "e.example", "fe80::1")

    result = runner.invoke(args=["import-pihole", "--endpoint", "home", ftl])
    assert result.exit_code == 0, result.output

    entries = clients(client)["home"]
    assert entries["lastActivityTime"] == format_ms(T0 * 1000 + 60250)
    pi = entries["clients"]["192.168.1.10"]
    assert pi["lastActivityTime"] == "2024-05-01T12:01:00.250Z"
    assert (pi["ip"], pi["mac"], pi["vendor"], pi["host"]) == (
        "192.168.1.10",
        "dc:a6:32:00:00:01",
        "Raspberry Pi Trading Ltd",
        "pi.lan",
    )
    phone = entries["clients"]["192.168.1.20"]
    assert (phone["mac"], phone["vendor"], phone["host"]) == ("", "", "phone.lan")  # no mock MAC
    assert entries["clients"]["192.168.1.30"]["host"] == "laptop.lan"
    assert entries["clients"]["fe80::1"]["ip"] == "fe80::1"


def test_rows_the_validator_rejects_are_skipped_and_counted(runner, client, ftl):
    add_query(ftl, T0, "good.example", "192.168.1.10")
    add_query(ftl, T0 + 1, "not a domain", "192.168.1.10")
    add_query(ftl, T0 + 2, "x" * 300, "192.168.1.10")
    add_query(ftl, T0 + 3, "also-good.example", "192.168.1.10")

    result = runner.invoke(args=["import-pihole", "--batch-size", "2", ftl])
    assert result.exit_code == 0, result.output
    assert "Imported 2 records" in result.output
    assert "skipped 2: 2 rejected (question)" in result.output
    assert questions(client) == ["good.example", "also-good.example"]


def test_importing_twice_stores_nothing_new_and_new_rows_are_picked_up(runner, client, database, ftl):
    for i in range(5):
        add_query(ftl, T0 + i, f"q{i}.example", "192.168.1.10")
    assert runner.invoke(args=["import-pihole", "--batch-size", "2", ftl]).exit_code == 0
    again = runner.invoke(args=["import-pihole", ftl])
    assert again.exit_code == 0, again.output
    assert "Imported 0 records" in again.output
    assert "Resuming after query id 5" in again.output
    assert len(logged(client)) == 5

    for i in range(5, 8):
        add_query(ftl, T0 + i, f"q{i}.example", "192.168.1.10")
    more = runner.invoke(args=["import-pihole", ftl])
    assert "Imported 3 records" in more.output
    assert questions(client) == [f"q{i}.example" for i in range(8)]
    assert count_rows(database, "import_progress") == 1


def test_queries_ftl_aged_out_before_the_feed_read_them_are_counted_lost(runner, client, ftl):
    """A feed behind its source: FTL deleted its oldest rows (MAXDBDAYS) past the one imported
    last. The rows left are imported, and the gap is counted lost: logged, in the summary and
    in /metrics, once."""
    for i in range(5):
        add_query(ftl, T0 + i, f"q{i}.example", "192.168.1.10")  # ids 1-5
    assert runner.invoke(args=["import-pihole", ftl]).exit_code == 0
    for i in range(5, 12):
        add_query(ftl, T0 + i, f"q{i}.example", "192.168.1.10")  # ids 6-12
    with sqlite3.connect(ftl) as conn:
        conn.execute("DELETE FROM query_storage WHERE id <= 8")  # 6, 7 and 8 never imported
    behind = runner.invoke(args=["import-pihole", ftl])
    assert behind.exit_code == 0, behind.output
    assert "Imported 4 records" in behind.output
    assert "3 records were deleted by the source before they could be imported" in behind.output
    assert "LOST 3 records" in behind.output and "at source-aged-out" in behind.output
    assert questions(client) == [f"q{i}.example" for i in (0, 1, 2, 3, 4, 8, 9, 10, 11)]
    again = runner.invoke(args=["import-pihole", ftl])
    assert "Imported 0 records" in again.output and "LOST" not in again.output
    scraped = samples(client.get("/metrics", headers=AUTH).get_data(as_text=True))
    assert (
        scraped[("dns_analytics_feed_lost_records_total", (("endpoint", "pihole"), ("place", "source-aged-out")))] == 3
    )


def test_an_interrupted_import_resumes_without_duplicates_or_gaps(runner, client, ftl, monkeypatch):
    for i in range(10):
        add_query(ftl, T0 + i, f"q{i}.example", "192.168.1.10")
    crash_in_third_batch(monkeypatch)
    crashed = runner.invoke(args=["import-pihole", "--batch-size", "3", ftl])
    assert crashed.exit_code != 0
    assert len(logged(client)) == 6  # two whole batches; the third rolled back

    monkeypatch.undo()  # the power is back
    resumed = runner.invoke(args=["import-pihole", "--batch-size", "3", ftl])
    assert resumed.exit_code == 0, resumed.output
    assert "Resuming after query id 6" in resumed.output
    assert "Imported 4 records" in resumed.output
    assert questions(client) == [f"q{i}.example" for i in range(10)]


def test_databases_are_told_apart_by_creation_not_by_path(runner, client, tmp_path, ftl):
    for i in range(3):
        add_query(ftl, T0 + i, f"old{i}.example", "192.168.1.10")
    assert runner.invoke(args=["import-pihole", ftl]).exit_code == 0

    moved = str(tmp_path / "pihole-FTL_05-24.db")  # rotated away as Pi-hole's docs suggest
    os.rename(ftl, moved)
    assert "Imported 0 records" in runner.invoke(args=["import-pihole", moved]).output

    fresh = make_ftl_db(ftl, created=T0 + 3600)  # a new database: its ids start at 1 again
    add_query(fresh, T0 + 7200, "new.example", "192.168.1.10")
    result = runner.invoke(args=["import-pihole", fresh])
    assert "Imported 1 records" in result.output, result.output
    assert len(logged(client)) == 4


def test_restart_forgets_the_position(runner, client, ftl):
    add_query(ftl, T0, "a.example", "192.168.1.10")
    runner.invoke(args=["import-pihole", ftl])
    result = runner.invoke(args=["import-pihole", "--restart", ftl])
    assert "Imported 1 records" in result.output
    assert len(logged(client)) == 2


def test_the_database_is_only_read(runner, tmp_path, ftl):
    add_query(ftl, T0, "a.example", "192.168.1.10")
    before = hashlib.sha256(open(ftl, "rb").read()).hexdigest()
    os.chmod(ftl, 0o444)
    result = runner.invoke(args=["import-pihole", ftl])
    assert result.exit_code == 0, result.output
    assert hashlib.sha256(open(ftl, "rb").read()).hexdigest() == before
    assert not [name for name in os.listdir(tmp_path) if name.startswith("pihole-FTL.db-")]


def test_a_database_from_before_query_storage_is_read_as_it_is(runner, client, tmp_path):
    old = str(tmp_path / "old.db")
    with sqlite3.connect(old) as conn:
        conn.executescript(
            "CREATE TABLE queries (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER NOT NULL,"
            " type INTEGER NOT NULL, status INTEGER NOT NULL, domain TEXT NOT NULL,"
            " client TEXT NOT NULL, forward TEXT);"
            "CREATE TABLE network (id INTEGER PRIMARY KEY NOT NULL, ip TEXT NOT NULL,"
            " hwaddr TEXT NOT NULL, interface TEXT NOT NULL, name TEXT, firstSeen INTEGER NOT NULL,"
            " lastQuery INTEGER NOT NULL, numQueries INTEGER NOT NULL, macVendor TEXT);"
        )
        conn.execute("INSERT INTO queries VALUES (1, ?, 1, 1, 'ads.example', '10.0.0.5', NULL)", [T0])
        conn.execute(
            "INSERT INTO network VALUES (1, '10.0.0.5', '00:11:22:33:44:55', 'eth0', 'tv.lan', ?, ?, 1, 'Acme')",
            [T0, T0],
        )
    result = runner.invoke(args=["import-pihole", old])
    assert result.exit_code == 0, result.output
    entry = clients(client)["pihole"]["clients"]["10.0.0.5"]
    assert (entry["mac"], entry["vendor"], entry["host"]) == ("00:11:22:33:44:55", "Acme", "tv.lan")


def test_a_missing_or_foreign_file_is_a_clear_error(runner, tmp_path):
    missing = runner.invoke(args=["import-pihole", str(tmp_path / "nope.db")])
    assert missing.exit_code != 0 and "does not exist" in missing.output

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not SQLite at all\n" * 100)
    result = runner.invoke(args=["import-pihole", str(garbage)])
    assert result.exit_code != 0
    assert "not a Pi-hole FTL database" in result.output

    other = str(tmp_path / "other.db")
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    result = runner.invoke(args=["import-pihole", other])
    assert result.exit_code != 0
    assert "no query_storage or queries table" in result.output


def test_the_endpoint_option_is_checked(runner, ftl):
    result = runner.invoke(args=["import-pihole", "--endpoint", " ", ftl])
    assert result.exit_code != 0 and "--endpoint" in result.output
