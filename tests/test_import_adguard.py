"""flask import-adguard: AdGuard Home's querylog.json, written here line by line."""

import base64
import json
import os

import pytest

from feeds.dns_message import parse_response

from support.helpers import AUTH, clients
from support.importing import count_rows, crash_in_third_batch, dns_response, entry, logged, questions, write_log


@pytest.fixture
def log_path(tmp_path):
    return tmp_path / "querylog.json"


def by_question(client) -> dict[str, dict]:
    return {r["question"]: r for r in logged(client)}


def unknown_as_none(value):
    return None if value == "" else value  # the activity log writes unknown text as ""


def test_reasons_rules_and_answers_map_onto_our_fields(runner, client, log_path):
    write_log(
        log_path,
        entry(
            "plain.example",
            0,
            Answer=dns_response("plain.example", ips=["93.184.216.34", "93.184.216.35"]),
            Cached=True,
        ),
        entry(
            "v6.example",
            1,
            qtype="AAAA",
            cp="doh",
            CID="laptop",
            Answer=dns_response("v6.example", "AAAA", ips=["2001:db8::1"]),
        ),
        entry("down.example", 2, cp="dot", Answer=dns_response("down.example", rcode="SERVFAIL")),
        entry(
            "ads.example",
            3,
            cp="doq",
            result={"IsFiltered": True, "Reason": 3, "Rules": [{"Text": "||ads.example^", "FilterListID": 2}]},
            Answer=dns_response("ads.example", ips=["0.0.0.0"]),
        ),
        entry(
            "mine.example",
            4,
            cp="dnscrypt",
            result={"IsFiltered": True, "Reason": 3, "Rules": [{"Text": "||mine.example^"}]},
            Answer=dns_response("mine.example", rcode="NXDOMAIN"),
        ),
        entry(
            "youtube.com",
            5,
            result={
                "IsFiltered": True,
                "Reason": 8,
                "ServiceName": "youtube",
                "Rules": [{"Text": "||youtube.com^", "FilterListID": -2}],
            },
        ),
        entry(
            "www.google.com",
            6,
            result={
                "IsFiltered": True,
                "Reason": 7,
                "CanonName": "forcesafesearch.google.com",
                "Rules": [{"FilterListID": -5, "IP": "216.239.38.120"}],
            },
            Answer=dns_response("www.google.com", ips=["216.239.38.120"]),
        ),
        entry("nas.lan", 7, result={"Reason": 10, "IPList": ["192.168.1.2"]}),
        entry(
            "gone.example",
            8,
            result={
                "Reason": 11,
                "Rules": [{"Text": "||gone.example^$dnsrewrite=NXDOMAIN"}],
                "DNSRewriteResult": {"RCode": 3},
            },
            Answer=dns_response("gone.example", rcode="NXDOMAIN"),
        ),
        entry("ok.example", 9, result={"Reason": 1, "Rules": [{"Text": "@@||ok.example^", "FilterListID": 0}]}),
        entry(
            "legacy.example", 10, result={"IsFiltered": True, "Reason": 3, "Rule": "||legacy.example^", "FilterID": 4}
        ),
        entry("phish.example", 11, result={"IsFiltered": True, "Reason": 4}),
        entry("garbled.example", 12, Answer="!!not base64!!"),
        entry("truncated.example", 13, Answer=base64.b64encode(b"\x12\x34\x81\x80\x00\x01").decode()),
    )

    result = runner.invoke(args=["import-adguard", str(log_path)])
    assert result.exit_code == 0, result.output
    assert "Imported 14 records" in result.output and "nothing skipped" in result.output

    got = by_question(client)
    expected = {
        # question: (action, trigger, triggerValue, spoofTarget, statusCode, protocol)
        "plain.example": (1, "default", None, None, "NOERROR", "legacy"),
        "v6.example": (1, "default", None, None, "NOERROR", "doh"),
        "down.example": (-1, "default", None, None, "SERVFAIL", "dot"),
        "ads.example": (0, "filter", "list:2", None, "NOERROR", "doq"),
        "mine.example": (0, "custom", "||mine.example^", None, "NXDOMAIN", None),
        "youtube.com": (0, "service", "youtube", None, None, "legacy"),
        "www.google.com": (2, "filter", "safesearch", "216.239.38.120", "NOERROR", "legacy"),
        "nas.lan": (2, "custom", "etc-hosts", "192.168.1.2", None, "legacy"),
        "gone.example": (0, "custom", "||gone.example^$dnsrewrite=NXDOMAIN", None, "NXDOMAIN", "legacy"),
        "ok.example": (1, "custom", "@@||ok.example^", None, None, "legacy"),
        "legacy.example": (0, "filter", "list:4", None, None, "legacy"),
        "phish.example": (0, "filter", "safebrowsing", None, None, "legacy"),
        "garbled.example": (1, "default", None, None, None, "legacy"),
        "truncated.example": (1, "default", None, None, None, "legacy"),
    }
    names = ("action", "trigger", "triggerValue", "spoofTarget", "statusCode", "protocol")
    for question, fields in expected.items():
        record = got[question]
        assert tuple(unknown_as_none(record[name]) for name in names) == fields, question
        assert record["endpointId"] == "adguard"
    assert [a["ips"] for a in got["plain.example"]["answers"]] == [["93.184.216.34", "93.184.216.35"]]
    assert [a["ips"] for a in got["v6.example"]["answers"]] == [["2001:db8::1"]]
    assert got["v6.example"]["rrType"] == "AAAA"
    assert got["garbled.example"]["answers"] == []
    # Nanoseconds in the log, milliseconds in the store.
    assert got["plain.example"]["timestamp"] == "2024-05-01T12:00:00.123Z"


