"""Scopes and endpoint limits, walked over every operation of the OpenAPI document."""

import json

import pytest

from support.helpers import AUTH, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
RULE = {"kind": "new-client", "endpointIds": ["mine"], "destinations": ["https://hooks.example/"]}

# One valid call per operation of the API: (method, OpenAPI path) -> (URL, JSON body or None).
CALLS = {
    ("GET", "/v2/auth/token"): ("/v2/auth/token", None),
    ("GET", "/v2/auth/key"): ("/v2/auth/key", None),
    ("POST", "/v2/ingest"): ("/v2/ingest", [record("mine", "new")]),
    ("POST", "/v2/ingest/losses"): (
        "/v2/ingest/losses",
        {"run": "r1", "endpointId": "mine", "losses": {"collector-queue": 3}},
    ),
    ("GET", "/v2/activity-log"): (f"/v2/activity-log?{WINDOW}", None),
    ("DELETE", "/v2/activity-log"): ("/v2/activity-log?clientId[]=shared&endTime=2024-05-01T10:30:00Z", None),
    ("GET", "/v2/activity-log/csv"): (f"/v2/activity-log/csv?{WINDOW}", None),
    ("GET", "/v2/activity-log/realtime"): ("/v2/activity-log/realtime", None),
    ("GET", "/v2/data-availability"): ("/v2/data-availability", None),
    ("GET", "/v2/statistic/count"): (f"/v2/statistic/count?{WINDOW}", None),
    ("GET", "/v2/statistic/count/{group}"): (f"/v2/statistic/count/endpointId?{WINDOW}", None),
    ("GET", "/v2/statistic/timeseries"): (f"/v2/statistic/timeseries?{WINDOW}", None),
    ("GET", "/v2/statistic/timeseries/{group}"): (f"/v2/statistic/timeseries/endpointId?{WINDOW}", None),
    ("GET", "/v2/statistic/trend/{group}"): (f"/v2/statistic/trend/endpointId?{WINDOW}", None),
    ("GET", "/v2/statistic/latency"): (f"/v2/statistic/latency?{WINDOW}", None),
    ("GET", "/v2/statistic/latency/{group}"): (f"/v2/statistic/latency/endpointId?{WINDOW}", None),
    ("GET", "/v2/statistic/first-seen/{group}"): (f"/v2/statistic/first-seen/question?{WINDOW}", None),
    ("GET", "/v2/admin-action"): ("/v2/admin-action?startTime=2020-01-01T00:00:00Z", None),
    ("GET", "/v2/access-log"): ("/v2/access-log?startTime=2020-01-01T00:00:00Z", None),
    ("GET", "/v2/privacy"): ("/v2/privacy", None),
    ("PUT", "/v2/privacy/{endpointId}"): ("/v2/privacy/mine", {"answers": "drop"}),
    ("GET", "/v2/client"): ("/v2/client", None),
    ("DELETE", "/v2/client"): ("/v2/client", {"clientIds": ["shared"], "endTime": "2024-05-01T10:30:00Z"}),
    ("PUT", "/v2/client/alias/{endpointId}/{clientId}"): ("/v2/client/alias/mine/shared", {"alias": "x"}),
    ("DELETE", "/v2/client/alias/{endpointId}/{clientId}"): ("/v2/client/alias/mine/shared", None),
    ("PUT", "/v2/client/logging/{endpointId}/{clientId}"): ("/v2/client/logging/mine/shared", {"logged": False}),
    ("GET", "/v2/output"): ("/v2/output", None),
    ("POST", "/v2/output"): ("/v2/output", {"kind": "http", "url": "http://127.0.0.1:9/new", "endpointIds": ["mine"]}),
    ("GET", "/v2/output/{outputId}"): ("/v2/output/1", None),
    ("PATCH", "/v2/output/{outputId}"): ("/v2/output/1", {"paused": False}),
    ("DELETE", "/v2/output/{outputId}"): ("/v2/output/1", None),
    ("POST", "/v2/alert-rule"): ("/v2/alert-rule", RULE),
    ("GET", "/v2/alert-rule"): ("/v2/alert-rule", None),
    ("GET", "/v2/alert-rule/{ruleId}"): ("/v2/alert-rule/1", None),
    ("PATCH", "/v2/alert-rule/{ruleId}"): ("/v2/alert-rule/1", {"cooldown": 60}),
    ("DELETE", "/v2/alert-rule/{ruleId}"): ("/v2/alert-rule/1", None),
    ("GET", "/v2/alert"): ("/v2/alert?startTime=2020-01-01T00:00:00Z", None),
}
OUTPUTS = {operation for operation in CALLS if operation[1].startswith("/v2/output")}
ADMIN_ONLY = {
    ("GET", "/v2/admin-action"),
    ("GET", "/v2/access-log"),
    ("GET", "/v2/privacy"),
    ("PUT", "/v2/privacy/{endpointId}"),
    *OUTPUTS,
    ("POST", "/v2/alert-rule"),
    ("GET", "/v2/alert-rule"),
    ("GET", "/v2/alert-rule/{ruleId}"),
    ("PATCH", "/v2/alert-rule/{ruleId}"),
    ("DELETE", "/v2/alert-rule/{ruleId}"),
    ("GET", "/v2/alert"),
}
ANY_KEY = {("GET", "/v2/auth/token"), ("GET", "/v2/auth/key")}
SCOPE_OF_METHOD = {"GET": "read", "POST": "ingest", "PUT": "write", "DELETE": "write", "PATCH": "write"}


