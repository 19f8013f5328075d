"""Alerts (POST/GET/PATCH/DELETE /v2/alert-rule, GET /v2/alert, app/jobs/alerts.py): each kind
fires once for its condition, not again within its cooldown, to a real webhook receiver (the
signature checked) and by e-mail through apprise to a real SMTP server, and shows in the
history; a receiver that was down gets the alert on a retry; two workers never fire twice."""

import hashlib
import hmac
import json
import time

import pytest

import models.delivery.alerts
import models.engine.database
from app.jobs.alerts import judge_rule, run_alerts
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support import stores
from support.alert_receivers import HttpReceiver, SmtpReceiver
from support.helpers import API_KEY, AUTH, assert_error, create, ingest, record, samples
from support.servers import Gunicorn, free_port

MINUTE = 60_000
SINCE = "startTime=2020-01-01T00:00:00Z"


@pytest.fixture
def receivers():
    webhook, smtp = HttpReceiver(), SmtpReceiver()
    yield webhook, smtp
    webhook.stop()
    smtp.stop()


def ago(ms: int) -> str:
    return format_ms(now_ms() - ms)


def make_rule(client, body, expect=201) -> dict:
    response = client.post("/v2/alert-rule", json=body, headers=AUTH)
    assert response.status_code == expect, response.json
    return response.json


def run_job(app, now=None) -> int:
    """One run of the alerts job, as the worker holding its lease runs it."""
    with app.app_context(), models.engine.database.connection():
        return run_alerts(now=now)


