"""What the feeds' sources share (the Source protocol, resuming after what was committed, for
record files, Pi-hole and AdGuard Home alike), and what the Pi-hole and AdGuard Home importers
read as their sources write it: FTL's ids from 0, v6 list ids, a flushed table, the
upstream/latency/cache/DNSSEC columns; AdGuard answers with QR clear, its
Upstream/Elapsed/Cached/AD keys; records past retention said at import time."""

import base64
import json
import sqlite3

import pytest

from feeds.adguard import AdguardSource
from feeds.dnstap import Decoder
from feeds.files import FileSource
from feeds.pihole import PiholeSource
from feeds.source import Named, Source
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import record
from support.importing import T0, add_row, dns_response, entry, logged, make_ftl_db, questions, write_log


def _add_queries(kind: str, path, numbers) -> str:
    """Queries q<number>.example added to a source of `kind` at `path`, as it writes them."""
    if kind == "ingest":
        with open(path, "a") as stream:
            for n in numbers:
                stream.write(json.dumps(record(question=f"q{n}.example", timestamp=T0 * 1000 + n)) + "\n")
    elif kind == "import-pihole":
        if not path.exists():
            make_ftl_db(str(path))
        for n in numbers:
            add_row(str(path), n, T0 + n, f"q{n}.example")
    else:
        write_log(path, *(entry(f"q{n}.example", seconds=n) for n in numbers), mode="a")
    return str(path)


SOURCE_FILES = {"ingest": "records.ndjson", "import-pihole": "pihole-FTL.db", "import-adguard": "querylog.json"}


@pytest.mark.parametrize("kind", list(SOURCE_FILES))
def test_every_source_goes_on_after_what_it_committed(runner, client, tmp_path, kind):
    """The same story for each source, through its command: a run, more queries, a run in
    batches of one that stores only those, and a run with nothing new."""
    path = _add_queries(kind, tmp_path / SOURCE_FILES[kind], range(3))
    first = runner.invoke(args=[kind, path])
    assert first.exit_code == 0, first.output
    _add_queries(kind, tmp_path / SOURCE_FILES[kind], range(3, 5))
    second = runner.invoke(args=[kind, "--batch-size", "1", path])
    assert second.exit_code == 0, second.output
    assert "2 records" in second.output
    again = runner.invoke(args=[kind, path])
    assert again.exit_code == 0 and "0 records" in again.output, again.output
    assert questions(client) == [f"q{n}.example" for n in range(5)]


def test_every_source_implements_the_protocol(tmp_path):
    """What feeds.common.feed_source and the commands drive: a name, its keys, its readings;
    the dnstap collector's stream, which has no resume point, is named the same way."""
    paths = {kind: _add_queries(kind, tmp_path / name, range(1)) for kind, name in SOURCE_FILES.items()}
    sources = [
        FileSource(paths["ingest"], 10),
        PiholeSource(paths["import-pihole"], "pihole", 10),
        AdguardSource(paths["import-adguard"], "adguard", 10),
    ]
    for source in sources:
        assert isinstance(source, Source), source
        assert len(source.keys()) == 1
        readings = list(source.readings(lambda key: {}, announce=False))
        assert [reading.key for reading in readings] == source.keys()
    live = Decoder("dnstap")
    assert isinstance(live, Named) and not isinstance(live, Source)
    assert live.keys() == ["dnstap:dnstap"]


@pytest.fixture
def ftl(tmp_path):
    return make_ftl_db(str(tmp_path / "pihole-FTL.db"))


def test_the_first_query_of_a_database_is_id_0(runner, client, ftl):
    add_row(ftl, 0, T0, "first.example")
    result = runner.invoke(args=["import-pihole", ftl])
    assert result.exit_code == 0, result.output
    assert "Imported 1 records" in result.output
    assert questions(client) == ["first.example"]
    add_row(ftl, 1, T0 + 1, "second.example")
    assert "Imported 1 records" in runner.invoke(args=["import-pihole", ftl]).output
    assert questions(client) == ["first.example", "second.example"]


def test_v6_adlist_ids_say_which_list_blocked_or_allowed(runner, client, ftl):
    add_row(ftl, 0, T0, "blocked-by-adlist.example", status=1, list_id=-(7 + 2))
    add_row(ftl, 1, T0 + 1, "allowed-by-allow-adlist.example", status=2, list_id=-(3 + 2))
    add_row(ftl, 2, T0 + 2, "allowed-by-domainlist.example", status=2, list_id=4)
    add_row(ftl, 3, T0 + 3, "cname-blocked.example", status=9, list_id=-2)
    assert runner.invoke(args=["import-pihole", ftl]).exit_code == 0
    got = [(r["question"], r["action"], r["trigger"], r["triggerValue"]) for r in logged(client)]
    assert got == [
        ("blocked-by-adlist.example", 0, "filter", "adlist:7"),
        ("allowed-by-allow-adlist.example", 1, "filter", "antigravity:3"),
        ("allowed-by-domainlist.example", 1, "custom", "allowlist:4"),
        ("cname-blocked.example", 0, "filter", "adlist:0"),
    ]


