"""Privacy applied to what is stored (issue 25 items 2 and 4): a setting made stricter rewrites
the records stored before it, and age steps rewrite records as they grow old, by the privacy
job (`flask --app wsgi privacy rewrite` here); statistics keep their totals; loosening applies
only to new records; GET /v2/data-availability says what is kept for which period."""

import calendar
import time

import pytest

from support.helpers import API_KEY, AUTH, ingest, record
from support.servers import Gunicorn
from support.stores import stored_rows

ADDRESS = "192.168.77.123"
NAME = "www.very-private-site.co.uk"
DOMAIN = "very-private-site.co.uk"
ANSWER = "203.0.113.99"
HOST = "alices-laptop"
DAY_S = 86_400
LAST_30_DAYS = "startTime=-30d"


def iso(seconds_ago: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds_ago))


def private_record(seconds_ago: float, client_id=ADDRESS, question=NAME):
    return record(
        "home",
        client_id,
        iso(seconds_ago),
        question,
        sourceIp=ADDRESS,
        triggerValue=f"||{question}^",
        answers=[{"ips": [ANSWER], "geoip": {"countryCode": "NL"}}],
        client={"ip": ADDRESS, "host": HOST, "mac": "aa:bb:cc:dd:ee:ff"},
    )


def get(client, path):
    response = client.get(path, headers=AUTH)
    assert response.status_code == 200, (path, response.json)
    return response.json


def counts(client, group):
    found = get(client, f"/v2/statistic/count/{group}?{LAST_30_DAYS}&limit=100")["counts"]
    return {c["value"]: c["count"] for c in found}


def shown(client) -> str:
    """Every place that shows stored queries and clients, as one text."""
    paths = [
        f"/v2/activity-log?{LAST_30_DAYS}",
        f"/v2/activity-log/csv?{LAST_30_DAYS}",
        "/v2/client",
        f"/v2/statistic/count/question?{LAST_30_DAYS}",
        f"/v2/statistic/count/clientId?{LAST_30_DAYS}",
        f"/v2/statistic/count/triggerValue?{LAST_30_DAYS}",
        f"/v2/statistic/first-seen/question?{LAST_30_DAYS}",
    ]
    return "\n".join(client.get(path, headers=AUTH).get_data(as_text=True) for path in paths)


def rewrite(runner) -> str:
    result = runner.invoke(args=["privacy", "rewrite"])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_stricter_setting_rewrites_what_is_stored_and_keeps_the_totals(client, runner, database):
    ingest(client, private_record(3 * DAY_S), private_record(2 * DAY_S), private_record(DAY_S, client_id="laptop"))
    total = get(client, f"/v2/statistic/count?{LAST_30_DAYS}")["count"]
    assert total == 3 and counts(client, "question") == {NAME: 3}
    assert ADDRESS in shown(client) and ADDRESS in stored_rows(database), "the checks below can see it"

    change = {"clientIp": "truncate", "clientMetadata": "drop", "question": "registrableDomain", "answers": "drop"}
    answer = client.put("/v2/privacy/home", json=change, headers=AUTH).json
    assert answer["pendingRewrite"] == 3, "says how many stored records it rewrites"
    assert get(client, "/v2/privacy")["items"]["home"]["pendingRewrite"] == 3
    assert "Rewrote 3 stored records" in rewrite(runner)
    assert get(client, "/v2/privacy")["items"]["home"]["pendingRewrite"] == 0

    queries = get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]
    assert {(q["clientId"], q["sourceIp"], q["question"], q["triggerValue"]) for q in queries} == {
        ("192.168.77.0", "192.168.77.0", DOMAIN, ""),
        ("laptop", "192.168.77.0", DOMAIN, ""),
    }
    assert all(q["answers"] == [] for q in queries)
    entries = get(client, "/v2/client")["items"]["home"]["clients"]
    assert set(entries) == {"192.168.77.0", "laptop"}, "the entry named by the address went"
    assert {(e["ip"], e["host"], e["mac"]) for e in entries.values()} == {("192.168.77.0", "", "")}
    # The statistics keep their totals; the counts follow the values.
    assert get(client, f"/v2/statistic/count?{LAST_30_DAYS}")["count"] == total
    assert counts(client, "question") == {DOMAIN: 3}
    assert counts(client, "clientId") == {"192.168.77.0": 2, "laptop": 1}
    assert sum(counts(client, "triggerValue").values()) == 3
    assert [n["value"] for n in get(client, f"/v2/statistic/first-seen/question?{LAST_30_DAYS}")["names"]] == [DOMAIN]
    text, stored = shown(client), stored_rows(database)
    for secret in (ADDRESS, NAME, HOST, ANSWER):
        assert secret not in text and secret not in stored, secret
    entry = get(client, "/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=privacy.rewrite")["actions"][0]
    assert entry["metadata"]["result"]["rewritten"] == 3 and entry["keyName"] == "cli"

    # Loosening applies to new records only; a second run finds nothing to do.
    assert client.put("/v2/privacy/home", json={"clientIp": "keep"}, headers=AUTH).json["pendingRewrite"] == 0
    ingest(client, private_record(60, client_id="phone"))
    assert "Rewrote 0" in rewrite(runner)
    by_client = {q["clientId"]: q["sourceIp"] for q in get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]}
    assert by_client == {"phone": ADDRESS, "laptop": "192.168.77.0", "192.168.77.0": "192.168.77.0"}