def operations(client):
    spec = client.get("/v2/openapi.json").json
    return sorted(
        (method.upper(), path)
        for path, item in spec["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete", "patch")
    )


def key(runner, name, *scopes, endpoints=()):
    args = ["keys", "create", "--name", name]
    for scope in scopes:
        args += ["--scope", scope]
    for endpoint in endpoints:
        args += ["--endpoint", endpoint]
    result = runner.invoke(args=args)
    assert result.exit_code == 0, result.output
    return {"Authorization": result.output.strip().splitlines()[-1]}


def call(client, operation, headers):
    url, body = CALLS[operation]
    # Only the realtime stream must not be read to its end (it has none).
    kwargs = {"headers": headers, "buffered": not url.startswith("/v2/activity-log/realtime")}
    if body is not None:
        kwargs["json"] = body
    response = client.open(url, method=operation[0], **kwargs)
    response.close()  # realtime streams
    return response


@pytest.fixture
def data(client):
    ingest(
        client,
        record("mine", "shared", "2024-05-01T10:00:00Z", "mine.com", responseTimeMs=5),
        record("mine", "shared", "2024-05-01T11:00:00Z", "mine2.com", responseTimeMs=5),
        record("mine", "solo", "2024-05-01T10:00:00Z", "mine3.com", responseTimeMs=5),
        record("theirs", "shared", "2024-05-01T10:00:00Z", "theirs.com", responseTimeMs=50),
        record("theirs", "shared", "2024-05-01T12:00:00Z", "theirs2.com"),
    )
    for endpoint in ("mine", "theirs"):  # outputs 1 and 2, paused: nothing is sent anywhere
        made = {"kind": "http", "url": f"http://127.0.0.1:9/{endpoint}", "endpointIds": [endpoint], "paused": True}
        assert client.post("/v2/output", json=made, headers=AUTH).status_code == 201
    assert client.post("/v2/alert-rule", json=RULE, headers=AUTH).json["id"] == 1
    return client


def test_the_walk_covers_every_operation(client):
    assert set(operations(client)) == set(CALLS)


@pytest.mark.parametrize("scope", ["read", "write", "ingest", "admin"])
def test_scopes_by_operation(data, runner, scope):
    headers = key(runner, f"k-{scope}", scope)
    for operation in operations(data):
        status = call(data, operation, headers).status_code
        if operation in ANY_KEY or scope == "admin":
            allowed = True
        elif operation in ADMIN_ONLY:
            allowed = False
        else:
            allowed = SCOPE_OF_METHOD[operation[0]] == scope
        assert (status != 403) == allowed, (scope, operation, status)
        assert status < 500, (scope, operation, status)