def test_client_entries_are_keyed_by_client_id_else_address(runner, client, log_path):
    write_log(
        log_path,
        entry("a.example", 0, ip="192.168.1.10"),
        entry("b.example", 1, ip="192.168.1.11", cp="doh", CID="laptop"),
        entry("c.example", 30, ip="10.8.0.2", cp="doh", CID="laptop"),
    )
    result = runner.invoke(args=["import-adguard", "--endpoint", "home", str(log_path)])
    assert result.exit_code == 0, result.output
    entries = clients(client)["home"]
    assert set(entries["clients"]) == {"192.168.1.10", "laptop"}
    laptop = entries["clients"]["laptop"]
    assert laptop["ip"] == "10.8.0.2"  # the newest record's address
    assert laptop["lastActivityTime"] == "2024-05-01T12:00:30.123Z"
    assert entries["lastActivityTime"] == "2024-05-01T12:00:30.123Z"
    assert clients(client, "?endpointId=home")["home"]["clients"]["192.168.1.10"]["ip"] == "192.168.1.10"


def test_lines_that_cannot_be_imported_are_skipped_and_counted(runner, client, log_path):
    write_log(
        log_path,
        entry("good.example", 0),
        "{this is not json",
        entry("not a name", 1),
        {"QH": "no-time.example", "IP": "192.168.1.10"},
        entry("bad-time.example", 2) | {"T": "yesterday"},
        "",
        entry("also-good.example", 3),
    )
    result = runner.invoke(args=["import-adguard", "--batch-size", "2", str(log_path)])
    assert result.exit_code == 0, result.output
    assert "Imported 2 records" in result.output
    assert "skipped 4: 2 unreadable, 1 rejected (question), 1 rejected (timestamp)" in result.output
    assert questions(client) == ["good.example", "also-good.example"]


def test_importing_twice_stores_nothing_new_and_appended_lines_are_picked_up(runner, client, log_path):
    write_log(log_path, *(entry(f"q{i}.example", i) for i in range(5)))
    assert runner.invoke(args=["import-adguard", "--batch-size", "2", str(log_path)]).exit_code == 0
    again = runner.invoke(args=["import-adguard", str(log_path)])
    assert "Imported 0 records" in again.output and "Resuming after line 5" in again.stderr
    assert "Importing querylog.json" in again.stderr  # the progress bar's label
    assert len(logged(client)) == 5

    write_log(log_path, *(entry(f"q{i}.example", i) for i in range(5, 8)), mode="a")
    more = runner.invoke(args=["import-adguard", str(log_path)])
    assert "Imported 3 records" in more.output, more.output
    assert questions(client) == [f"q{i}.example" for i in range(8)]


def test_a_half_written_last_line_waits_for_the_next_run(runner, client, log_path):
    write_log(log_path, entry("a.example", 0))
    line = json.dumps(entry("b.example", 1))
    with open(log_path, "a") as log:
        log.write(line[:20])  # AdGuard is in the middle of writing it
    result = runner.invoke(args=["import-adguard", str(log_path)])
    assert "Imported 1 records" in result.output, result.output
    with open(log_path, "a") as log:
        log.write(line[20:] + "\n")
    assert "Imported 1 records" in runner.invoke(args=["import-adguard", str(log_path)]).output
    assert questions(client) == ["a.example", "b.example"]


