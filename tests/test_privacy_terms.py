"""Strings removed from stored records later (a setting made stricter, a client marked not
logged) leave the store too: the privacy job deletes the interned strings nothing refers to any
more, and on SQLite neither the database file nor its write-ahead log keeps their bytes; a
process that had them cached stores them again under a new id."""

import glob
import subprocess
import sys

import pytest

from support.helpers import API_KEY, AUTH, ingest, record
from support.servers import ROOT, Gunicorn
from support.stores import is_postgres, run_sql

ADDRESS = "192.168.77.123"
NAME = "www.very-private-site.co.uk"
DOMAIN = "very-private-site.co.uk"
SHARED = "shared-name.example.org"
HOST = "alices-laptop"
ANSWERS = [{"ips": ["203.0.113.99"], "geoip": {"countryCode": "NL"}}]
WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


def known(endpoint="home", client_id="laptop", question=NAME, minute=0):
    return record(
        endpoint,
        client_id,
        f"2024-05-01T10:{minute:02d}:00Z",
        question,
        sourceIp=ADDRESS,
        answers=ANSWERS,
        client={"ip": ADDRESS, "host": HOST},
    )


def get(client, path):
    response = client.get(path, headers=AUTH)
    assert response.status_code == 200, (path, response.json)
    return response.json


def totals(client) -> tuple:
    """Every statistic the rewrite must keep: the count, per endpoint, per action."""
    per = [get(client, f"/v2/statistic/count/{group}?{WINDOW}")["counts"] for group in ("endpointId", "action")]
    return get(client, f"/v2/statistic/count?{WINDOW}")["count"], per


def terms(database) -> set[str]:
    return {value for (value,) in run_sql(database, "SELECT value FROM term")}


def in_files(database, text: str) -> bool:
    """Whether the SQLite database file or its write-ahead log holds `text`'s bytes."""
    paths = glob.glob(database) + glob.glob(database + "-wal")
    assert paths and database in paths
    return any(text.encode() in open(path, "rb").read() for path in paths)


def privacy_job(runner) -> str:
    result = runner.invoke(args=["privacy", "rewrite"])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_stricter_setting_leaves_no_old_string_in_the_store(client, runner, database):
    ingest(
        client,
        known(),
        known(minute=1, question=SHARED),
        record("office", "desk", "2024-05-01T11:00:00Z", SHARED, sourceIp="198.51.100.7"),
    )
    before = totals(client)
    stored = terms(database)
    assert {ADDRESS, NAME, SHARED} <= stored and any("203.0.113.99" in value for value in stored)
    if not is_postgres(database):
        assert all(in_files(database, text) for text in (ADDRESS, NAME, HOST)), "the checks below can see them"

    change = {"clientIp": "truncate", "clientMetadata": "drop", "question": "registrableDomain", "answers": "drop"}
    assert client.put("/v2/privacy/home", json=change, headers=AUTH).json["pendingRewrite"] == 2
    assert "Rewrote 2 stored records" in privacy_job(runner)

    stored = terms(database)
    assert ADDRESS not in stored and NAME not in stored, "the strings nothing refers to went"
    assert not any("203.0.113.99" in value for value in stored), "the answers too"
    assert {"192.168.77.0", DOMAIN, "198.51.100.7"} <= stored, "what is referred to stays"
    assert run_sql(database, "SELECT COUNT(*) FROM term_candidate") == [(0,)]
    if not is_postgres(database):  # nor the client entry as it was (text of its own)
        for secret in (ADDRESS, NAME, "203.0.113.99", HOST):
            assert not in_files(database, secret), secret
    queries = get(client, f"/v2/activity-log?{WINDOW}")["queries"]
    assert sorted((q["endpointId"], q["sourceIp"], q["question"], q["answers"]) for q in queries) == [
        ("home", "192.168.77.0", "example.org", []),
        ("home", "192.168.77.0", DOMAIN, []),
        ("office", "198.51.100.7", SHARED, []),
    ]
    assert totals(client) == before
    names = {c["value"]: c["count"] for c in get(client, f"/v2/statistic/count/question?{WINDOW}")["counts"]}
    assert names == {DOMAIN: 1, "example.org": 1, SHARED: 1}
    assert "Rewrote 0" in privacy_job(runner), "nothing left to do"


@pytest.mark.sqlite_only
def test_metadata_dropped_later_leaves_neither_the_file_nor_its_log(client, runner, database):
    ingest(client, known())
    assert in_files(database, HOST)
    assert client.put("/v2/privacy/home", json={"clientMetadata": "drop"}, headers=AUTH).status_code == 200
    assert "Rewrote 0 stored records" in privacy_job(runner), "no record changes: only the client entry"
    assert get(client, "/v2/client")["items"]["home"]["clients"]["laptop"]["host"] == ""
    assert not in_files(database, HOST)