def test_the_default_made_stricter_rewrites_every_endpoint_following_it(client, runner):
    ingest(client, private_record(DAY_S), {**private_record(DAY_S), "endpointId": "office"})
    client.put("/v2/privacy/office", json={"answers": "keep"}, headers=AUTH)
    answer = client.put("/v2/privacy/_default", json={"clientIp": "drop", "answers": "drop"}, headers=AUTH).json
    assert answer["pendingRewrite"] == 2, "home's for both, office's for its address"
    rewrite(runner)
    queries = {q["endpointId"]: q for q in get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]}
    assert queries["home"]["sourceIp"] is None and queries["home"]["answers"] == []
    assert queries["office"]["sourceIp"] is None and queries["office"]["answers"] != [], "its own setting"
    assert {q["clientId"] for q in queries.values()} == {"anonymous"}


def test_a_hashed_address_hashes_once(client, runner):
    ingest(client, private_record(DAY_S))
    client.put("/v2/privacy/home", json={"clientIp": "hash"}, headers=AUTH)
    rewrite(runner)
    (first,) = get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]
    assert first["sourceIp"].startswith("100::") and first["clientId"] == first["sourceIp"]
    ingest(client, private_record(60))
    client.put("/v2/privacy/home", json={"clientIp": "hash", "ipv4Prefix": 8}, headers=AUTH)
    run_twice = [rewrite(runner), rewrite(runner)]
    assert all("Rewrote 0" in output for output in run_twice), "a hashed address stays as it is"
    assert counts(client, "clientId") == {first["clientId"]: 2}, "the new record hashes the same"


STEPS = [
    {"afterDays": 7, "clientIp": "truncate", "clientMetadata": "drop"},
    {"afterDays": 15, "question": "registrableDomain"},
]


def by_age(client) -> dict:
    queries = get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]
    return {q["clientId"]: (q["sourceIp"], q["question"]) for q in queries}


def test_age_steps_rewrite_records_as_they_reach_them_with_totals_unchanged(client, runner, database):
    ingest(
        client,
        private_record(DAY_S, client_id="young"),
        private_record(10 * DAY_S, client_id="week-old"),
        private_record(20 * DAY_S, client_id="old"),
    )
    before = counts(client, "clientId"), get(client, f"/v2/statistic/count?{LAST_30_DAYS}")["count"]
    answer = client.put("/v2/privacy/home", json={"steps": STEPS}, headers=AUTH).json
    assert answer["steps"] == STEPS and answer["pendingRewrite"] == 0, "steps are the job's, by age"
    rewrite(runner)
    assert by_age(client) == {
        "young": (ADDRESS, NAME),
        "week-old": ("192.168.77.0", NAME),
        "old": ("192.168.77.0", DOMAIN),
    }
    assert (counts(client, "clientId"), get(client, f"/v2/statistic/count?{LAST_30_DAYS}")["count"]) == before
    assert counts(client, "question") == {NAME: 2, DOMAIN: 1}
    # Records that arrive already old are stored as their age says.
    ingest(client, private_record(16 * DAY_S, client_id="late"))
    assert by_age(client)["late"] == ("192.168.77.0", DOMAIN)
    assert "Rewrote 0" in rewrite(runner)

    spans = get(client, "/v2/data-availability")["privacy"]["home"]
    assert [(s["clientIp"], s["clientMetadata"], s["question"]) for s in spans] == [
        ("keep", "keep", "keep"),
        ("truncate", "drop", "keep"),
        ("truncate", "drop", "registrableDomain"),
    ]
    ages = [(time.time() - iso_seconds(s["endTime"])) / DAY_S for s in spans]
    assert [round(age) for age in ages] == [0, 7, 15]
    assert round((time.time() - iso_seconds(spans[-1]["startTime"])) / DAY_S) == 33, "to the records' horizon"
    assert round((time.time() - iso_seconds(spans[0]["startTime"])) / DAY_S) == 7