def test_a_rotated_log_is_recognised_and_the_new_one_imported(runner, client, database, tmp_path, log_path):
    write_log(log_path, *(entry(f"old{i}.example", i) for i in range(3)))
    assert runner.invoke(args=["import-adguard", str(log_path)]).exit_code == 0
    # AdGuard rotates by renaming; the old file may have grown before that.
    write_log(log_path, entry("old3.example", 3), mode="a")
    rotated = tmp_path / "querylog.json.1"
    os.rename(log_path, rotated)
    write_log(log_path, entry("new0.example", 10), entry("new1.example", 11))

    assert "Imported 1 records" in runner.invoke(args=["import-adguard", str(rotated)]).output
    assert "Imported 2 records" in runner.invoke(args=["import-adguard", str(log_path)]).output
    assert "Imported 0 records" in runner.invoke(args=["import-adguard", str(rotated)]).output
    assert len(logged(client)) == 6
    assert count_rows(database, "import_progress") == 2  # one position per file


def test_an_interrupted_import_resumes_without_duplicates_or_gaps(runner, client, log_path, monkeypatch):
    write_log(log_path, *(entry(f"q{i}.example", i) for i in range(10)))
    crash_in_third_batch(monkeypatch)
    crashed = runner.invoke(args=["import-adguard", "--batch-size", "3", str(log_path)])
    assert crashed.exit_code != 0
    assert len(logged(client)) == 6

    monkeypatch.undo()  # the power is back
    resumed = runner.invoke(args=["import-adguard", "--batch-size", "3", str(log_path)])
    assert resumed.exit_code == 0, resumed.output
    assert "Resuming after line 6" in resumed.output and "Imported 4 records" in resumed.output
    assert questions(client) == [f"q{i}.example" for i in range(10)]


def test_a_rewritten_file_is_refused_until_restart(runner, client, log_path):
    write_log(log_path, entry("a.example", 0), entry("b.example", 1))
    runner.invoke(args=["import-adguard", str(log_path)])
    write_log(log_path, entry("a.example", 0), entry("changed.example", 1))
    refused = runner.invoke(args=["import-adguard", str(log_path)])
    assert refused.exit_code != 0
    assert "changed since the last import" in refused.output and "--restart" in refused.output
    restarted = runner.invoke(args=["import-adguard", "--restart", str(log_path)])
    assert "Imported 2 records" in restarted.output
    assert len(logged(client)) == 4


def test_a_missing_empty_or_foreign_file_is_a_clear_error(runner, tmp_path, client):
    missing = runner.invoke(args=["import-adguard", str(tmp_path / "nope.json")])
    assert missing.exit_code != 0 and "does not exist" in missing.output

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    result = runner.invoke(args=["import-adguard", str(garbage)])
    assert result.exit_code != 0 and "not an AdGuard Home query log" in result.output

    ndjson = write_log(tmp_path / "records.ndjson", {"endpointId": "e", "clientId": "c", "question": "x.org"})
    result = runner.invoke(args=["import-adguard", ndjson])
    assert result.exit_code != 0 and "not an AdGuard Home query log" in result.output

    empty = tmp_path / "empty.json"
    empty.write_text("")
    result = runner.invoke(args=["import-adguard", str(empty)])
    assert result.exit_code == 0 and "nothing to import" in result.output
    assert client.get("/v2/client", headers=AUTH).json == {"items": {}}


def test_the_dns_reader_follows_the_wire_format_and_rejects_broken_messages():
    message = base64.b64decode(dns_response("a.example", ips=["192.0.2.1", "2001:db8::5"]))
    assert parse_response(message) == ("NOERROR", ["192.0.2.1", "2001:db8::5"])
    assert parse_response(base64.b64decode(dns_response("x.example", rcode="NXDOMAIN"))) == ("NXDOMAIN", [])
    # AdGuard Home's own test data logs answers with the QR bit clear: still the answer.
    assert parse_response(message[:2] + bytes([message[2] & 0x7F]) + message[3:]) == parse_response(message)
    for broken in (
        message[:11],  # shorter than a header
        message[:20],  # the question's name cut short
        message[:-3],  # the last answer's data cut short
        message[:12] + b"\xc0",  # half a compression pointer
        message[:12] + b"\x41abc",  # an extended label type
    ):
        with pytest.raises(ValueError):
            parse_response(broken)