def test_a_client_marked_not_logged_leaves_no_string_in_the_store(client, runner, database):
    ingest(client, known(question="only-the-laptop.example"), known(minute=1))
    ingest(client, record("home", "phone", "2024-05-01T10:02:00Z", "only-the-phone.example", sourceIp="192.0.2.66"))
    ingest(client, record("home", "tv", "2024-05-01T10:03:00Z", "tv.example", sourceIp="192.0.2.5"))
    before = totals(client)
    marked = client.put("/v2/client/logging/home/laptop", json={"logged": False}, headers=AUTH)
    assert marked.status_code == 200, marked.json
    privacy_job(runner)
    stored = terms(database)
    assert ADDRESS not in stored and not any("203.0.113.99" in value for value in stored)
    # Counted anonymously (unloggedClients: counted): its names stay in the top names.
    assert {NAME, "only-the-laptop.example", "192.0.2.66", "tv.example"} <= stored
    if not is_postgres(database):
        assert not in_files(database, ADDRESS) and not in_files(database, "203.0.113.99")
    assert totals(client) == before

    # Not counted at all: nothing of it is referred to any more.
    assert client.put("/v2/privacy/home", json={"unloggedClients": "notCounted"}, headers=AUTH).status_code == 200
    marked = client.put("/v2/client/logging/home/phone", json={"logged": False}, headers=AUTH)
    assert marked.status_code == 200, marked.json
    privacy_job(runner)
    stored = terms(database)
    assert "192.0.2.66" not in stored
    if not is_postgres(database):
        assert not in_files(database, "192.0.2.66")
    # A deleted client's names stay among its endpoint's first-seen names (a statistic, as
    # after DELETE /v2/client): so does their string.
    seen = get(client, f"/v2/statistic/first-seen/question?{WINDOW}")["names"]
    assert "only-the-phone.example" in {n["value"] for n in seen} and "only-the-phone.example" in stored
    queries = get(client, f"/v2/activity-log?{WINDOW}")["queries"]
    assert [(q["clientId"], q["question"]) for q in queries] == [("tv", "tv.example")]
    assert get(client, f"/v2/statistic/count?{WINDOW}")["count"] == before[0] - 1


def test_a_worker_that_cached_a_deleted_string_stores_it_again(tmp_path, database):
    """One gunicorn worker caches the address; another process (the privacy job) deletes its
    term; the worker then stores the address again: under a new id, read back right."""
    env = {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}
    server = Gunicorn(tmp_path, env, workers=1)
    try:
        # Cached from the second batch on: the first one made the term, and new ids are not cached.
        for minute in (0, 1):
            assert server.call("POST", "/v2/ingest", [known(minute=minute)], AUTH)[0] == 200
        status, _ = server.call("PUT", "/v2/privacy/home", {"clientIp": "drop"}, AUTH)
        assert status == 200
        job = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "privacy", "rewrite"],
            cwd=ROOT,
            env={**server.env, **env},
            capture_output=True,
            text=True,
        )
        assert job.returncode == 0, job.stderr
        assert ADDRESS not in terms(database), "deleted while the worker has it cached"

        later = known("office", minute=5)
        assert server.call("POST", "/v2/ingest", [later], AUTH)[0] == 200
        status, body = server.call("GET", f"/v2/activity-log?{WINDOW}&endpointId=office", headers=AUTH)
        assert status == 200, body
        assert [(q["clientId"], q["sourceIp"]) for q in body["queries"]] == [("laptop", ADDRESS)]
        dangling = run_sql(
            database,
            "SELECT COUNT(*) FROM record r WHERE r.src_ip IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM term t WHERE t.id = r.src_ip)",
        )
        assert dangling == [(0,)], "no record refers to a deleted term"
        status, body = server.fetch("GET", f"/v2/activity-log/csv?{WINDOW}", headers=AUTH)
        assert status == 200 and body.decode().count(ADDRESS) == 1, "the export reads it too"
    finally:
        server.stop()


@pytest.mark.sqlite_only
def test_a_term_table_made_before_terms_could_be_deleted_never_reuses_an_id(app, make_app, client, database):
    ingest(client, known())
    # As older releases made it: without AUTOINCREMENT, SQLite numbers a new row max(id) + 1.
    for statement in (
        "ALTER TABLE term RENAME TO term_made",
        "CREATE TABLE term (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
        "INSERT INTO term SELECT id, value FROM term_made",
        "DROP TABLE term_made",
        "CREATE UNIQUE INDEX term_value ON term (value)",
    ):
        run_sql(database, statement)
    before = run_sql(database, "SELECT id, value FROM term ORDER BY id")
    restarted = make_app(**app.config).test_client()
    (table,) = run_sql(database, "SELECT sql FROM sqlite_master WHERE name = 'term'")[0]
    assert "AUTOINCREMENT" in table and run_sql(database, "SELECT id, value FROM term ORDER BY id") == before
    newest = before[-1][0]
    run_sql(database, "DELETE FROM term WHERE id = ?", [newest])  # as the privacy job may
    ingest(restarted, known(question="new.example"))
    assert run_sql(database, "SELECT MIN(id) FROM term WHERE value = 'new.example'")[0][0] > newest


def test_a_string_stored_again_while_a_round_looks_for_it_stays(app, client, database):
    """A round's steps (models/privacy/unused_terms.py) with an ingest of the string between the claim
    and the deletion, as another worker may do: the ingest takes it off the candidates."""
    import models.engine.database
    import models.privacy.unused_terms as unused

    ingest(client, known(), known(minute=1))  # the second batch reads the terms back: cached
    assert client.put("/v2/privacy/home", json={"clientIp": "drop"}, headers=AUTH).status_code == 200
    with app.app_context(), models.engine.database.connection():
        import models.privacy.rewrites

        models.privacy.rewrites.run(lambda: False)
        claimed, claimed_under, newest = unused._claim()
        (address,) = run_sql(database, "SELECT id FROM term WHERE value = ?", [ADDRESS])[0]
        assert address in claimed
        ingest(client, known("office", minute=2))
        found_unused = unused._unreferenced(claimed, newest)
        assert address in found_unused, "the new record came after the claim: not read"
        unused._delete(claimed, found_unused, claimed_under)
    assert run_sql(database, "SELECT id FROM term WHERE value = ?", [ADDRESS]) == [(address,)]
    queries = get(client, f"/v2/activity-log?{WINDOW}&endpointId=office")["queries"]
    assert [q["sourceIp"] for q in queries] == [ADDRESS]