def test_an_endpoint_limited_key_sees_and_changes_only_its_endpoints(data, runner):
    """Every operation, with an admin key limited to endpoint "mine": nothing of "theirs" is
    seen or changed, and naming "theirs" is a 403."""
    limited = key(runner, "limited", "admin", endpoints=["mine"])
    # An entry about "theirs" in the admin log, which the limited key must not see.
    assert data.put("/v2/client/alias/theirs/shared", json={"alias": "secret"}, headers=AUTH).status_code == 200

    def body(operation):
        response = call(data, operation, limited)
        assert response.status_code == 200, (operation, response.get_data(as_text=True))
        return response

    checks = {}

    def check(operation):
        def register(fn):
            checks[operation] = fn
            return fn

        return register

    @check(("GET", "/v2/client"))
    def _(op):
        assert set(body(op).json["items"]) == {"mine"}
        response = data.get("/v2/client?clientId[]=shared", headers=limited)
        assert set(response.json["items"]) == {"mine"}

    @check(("GET", "/v2/activity-log"))
    def _(op):
        assert {q["endpointId"] for q in body(op).json["queries"]} == {"mine"}
        response = data.get(f"/v2/activity-log?{WINDOW}&clientId[]=shared", headers=limited)
        assert {q["question"] for q in response.json["queries"]} == {"mine.com", "mine2.com"}

    @check(("GET", "/v2/activity-log/csv"))
    def _(op):
        text = body(op).get_data(as_text=True)
        assert "mine.com" in text and "theirs" not in text

    @check(("GET", "/v2/activity-log/realtime"))
    def _(op):
        token = data.get("/v2/auth/token", headers=limited).json["token"]
        response = data.get(f"/v2/activity-log/realtime?authToken={token}", buffered=False)
        chunks = iter(response.response)
        next(chunks)
        later = "2024-06-01T00:00:00Z"  # outside WINDOW: the counts below stay as they were
        ingest(data, record("theirs", "x", later, "live-theirs.com"), record("mine", "x", later, "live-mine.com"))
        event = next(chunks).decode()
        response.close()
        assert "live-mine.com" in event and "live-theirs" not in event

    @check(("GET", "/v2/auth/token"))
    def _(op):
        assert body(op).json["token"]  # the token carries the limit: see the realtime check

    @check(("GET", "/v2/auth/key"))
    def _(op):
        assert body(op).json == {"name": "limited", "scopes": ["admin"], "endpoints": ["mine"]}

    @check(("GET", "/v2/data-availability"))
    def _(op):
        assert body(op).json["recordCount"] == 4  # mine's 3, and its live record; theirs has 3 too

    @check(("GET", "/v2/statistic/count"))
    def _(op):
        assert body(op).json["count"] == 3
        assert data.get(f"/v2/statistic/count?{WINDOW}", headers=AUTH).json["count"] == 5

    @check(("GET", "/v2/statistic/count/{group}"))
    def _(op):
        assert body(op).json["counts"] == [{"value": "mine", "count": 3}]

    @check(("GET", "/v2/statistic/timeseries"))
    def _(op):
        assert sum(q["count"] for q in body(op).json["queries"]) == 3

    @check(("GET", "/v2/statistic/timeseries/{group}"))
    def _(op):
        assert {v for q in body(op).json["queries"] for v in q["count"]} == {"mine"}

    @check(("GET", "/v2/statistic/trend/{group}"))
    def _(op):
        assert [t["value"] for t in body(op).json["trends"]] == ["mine"]

    @check(("GET", "/v2/statistic/latency"))
    def _(op):
        assert (body(op).json["count"], body(op).json["maxMs"]) == (3, 5.0)
        assert data.get(f"/v2/statistic/latency?{WINDOW}", headers=AUTH).json["maxMs"] == 50.0

    @check(("GET", "/v2/statistic/latency/{group}"))
    def _(op):
        assert [g["value"] for g in body(op).json["latencies"]] == ["mine"]

    @check(("GET", "/v2/statistic/first-seen/{group}"))
    def _(op):
        assert {n["value"] for n in body(op).json["names"]} == {"mine.com", "mine2.com", "mine3.com"}

    @check(("GET", "/v2/admin-action"))
    def _(op):
        actions = body(op).json["actions"]
        assert all("theirs" not in json.dumps(a) for a in actions)
        data.put("/v2/client/alias/mine/solo", json={"alias": "ok"}, headers=limited)
        assert [a["action"] for a in body(op).json["actions"]][:1] == ["client.alias.set"]

    @check(("GET", "/v2/access-log"))
    def _(op):
        data.get(f"/v2/activity-log?{WINDOW}", headers=AUTH).close()  # the operator's: not shown
        data.get(f"/v2/activity-log?{WINDOW}", headers=limited).close()
        found = body(op).json["reads"]
        assert found and {r["keyName"] for r in found} == {"limited"}

    @check(("GET", "/v2/privacy"))
    def _(op):
        data.put("/v2/privacy/theirs", json={"question": "drop"}, headers=AUTH)
        assert set(body(op).json["items"]) == {"mine"}, "its own endpoints: neither the default nor theirs"

    theirs_rule = data.post("/v2/alert-rule", json={**RULE, "endpointIds": ["theirs"]}, headers=AUTH).json["id"]

    @check(("GET", "/v2/alert-rule"))
    def _(op):
        assert [rule["endpointIds"] for rule in body(op).json["items"]] == [["mine"]]

    @check(("GET", "/v2/alert-rule/{ruleId}"))
    def _(op):
        assert body(op).json["endpointIds"] == ["mine"]
        assert data.get(f"/v2/alert-rule/{theirs_rule}", headers=limited).status_code == 404

    @check(("GET", "/v2/alert"))
    def _(op):
        assert body(op).json["alerts"] == []

    @check(("POST", "/v2/alert-rule"))
    def _(op):
        assert call(data, op, limited).status_code == 201
        mixed = {**RULE, "endpointIds": ["mine", "theirs"]}
        assert data.post("/v2/alert-rule", json=mixed, headers=limited).status_code == 403

    @check(("PATCH", "/v2/alert-rule/{ruleId}"))
    def _(op):
        assert body(op).json["cooldown"] == 60
        assert data.patch(f"/v2/alert-rule/{theirs_rule}", json={"cooldown": 60}, headers=limited).status_code == 404
        moved = data.patch("/v2/alert-rule/1", json={"endpointIds": ["theirs"]}, headers=limited)
        assert moved.status_code == 403

    @check(("DELETE", "/v2/alert-rule/{ruleId}"))
    def _(op):
        assert body(op).json["id"] == 1
        assert data.delete(f"/v2/alert-rule/{theirs_rule}", headers=limited).status_code == 404
        assert data.get(f"/v2/alert-rule/{theirs_rule}", headers=AUTH).status_code == 200

    @check(("POST", "/v2/ingest"))
    def _(op):
        assert body(op).json == {"accepted": 1, "pastRetention": 1}
        mixed = [record("mine", "m"), record("theirs", "t")]
        response = data.post("/v2/ingest", json=mixed, headers=limited)
        assert response.status_code == 403 and response.json["error"]["code"] == 40302
        assert "m" not in data.get("/v2/client?endpointId=mine", headers=AUTH).json["items"]["mine"]["clients"]

    @check(("POST", "/v2/ingest/losses"))
    def _(op):
        assert body(op).json == {"recorded": 1}
        theirs = {"run": "r1", "endpointId": "theirs", "losses": {"resolver": 5}}
        response = data.post("/v2/ingest/losses", json=theirs, headers=limited)
        assert response.status_code == 403 and response.json["error"]["code"] == 40302
        metrics = data.get("/metrics", headers=AUTH).get_data(as_text=True)
        lost = [line for line in metrics.splitlines() if line.startswith("dns_analytics_feed_lost_records_total")]
        assert lost == ['dns_analytics_feed_lost_records_total{endpoint="mine",place="collector-queue"} 3.0']

    @check(("PUT", "/v2/client/alias/{endpointId}/{clientId}"))
    def _(op):
        assert body(op).json["alias"] == "x"
        response = data.put("/v2/client/alias/theirs/shared", json={"alias": "y"}, headers=limited)
        assert response.status_code == 403
        theirs = data.get("/v2/client?endpointId=theirs", headers=AUTH).json["items"]["theirs"]
        assert theirs["clients"]["shared"]["alias"] == "secret"

    @check(("DELETE", "/v2/client/alias/{endpointId}/{clientId}"))
    def _(op):
        assert body(op).json["alias"] == ""
        assert data.delete("/v2/client/alias/theirs/shared", headers=limited).status_code == 403

    @check(("PUT", "/v2/privacy/{endpointId}"))
    def _(op):
        assert body(op).json["answers"] == "drop"
        assert data.put("/v2/privacy/theirs", json={"answers": "drop"}, headers=limited).status_code == 403
        assert data.put("/v2/privacy/_default", json={"answers": "drop"}, headers=limited).status_code == 403
        assert data.get("/v2/privacy", headers=AUTH).json["items"]["theirs"]["answers"] == "keep"

    @check(("DELETE", "/v2/activity-log"))
    def _(op):
        assert body(op).json == {"deletedCount": 1}  # mine's "shared" record at 10:00 only
        assert data.delete("/v2/activity-log?endpointId=theirs&all=true", headers=limited).status_code == 403
        response = data.delete("/v2/activity-log", json={"endpointIds": ["theirs"]}, headers=limited)
        assert response.status_code == 403
        everything = data.delete("/v2/activity-log?all=true&endTime=2024-05-01T10:00:00Z", headers=limited)
        assert everything.json == {"deletedCount": 1}  # mine's "solo"; theirs at 10:00 stays

    @check(("GET", "/v2/output"))
    def _(op):
        assert [o["name"] for o in body(op).json["outputs"]] == ["http://127.0.0.1:9/mine"]

    @check(("GET", "/v2/output/{outputId}"))
    def _(op):
        assert body(op).json["endpointIds"] == ["mine"]
        assert data.get("/v2/output/2", headers=limited).status_code == 404

    @check(("POST", "/v2/output"))
    def _(op):
        response = call(data, op, limited)
        assert response.status_code == 201 and response.json["endpointIds"] == ["mine"]
        theirs = {"kind": "http", "url": "http://127.0.0.1:9/t", "endpointIds": ["theirs"]}
        assert data.post("/v2/output", json=theirs, headers=limited).status_code == 403
        unnamed = data.post("/v2/output", json={"kind": "http", "url": "http://127.0.0.1:9/u"}, headers=limited)
        assert unnamed.json["endpointIds"] == ["mine"]

    @check(("PATCH", "/v2/output/{outputId}"))
    def _(op):
        assert body(op).json["paused"] is False
        assert data.patch("/v2/output/2", json={"paused": False}, headers=limited).status_code == 404

    @check(("DELETE", "/v2/output/{outputId}"))
    def _(op):
        assert body(op).json["id"] == 1
        assert data.delete("/v2/output/2", headers=limited).status_code == 404
        assert data.get("/v2/output/2", headers=AUTH).json["paused"] is True

    @check(("DELETE", "/v2/client"))
    def _(op):
        response = data.delete(
            "/v2/client", json={"clientIds": ["shared"], "endTime": "2024-05-01T23:00:00Z"}, headers=limited
        )
        assert response.json["deletedClients"] == [{"endpointId": "mine", "clientId": "shared"}]
        assert data.delete("/v2/client", json={"endpointIds": ["theirs"]}, headers=limited).status_code == 403

    @check(("PUT", "/v2/client/logging/{endpointId}/{clientId}"))
    def _(op):
        assert body(op).json["logged"] is False  # made anew: its entry was deleted just before
        response = data.put("/v2/client/logging/theirs/shared", json={"logged": False}, headers=limited)
        assert response.status_code == 403

    assert set(checks) == set(operations(data)), "every operation has its check"
    for operation, run in checks.items():  # in the order written: reads, then changes
        run(operation)

    # After all of that, "theirs" is exactly as it was.
    everything = "startTime=2024-01-01T00:00:00Z&endTime=2025-01-01T00:00:00Z"
    theirs = data.get(f"/v2/activity-log?{everything}&endpointId=theirs", headers=AUTH).json["queries"]
    assert sorted(q["question"] for q in theirs) == ["live-theirs.com", "theirs.com", "theirs2.com"]
    assert set(data.get("/v2/client?endpointId=theirs", headers=AUTH).json["items"]["theirs"]["clients"]) >= {"shared"}
