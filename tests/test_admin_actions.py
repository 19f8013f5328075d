"""GET /v2/admin-action: every change is recorded with who, when, from where and what."""

import pytest

from support import stores
from support.helpers import AUTH, assert_error, ingest, record

SINCE = "startTime=2020-01-01T00:00:00Z"


def actions(client, query=""):
    response = client.get(f"/v2/admin-action?{SINCE}&{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["actions"]


@pytest.fixture
def data(client):
    ingest(client, record("e1", "a", "2024-05-01T10:00:00Z"), record("e1", "b", "2024-05-01T11:00:00Z"))
    return client


def test_each_change_is_recorded(data, runner):
    data.put("/v2/client/alias/e1/a", json={"alias": "TV"}, headers=AUTH)
    data.delete("/v2/client/alias/e1/a", headers=AUTH)
    data.delete("/v2/activity-log?endpointId=e1&endTime=2024-05-01T10:30:00Z", headers=AUTH)
    data.delete("/v2/client", json={"clientIds": ["a"], "endTime": "2024-05-01T10:30:00Z"}, headers=AUTH)
    runner.invoke(args=["keys", "create", "--name", "k", "--scope", "read"])
    runner.invoke(args=["keys", "revoke", "k"])

    log = actions(data)
    assert [a["action"] for a in log] == [
        "key.revoke",
        "key.create",
        "client.delete",
        "activity_log.delete",
        "client.alias.clear",
        "client.alias.set",
    ]
    alias = log[-1]
    assert alias["keyId"] is None and alias["keyName"] == "operator" and alias["sourceIp"] == "127.0.0.1"
    assert alias["timestamp"].endswith("Z") and isinstance(alias["id"], int)
    assert alias["metadata"] == {
        "path": {"endpointId": "e1", "clientId": "a"},
        "query": {},
        "body": {"alias": "TV"},
        "result": {"alias": "TV"},
    }
    deletion = log[3]["metadata"]
    assert deletion["query"] == {"endpointId": "e1", "endTime": "2024-05-01T10:30:00Z"}
    assert deletion["result"] == {"deletedCount": 1}
    clients = log[2]["metadata"]
    assert clients["body"] == {"clientIds": ["a"], "endTime": "2024-05-01T10:30:00Z"}
    assert clients["result"]["deletedClients"] == [{"endpointId": "e1", "clientId": "a"}]
    assert log[0]["keyName"] == "cli" and log[0]["metadata"]["result"]["name"] == "k"


def test_a_stored_key_is_named_in_the_log(data, runner):
    output = runner.invoke(args=["keys", "create", "--name", "ops", "--scope", "write"]).output
    secret = output.strip().splitlines()[-1]
    data.put("/v2/client/alias/e1/b", json="x", headers={"Authorization": secret, "X-Forwarded-For": "203.0.113.9"})
    entry = actions(data, "action=client.alias.set")[0]
    assert (entry["keyId"], entry["keyName"]) == (1, "ops")
    assert entry["sourceIp"] == "127.0.0.1", "X-Forwarded-For is not trusted by default"


def test_failed_changes_leave_no_entry(data, database):
    assert_error(data.put("/v2/client/alias/e1/zz", json="x", headers=AUTH), 404)
    assert_error(data.put("/v2/client/alias/e1/a", json="", headers=AUTH), 400)
    assert_error(data.delete("/v2/client", json={}, headers=AUTH), 400)
    assert_error(data.delete("/v2/activity-log", headers=AUTH), 400)
    assert actions(data) == []


# The SQL store's own parts (docs/testing.md, "Engines"): the failure is a trigger on its blocks.
@pytest.mark.sql_store
def test_a_deletion_refused_at_its_first_records_leaves_no_entry(data, database):
    # A client deletion commits its records before its entries (docs/api.md): refused at its
    # first records, it commits nothing.
    stores.refuse_deletes(database, "record_block")
    assert_error(data.delete("/v2/client", json={"endTime": "2030-01-01T00:00:00Z"}, headers=AUTH), 500)
    assert actions(data) == []


def test_filters_and_paging(data):
    for i in range(5):
        data.put("/v2/client/alias/e1/a", json={"alias": f"name-{i}"}, headers=AUTH)
    data.delete("/v2/client/alias/e1/b", headers=AUTH)
    assert len(actions(data)) == 6
    assert len(actions(data, "action=client.alias.set")) == 5
    assert [a["metadata"]["result"]["alias"] for a in actions(data, "search=name-3")] == ["name-3"]
    assert [a["action"] for a in actions(data, "search=ALIAS.CLEAR")] == ["client.alias.clear"], "ignores case"
    assert actions(data, "search=50%") == [], "LIKE wildcards are literal"
    first = actions(data, "pageSize=4")
    second = actions(data, "pageSize=4&page=1")
    assert len(first) == 4 and len(second) == 2
    assert [a["id"] for a in first + second] == sorted((a["id"] for a in first + second), reverse=True)
    newest = first[0]["timestamp"]
    assert actions(data, "endTime=2020-01-02T00:00:00Z") == []
    assert len(data.get(f"/v2/admin-action?startTime={newest}", headers=AUTH).json["actions"]) >= 1


def test_parameters_and_scope(data, runner):
    assert_error(data.get("/v2/admin-action", headers=AUTH), 400, 40003)
    assert_error(data.get(f"/v2/admin-action?{SINCE}&pageSize=501", headers=AUTH), 400, 40001)
    output = runner.invoke(args=["keys", "create", "--name", "r", "--scope", "read", "--scope", "write"]).output
    reader = {"Authorization": output.strip().splitlines()[-1]}
    assert_error(data.get(f"/v2/admin-action?{SINCE}", headers=reader), 403, 40301)


def test_search_finds_non_ascii_text(data):
    data.put("/v2/client/alias/e1/a", json={"alias": "Küche"}, headers=AUTH)
    assert [a["metadata"]["result"]["alias"] for a in actions(data, "search=Küche")] == ["Küche"]