def iso_seconds(text: str) -> float:
    return calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S"))


def test_age_steps_are_checked(client):
    for steps in (
        [{"afterDays": 0, "clientIp": "drop"}],
        [{"afterDays": 7}],
        [{"afterDays": 7, "answers": "drop"}] * 2,
    ):
        response = client.put("/v2/privacy/home", json={"steps": steps}, headers=AUTH)
        assert response.status_code == 400, steps
    assert get(client, "/v2/privacy")["items"] == {"_default": get(client, "/v2/privacy")["items"]["_default"]}


def test_gunicorn_workers_run_the_privacy_job_once_between_them(tmp_path):
    database = str(tmp_path / "privacy.db")
    server = Gunicorn(
        tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_PRIVACY_INTERVAL": "1"}
    )
    try:  # two workers, each with the job's loop
        batch = [private_record(DAY_S + i, client_id=f"c{i}") for i in range(30)]
        assert server.call("POST", "/v2/ingest", batch, AUTH)[0] == 200
        status, answer = server.call("PUT", "/v2/privacy/home", {"clientIp": "truncate"}, AUTH)
        assert status == 200 and 0 < answer["pendingRewrite"] <= 30
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if server.call("GET", "/v2/privacy", headers=AUTH)[1]["items"]["home"]["pendingRewrite"] == 0:
                break
            time.sleep(0.2)
        queries = server.call("GET", f"/v2/activity-log?{LAST_30_DAYS}&pageSize=100", headers=AUTH)[1]["queries"]
        assert {q["sourceIp"] for q in queries} == {"192.168.77.0"} and len(queries) == 30
        time.sleep(2.5)  # a few more periods: later runs find nothing
        status, body = server.call(
            "GET", "/v2/admin-action?startTime=2020-01-01T00:00:00Z&action=privacy.rewrite", headers=AUTH
        )
        assert [(a["keyName"], a["metadata"]["result"]["rewritten"]) for a in body["actions"]] == [("privacy", 30)]
    finally:
        server.stop()


def test_a_question_dropped_later_leaves_only_its_count(client, runner, database):
    ingest(client, private_record(DAY_S), private_record(2 * DAY_S, question="other.example.org"))
    assert client.put("/v2/privacy/home", json={"question": "drop"}, headers=AUTH).json["pendingRewrite"] == 2
    rewrite(runner)
    assert counts(client, "question") == {"": 2}, "counted, not named"
    assert get(client, f"/v2/statistic/first-seen/question?{LAST_30_DAYS}")["names"] == []
    text, stored = shown(client), stored_rows(database)
    for name in (NAME, "other.example.org", DOMAIN):
        assert name not in text and name not in stored, name


def test_an_ipv6_client_is_truncated_to_its_prefix(client, runner):
    address = "2001:db8:1234:5678::1"
    ingest(client, record("home", address, iso(DAY_S), "v6.example", sourceIp=address))
    client.put("/v2/privacy/home", json={"clientIp": "truncate", "ipv6Prefix": 56}, headers=AUTH)
    rewrite(runner)
    (query,) = get(client, f"/v2/activity-log?{LAST_30_DAYS}")["queries"]
    assert (query["clientId"], query["sourceIp"]) == ("2001:db8:1234:5600::", "2001:db8:1234:5600::")
    ingest(client, record("home", address, iso(60), "v6.example", sourceIp=address))
    assert counts(client, "clientId") == {"2001:db8:1234:5600::": 2}, "new records land on the same client"


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
def test_a_rewrite_over_more_names_than_a_statement_takes_finishes(client, runner, engine):
    # More first-seen names than one statement can list on SQLite (32,766 values, the limit every
    # SQLite connection is held to), all made coarser at once at the end of the rewrite. The
    # names go 500 to a statement by code every engine shares, so PostgreSQL's higher limit
    # (65,535) is not sought too: twice the names cost 90 s of the suite.
    names = 33_000
    for start in range(0, names, 5_000):
        batch = [private_record(DAY_S, question=f"n{i}.{DOMAIN}") for i in range(start, min(start + 5_000, names))]
        ingest(client, *batch)
    assert client.put("/v2/privacy/home", json={"question": "registrableDomain"}, headers=AUTH).status_code == 200
    assert f"Rewrote {names} stored records" in rewrite(runner)
    assert counts(client, "question") == {DOMAIN: names}
    assert [n["value"] for n in get(client, f"/v2/statistic/first-seen/question?{LAST_30_DAYS}")["names"]] == [DOMAIN]