def test_a_flushed_table_numbered_from_0_again_loses_nothing(runner, client, ftl):
    for i in range(4):
        add_row(ftl, i, T0 + i, f"before{i}.example")
    assert runner.invoke(args=["import-pihole", "--batch-size", "3", ftl]).exit_code == 0
    with sqlite3.connect(ftl) as conn:  # pihole -f, or every row aged out
        conn.execute("DELETE FROM query_storage")
    # Empty: nothing to do, and the position must survive the empty look.
    assert "Imported 0 records" in runner.invoke(args=["import-pihole", ftl]).output
    for i in range(2):  # fewer rows than before: ids 0 and 1 exist again, as other queries
        add_row(ftl, i, T0 + 100 + i, f"after{i}.example")
    result = runner.invoke(args=["import-pihole", ftl])
    assert "numbered its queries anew" in result.output
    assert "Imported 2 records" in result.output
    for i in range(2, 7):  # and past the old numbering
        add_row(ftl, i, T0 + 100 + i, f"after{i}.example")
    assert "Imported 5 records" in runner.invoke(args=["import-pihole", ftl]).output
    assert questions(client) == [f"before{i}.example" for i in range(4)] + [f"after{i}.example" for i in range(7)]


def test_upstream_reply_time_cache_and_dnssec_are_kept(runner, client, ftl):
    add_row(ftl, 0, T0, "forwarded.example", status=2, forward="9.9.9.9#53", reply_time=0.0125, dnssec=1)
    add_row(ftl, 1, T0 + 1, "cached.example", status=3, reply_time=0.0001, dnssec=2)
    add_row(ftl, 2, T0 + 2, "blocked.example", status=1, dnssec=0)
    assert runner.invoke(args=["import-pihole", ftl]).exit_code == 0
    got = [(r["upstream"], r["responseTimeMs"], r["cached"], r["dnssec"]) for r in logged(client)]
    assert got == [("9.9.9.9#53", 12.5, False, "secure"), ("", 0.1, True, "insecure"), ("", None, None, "")]


def test_an_answer_with_qr_clear_keeps_its_answers(runner, client, tmp_path):
    answer = base64.b64decode(dns_response("a.example", ips=["192.0.2.7"]))
    cleared = base64.b64encode(answer[:2] + bytes([answer[2] & 0x7F]) + answer[3:]).decode()
    log = write_log(tmp_path / "querylog.json", entry("a.example", Answer=cleared))
    assert runner.invoke(args=["import-adguard", log]).exit_code == 0
    (record,) = logged(client)
    assert record["statusCode"] == "NOERROR"
    assert record["answers"] == [{"ips": ["192.0.2.7"]}]


def test_adguard_upstream_elapsed_cached_and_ad_are_kept(runner, client, tmp_path):
    log = write_log(
        tmp_path / "querylog.json",
        entry("a.example", 1, Elapsed=2_500_000, Cached=False, AD=True),
        entry("b.example", 2, Elapsed=40_000, Cached=True, Upstream=""),
    )
    assert runner.invoke(args=["import-adguard", log]).exit_code == 0
    got = [(r["upstream"], r["responseTimeMs"], r["cached"], r["dnssec"]) for r in logged(client)]
    assert got == [("https://dns10.quad9.net:443/dns-query", 2.5, False, "secure"), ("", 0.04, True, "")]


def test_the_summary_says_how_many_records_retention_will_delete(make_app, tmp_path):
    app = make_app(ANALYTICS_DATABASE=str(tmp_path / "store.db"), ANALYTICS_RETENTION_DAYS=33)
    lines = [entry("old.example", 1), {**entry("new.example", 2), "T": format_ms(now_ms() - 60_000)}]
    log = write_log(tmp_path / "querylog.json", *lines)
    result = app.test_cli_runner().invoke(args=["import-adguard", log])
    assert "Imported 2 records" in result.output
    assert (
        "1 of them are older than the records' horizon (ANALYTICS_RETENTION_DAYS=33): their statistics are kept "
        "400 days (ANALYTICS_STATISTICS_RETENTION_DAYS)" in result.output
    )