def history(client, query="") -> list[dict]:
    # Up to a far end: the job is run at times ahead of the clock (cooldowns, backoff).
    response = client.get(f"/v2/alert?{SINCE}&endTime=2100-01-01T00:00:00Z{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["alerts"]


def verified(webhook, secret) -> list[dict]:
    """The webhook bodies received, each signature checked with the rule's secret."""
    bodies = []
    for headers, body in webhook.received:
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-DNS-Analytics-Signature"], expected)
        bodies.append(json.loads(body))
    return bodies


def fires_once(app, client, receivers, rule, later_ms=0) -> dict:
    """Run the job twice more within the cooldown (and once `later_ms` on): exactly one alert,
    delivered to the webhook and by e-mail, shown in the history."""
    webhook, smtp = receivers
    now = now_ms() + later_ms
    assert run_job(app, now) == 1
    assert run_job(app, now + 1000) == 0, "not again within the cooldown"
    [alert] = history(client, f"&ruleId={rule['id']}")
    assert {d["destination"]: d["state"] for d in alert["deliveries"]} == {
        webhook.url: "delivered",
        smtp.url: "delivered",
    }
    [sent] = verified(webhook, rule["secret"])
    assert sent == {name: value for name, value in alert.items() if name != "deliveries"}
    [text] = smtp.texts()
    assert alert["message"] in text
    return alert


def rule_body(receivers, kind, **fields) -> dict:
    webhook, smtp = receivers
    return {"kind": kind, "endpointIds": ["home"], "destinations": [webhook.url, smtp.url], **fields}


# Managing rules (the fast lane).


def test_rules_are_created_listed_changed_deleted_and_audited(client):
    body = {
        "kind": "feed-silent",
        "endpointIds": ["home"],
        "destinations": ["https://hooks.example/x"],
        "silentMinutes": 15,
    }
    rule = make_rule(client, body)
    assert len(rule["secret"]) >= 40
    assert rule["cooldown"] == 3600 and rule["silentMinutes"] == 15 and rule["clientIds"] is None
    listed = client.get("/v2/alert-rule", headers=AUTH).json["items"]
    assert listed == [{name: value for name, value in rule.items() if name != "secret"}], "the secret shown once"
    changed = client.patch(f"/v2/alert-rule/{rule['id']}", json={"cooldown": 60, "silentMinutes": 5}, headers=AUTH)
    assert changed.status_code == 200, changed.json
    assert (changed.json["cooldown"], changed.json["silentMinutes"]) == (60, 5)
    assert client.get(f"/v2/alert-rule/{rule['id']}", headers=AUTH).json == changed.json
    assert client.delete(f"/v2/alert-rule/{rule['id']}", headers=AUTH).status_code == 200
    assert_error(client.get(f"/v2/alert-rule/{rule['id']}", headers=AUTH), 404, 40401)
    actions = client.get(f"/v2/admin-action?{SINCE}&search=alert-rule", headers=AUTH).json["actions"]
    assert [a["action"] for a in actions] == ["alert-rule.delete", "alert-rule.change", "alert-rule.create"]
    assert rule["secret"] not in json.dumps(actions), "the secret is in no log"


@pytest.mark.parametrize(
    "change, code",
    [
        ({"kind": "nonsense"}, 40001),
        ({"silentMinutes": None}, 40003),
        ({"days": 3}, 40001),  # not a field of feed-silent
        ({"destinations": ["nonsense://x"]}, 40001),
        ({"destinations": []}, 40001),
        ({"endpointIds": []}, 40001),
        ({"kind": "watched-domain", "silentMinutes": None, "watch": [{"match": "pattern", "value": "(a"}]}, 40001),
        ({"kind": "client-share", "silentMinutes": None, "metric": "nxdomain", "threshold": 2}, 40001),
    ],
)
def test_bad_rules_are_refused_and_nothing_is_stored(client, change, code):
    body = {"kind": "feed-silent", "endpointIds": ["home"], "destinations": ["https://h.example/"], "silentMinutes": 5}
    body = {name: value for name, value in {**body, **change}.items() if value is not None}
    assert_error(client.post("/v2/alert-rule", json=body, headers=AUTH), 400, code)
    assert client.get("/v2/alert-rule", headers=AUTH).json["items"] == []
    assert client.get(f"/v2/admin-action?{SINCE}", headers=AUTH).json["actions"] == []


def test_rules_and_history_need_the_admin_scope(client, runner):
    reader = {"Authorization": create(runner, "--name", "r", "--scope", "read")}
    body = {"kind": "new-client", "endpointIds": ["home"], "destinations": ["https://h.example/"]}
    assert_error(client.post("/v2/alert-rule", json=body, headers=reader), 403, 40301)
    assert_error(client.get("/v2/alert-rule", headers=reader), 403, 40301)
    assert_error(client.get(f"/v2/alert?{SINCE}", headers=reader), 403, 40301)


def test_an_id_past_any_stored_integer_names_no_rule(client):
    huge = 1 << 63
    for method in ("get", "patch", "delete"):
        response = getattr(client, method)(f"/v2/alert-rule/{huge}", json={"cooldown": 60}, headers=AUTH)
        assert_error(response, 404)
    assert_error(client.get(f"/v2/output/{huge}", headers=AUTH), 404)


def test_a_change_touches_only_the_fields_it_names_and_a_bad_one_nothing(client):
    body = {"kind": "feed-silent", "endpointIds": ["home"], "destinations": ["https://h.example/"], "silentMinutes": 9}
    rule = make_rule(client, {**body, "cooldown": 120})
    url = f"/v2/alert-rule/{rule['id']}"
    changed = client.patch(url, json={"silentMinutes": 5}, headers=AUTH).json
    assert (changed["silentMinutes"], changed["cooldown"], changed["destinations"]) == (5, 120, ["https://h.example/"])
    for bad, code in [
        ({"days": 3}, 40001),
        ({"destinations": ["nonsense://x"]}, 40001),
        ({"silentMinutes": 0}, 40001),
        ({}, 40001),
        ({"kind": "new-client"}, 40001),  # a rule's kind is not changed: the body sets nothing
    ]:
        assert_error(client.patch(url, json=bad, headers=AUTH), 400, code)
    assert client.get(url, headers=AUTH).json == changed
    assert_error(client.patch("/v2/alert-rule/999", json={"cooldown": 1}, headers=AUTH), 404, 40401)


def test_the_client_scope_limits_what_fires(app, client):
    watch = [{"match": "exact", "value": "watched.example"}]
    body = {"kind": "watched-domain", "endpointIds": ["home"], "destinations": ["https://h.example/"], "watch": watch}
    rule = make_rule(client, {**body, "clientIds": ["kid"]})
    assert rule["clientIds"] == ["kid"]
    ingest(client, record("home", "parent", ago(0), "watched.example"))
    with app.app_context(), models.engine.database.connection():
        assert judge_rule(models.delivery.alerts.get_rule(rule["id"]), now_ms()) == 0, "not one of its clients"
        ingest(client, record("home", "kid", ago(0), "watched.example"))
        assert judge_rule(models.delivery.alerts.get_rule(rule["id"]), now_ms()) == 1


def test_a_delivery_is_given_up_after_its_attempts_and_with_its_rule(app, client):
    nobody = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    body = {"kind": "new-client", "endpointIds": ["home"], "destinations": [nobody]}
    first = make_rule(client, body)
    ingest(client, record("home", "laptop", ago(0)))
    now = now_ms()
    for hour in range(10):
        run_job(app, now + hour * 3600_000)
    [delivery] = history(client, f"&ruleId={first['id']}")[0]["deliveries"]
    assert (delivery["state"], delivery["attempts"], delivery["nextTry"]) == ("failed", 8, None)
    assert "refused" in delivery["error"].lower()
    # Another rule's delivery, still retrying, is given up with its rule.
    make_rule(client, {**body, "endpointIds": ["shop"]})
    ingest(client, record("shop", "till", ago(0)))
    run_job(app, now + 11 * 3600_000)
    third = history(client)[0]
    assert third["deliveries"][0]["state"] == "retrying"
    assert client.delete(f"/v2/alert-rule/{third['ruleId']}", headers=AUTH).status_code == 200
    [delivery] = history(client, f"&ruleId={third['ruleId']}")[0]["deliveries"]
    assert (delivery["state"], delivery["error"]) == ("failed", "the rule was deleted")


# Each kind, to real receivers.


@pytest.mark.system
def test_feed_silent(app, client, receivers):
    ingest(client, record("home", "laptop", ago(20 * MINUTE)))
    rule = make_rule(client, rule_body(receivers, "feed-silent", silentMinutes=15))
    alert = fires_once(app, client, receivers, rule)
    assert (alert["kind"], alert["subject"], alert["endpointId"]) == ("feed-silent", "home", "home")
    assert run_job(app, now_ms() + 2 * 3600_000) == 0, "the same silence is told once, also after the cooldown"
    ingest(client, record("home", "laptop", ago(0)))
    assert run_job(app, now_ms() + 2 * 3600_000) == 1, "a new silence after records came again"


@pytest.mark.system
def test_new_client(app, client, receivers):
    ingest(client, record("home", "laptop", ago(MINUTE)))
    rule = make_rule(client, rule_body(receivers, "new-client", cooldown=600))
    assert run_job(app) == 0, "clients known before the rule are not new"
    ingest(client, record("home", "laptop", ago(0)), record("other", "phone", ago(0)))
    assert run_job(app) == 0, "nothing new on the rule's endpoint"
    ingest(client, record("home", "tv", ago(0), client={"host": "living-room-tv"}))
    alert = fires_once(app, client, receivers, rule)
    assert alert["subject"] == "home/tv" and alert["detail"]["host"] == "living-room-tv"


@pytest.mark.system
def test_new_domain(app, client, receivers):
    ingest(client, record("home", "laptop", ago(MINUTE), "www.known.com"))
    rule = make_rule(client, rule_body(receivers, "new-domain", days=30, allowlist=["trusted.org"]))
    ingest(
        client,
        record("home", "laptop", ago(0), "mail.known.com"),  # a known registrable domain
        record("home", "laptop", ago(0), "cdn.trusted.org"),  # allowed
        record("other", "laptop", ago(0), "elsewhere.net"),  # another endpoint
    )
    assert run_job(app) == 0
    ingest(client, record("home", "phone", ago(0), "a.evil-new.net"), record("home", "tv", ago(0), "b.evil-new.net"))
    alert = fires_once(app, client, receivers, rule)
    assert alert["detail"]["domain"] == "evil-new.net" and alert["detail"]["clientId"] == "phone"
    ingest(client, record("home", "phone", ago(0), "c.evil-new.net"))
    assert run_job(app, now_ms() + 2 * 3600_000) == 0, "seen now: no longer new"


@pytest.mark.system
def test_watched_domain(app, client, receivers):
    watch = [
        {"match": "exact", "value": "exact.example"},
        {"match": "suffix", "value": "bad.example"},
        {"match": "pattern", "value": "^x[0-9]+\\.dga\\.example$"},
    ]
    rule = make_rule(client, rule_body(receivers, "watched-domain", watch=watch))
    ingest(
        client,
        record("home", "laptop", ago(0), "sub.exact.example"),
        record("home", "laptop", ago(0), "notbad.example"),
    )
    assert run_job(app) == 0, "neither under exact.example's exact name nor under bad.example"
    ingest(
        client, record("home", "phone", ago(0), "deep.sub.bad.example"), record("home", "tv", ago(0), "x.bad.example")
    )
    alert = fires_once(app, client, receivers, rule)
    assert alert["detail"]["watch"] == watch[1] and alert["detail"]["queries"] == 2
    ingest(
        client,
        record("home", "phone", ago(0), "x42.dga.example"),
        record("home", "phone", ago(0), "EXACT.example"),
        record("home", "phone", ago(0), "again.bad.example"),  # within bad.example's cooldown
    )
    assert run_job(app) == 2, "each watched entry is its own condition, bad.example's told already"


@pytest.mark.system
def test_client_share(app, client, receivers):
    noisy = [record("home", "infected", ago(MINUTE), f"r{i}.example", statusCode="NXDOMAIN") for i in range(30)]
    quiet = [record("home", "laptop", ago(MINUTE), f"q{i}.example", statusCode="NOERROR") for i in range(30)]
    few = [record("home", "phone", ago(MINUTE), "gone.example", statusCode="NXDOMAIN")]  # under minQueries
    ingest(client, *noisy, *quiet, *few)
    rule = make_rule(client, rule_body(receivers, "client-share", metric="nxdomain", threshold=0.5, windowMinutes=10))
    alert = fires_once(app, client, receivers, rule)
    assert alert["subject"] == "home/infected" and alert["detail"]["value"] == 1.0


def test_client_share_far_above_the_clients_own_baseline(app, client):
    steady = [record("home", "steady", ago(11 * MINUTE + i * 59_000), f"s{i}.example") for i in range(1440)]
    window = [
        record("home", name, ago(i * 20_000), f"{name}{i}.example") for name in ("steady", "burst") for i in range(20)
    ]
    ingest(client, *steady, *window)
    body = {
        "kind": "client-share",
        "endpointIds": ["home"],
        "destinations": ["https://h.example/"],
        "metric": "rate",
        "threshold": 0.5,
        "windowMinutes": 10,
    }
    plain = make_rule(client, body)
    baseline = make_rule(client, {**body, "baselineDays": 1, "baselineFactor": 3})
    with app.app_context(), models.engine.database.connection():
        assert judge_rule(models.delivery.alerts.get_rule(plain["id"]), now_ms()) == 2, "both over 0.5 a minute"
        assert judge_rule(models.delivery.alerts.get_rule(baseline["id"]), now_ms()) == 1
    [alert] = history(client, f"&ruleId={baseline['id']}")
    detail = alert["detail"]
    assert (alert["subject"], detail["value"], detail["baseline"]) == ("home/burst", 2.0, 0.0)
    refused = {**body, "metric": "nxdomain", "threshold": 0.5, "baselineDays": 1}
    assert_error(client.post("/v2/alert-rule", json=refused, headers=AUTH), 400, 40001)


@pytest.mark.system
def test_a_receiver_down_gets_the_alert_on_a_retry(app, client, receivers):
    webhook, smtp = receivers
    webhook.stop()
    before = samples(client.get("/metrics", headers=AUTH).get_data(as_text=True))
    rule = make_rule(client, rule_body(receivers, "new-client"))
    ingest(client, record("home", "laptop", ago(0)))
    now = now_ms()
    assert run_job(app, now) == 1
    [alert] = history(client)
    states = {d["destination"]: d for d in alert["deliveries"]}
    assert states[smtp.url]["state"] == "delivered"
    down = states[webhook.url]
    assert down["state"] == "retrying" and down["attempts"] == 1 and "refused" in down["error"].lower()
    assert run_job(app, now + 1000) == 0 and webhook.received == [], "not before its backoff"
    webhook.start()
    run_job(app, now + 31_000)
    [alert] = history(client)
    assert {d["destination"]: (d["state"], d["attempts"]) for d in alert["deliveries"]} == {
        webhook.url: ("delivered", 2),
        smtp.url: ("delivered", 1),
    }
    assert len(verified(webhook, rule["secret"])) == 1
    after = samples(client.get("/metrics", headers=AUTH).get_data(as_text=True))

    def added(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert added("dns_analytics_alerts_fired_total", kind="new-client") == 1
    assert added("dns_analytics_alert_deliveries_total", result="retrying") == 1
    assert added("dns_analytics_alert_deliveries_total", result="delivered") == 2


@pytest.mark.parametrize(
    "kind, fields, question",
    [
        ("new-client", {}, "a.example"),
        ("watched-domain", {"watch": [{"match": "suffix", "value": "a.example"}]}, "x.a.example"),
        ("feed-silent", {"silentMinutes": 1}, "a.example"),
    ],
)
def test_a_second_process_judging_the_same_rule_fires_nothing(app, client, kind, fields, question):
    """Two workers (or hosts) that read a rule at once: only one fires, whatever the lease."""
    # No cooldown: what keeps the second from firing is the store, not the time since the first.
    body = {"kind": kind, "endpointIds": ["home"], "destinations": ["https://hooks.example/"], "cooldown": 0, **fields}
    rule = make_rule(client, body)
    ingest(client, record("home", "laptop", ago(2 * MINUTE), question))
    with app.app_context(), models.engine.database.connection():
        stale = models.delivery.alerts.get_rule(rule["id"])
        now = now_ms()
        assert judge_rule(stale, now) == 1
        assert judge_rule(stale, now) == 0, "the other process read the rule before the first fired"
    assert len(history(client)) == 1


def test_the_history_is_kept_as_long_as_the_records(app, client):
    nobody = f"http://127.0.0.1:{free_port()}/hook"
    make_rule(client, {"kind": "new-client", "endpointIds": ["home"], "destinations": [nobody]})
    ingest(client, record("home", "laptop", ago(0)))
    now = now_ms()
    run_job(app, now)
    run_job(app, now + 32 * 86_400_000)
    assert len(history(client)) == 1, "within ANALYTICS_RETENTION_DAYS (33)"
    run_job(app, now + 34 * 86_400_000)
    assert history(client) == []


def test_a_deleted_or_unlogged_client_leaves_no_alert_naming_it(app, client):
    nobody = f"http://127.0.0.1:{free_port()}/hook"
    names = ("laptop", "phone", "tv")
    watch = [{"match": "exact", "value": f"{name}.watched.example"} for name in names]  # an alert each
    make_rule(client, {"kind": "new-client", "endpointIds": ["home"], "destinations": [nobody]})
    make_rule(client, {"kind": "watched-domain", "endpointIds": ["home"], "destinations": [nobody], "watch": watch})
    for name in names:
        ingest(client, record("home", name, ago(MINUTE), f"{name}.watched.example", client={"host": f"{name}-host"}))
    now = now_ms()
    run_job(app, now)

    def named() -> dict:
        kinds = {}
        for alert in history(client):
            kinds.setdefault(alert["detail"]["clientId"], set()).add(alert["kind"])
        return kinds

    both = {"new-client", "watched-domain"}
    assert named() == {"laptop": both, "phone": both, "tv": both}
    deleted = client.delete("/v2/client", json={"endpointIds": ["home"], "clientIds": ["laptop"]}, headers=AUTH)
    assert deleted.status_code == 200 and deleted.json["deletedCount"] == 1
    assert named() == {"phone": both, "tv": both}, "a deleted client's alerts go with it"
    unlogged = client.put("/v2/client/logging/home/phone", json={"logged": False}, headers=AUTH)
    assert unlogged.status_code == 200, unlogged.json
    assert named() == {"tv": both}, "so do those of a client marked not logged"
    assert "laptop-host" not in stores.stored_rows(app.config["ANALYTICS_DATABASE"])
    # Deleted, it is a new client when it comes back: nothing remembers having told of it.
    ingest(client, record("home", "laptop", ago(0)))
    run_job(app, now + MINUTE)
    assert named()["laptop"] == {"new-client"}


def test_a_silence_outlasting_the_history_is_told_once(app, client):
    # The history expires with the records (33 days here); what a rule told must not.
    nobody = f"http://127.0.0.1:{free_port()}/hook"
    ingest(client, record("home", "laptop", ago(20 * MINUTE)))
    make_rule(client, {"kind": "feed-silent", "endpointIds": ["home"], "destinations": [nobody], "silentMinutes": 15})
    now = now_ms()
    assert run_job(app, now) == 1
    assert run_job(app, now + 34 * 86_400_000) == 0, "the history is gone, the silence told already"
    assert run_job(app, now + 40 * 86_400_000) == 0


def test_a_rule_deleted_after_the_job_read_it_fires_nothing(app, client):
    body = {"kind": "feed-silent", "endpointIds": ["home"], "destinations": ["https://h.example/"], "silentMinutes": 1}
    rule = make_rule(client, body)
    ingest(client, record("home", "laptop", ago(5 * MINUTE)))
    with app.app_context(), models.engine.database.connection():
        read = models.delivery.alerts.get_rule(rule["id"])
        assert client.delete(f"/v2/alert-rule/{rule['id']}", headers=AUTH).status_code == 200
        assert judge_rule(read, now_ms()) == 0
    assert history(client) == []


@pytest.mark.system
def test_the_command_line_runs_the_job_and_tests_a_rules_destinations(client, runner, receivers):
    webhook, smtp = receivers
    rule = make_rule(client, rule_body(receivers, "new-client"))
    ingest(client, record("home", "laptop", ago(0)))
    result = runner.invoke(args=["alerts", "run"])
    assert (result.exit_code, result.output) == (0, "1 alerts fired.\n")
    assert [d["state"] for d in history(client)[0]["deliveries"]] == ["delivered", "delivered"]
    result = runner.invoke(args=["alerts", "test", str(rule["id"])])
    assert result.exit_code == 0, result.output
    sent = verified(webhook, rule["secret"])
    assert len(sent) == 2 and sent[1]["subject"] == "test" and len(smtp.messages) == 2
    assert len(history(client)) == 1, "a test is not an alert"
    webhook.stop()
    result = runner.invoke(args=["alerts", "test", str(rule["id"])])
    assert result.exit_code == 1 and f"failed     {webhook.url}" in result.output
    assert runner.invoke(args=["alerts", "test", "999"]).exit_code == 1


@pytest.mark.system
def test_two_gunicorn_workers_fire_once(tmp_path, receivers):
    webhook, _ = receivers
    env = {
        "ANALYTICS_DATABASE": str(tmp_path / "alerts.db"),
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_ALERT_INTERVAL": "1",
    }
    server = Gunicorn(tmp_path, env, workers=2)
    try:
        body = {"kind": "new-client", "endpointIds": ["home"], "destinations": [webhook.url]}
        status, rule = server.call("POST", "/v2/alert-rule", body, AUTH)
        assert status == 201, rule
        assert server.call("POST", "/v2/ingest", [record("home", "laptop", ago(0))], AUTH)[0] == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not webhook.received:
            time.sleep(0.2)
        time.sleep(3)  # a few more runs of both workers: none fires again
        assert [alert["subject"] for alert in verified(webhook, rule["secret"])] == ["home/laptop"]
        status, body = server.call("GET", f"/v2/alert?{SINCE}", headers=AUTH)
        assert [alert["deliveries"][0]["state"] for alert in body["alerts"]] == ["delivered"]
    finally:
        server.stop()
