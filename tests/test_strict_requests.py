"""Strict requests (issue 42): what an operation does not understand is a 400 that names it and
changes nothing; types are what the document says; the document holds what the service answers."""

import schemathesis

from support.helpers import AUTH, assert_error, clients, ingest, record


def log_count(client, query: str) -> int:
    response = client.get(f"/v2/statistic/count?startTime=2024-01-01T00:00:00Z&{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["count"]


def three_clients(client):
    ingest(client, *[record("e1", f"c{i % 3}", question=f"q{i}.example.com") for i in range(30)])


def test_a_misspelt_filter_deletes_nothing(client):
    three_clients(client)
    error = assert_error(client.delete("/v2/activity-log?endpointId=e1&clientid[]=c1", headers=AUTH), 400, 40001)
    assert "'clientid[]'" in error["message"] and "'clientId[]'" in error["message"]
    assert log_count(client, "endpointId[]=e1") == 30
    # The filter spelt right deletes the client's 10 alone.
    response = client.delete("/v2/activity-log?endpointId=e1&clientId[]=c1", headers=AUTH)
    assert response.json == {"deletedCount": 10}


def test_a_misspelt_body_field_deletes_no_client(client):
    three_clients(client)
    body = {"endpointIds": ["e1"], "clientld": ["c1"], "endTime": "2030-01-01T00:00:00Z"}
    error = assert_error(client.delete("/v2/client", json=body, headers=AUTH), 400, 40001)
    assert "'clientld'" in error["message"] and "'clientIds'" in error["message"]
    assert sorted(clients(client)["e1"]["clients"]) == ["c0", "c1", "c2"]


def test_a_misspelt_filter_does_not_widen_a_read(client):
    three_clients(client)
    error = assert_error(client.get("/v2/statistic/count?startTime=-1d&cleintId=c1", headers=AUTH), 400, 40001)
    assert "'cleintId'" in error["message"] and "'clientId[]'" in error["message"]


def test_another_apis_paging_name_is_refused_with_ours(client):
    error = assert_error(client.get("/v2/activity-log?startTime=-1d&limit=5", headers=AUTH), 400, 40001)
    assert "'limit'" in error["message"] and "'pageSize'" in error["message"]


def test_operations_without_parameters_refuse_them(client):
    assert "'foo'" in assert_error(client.get("/v2/privacy?foo=1", headers=AUTH), 400, 40001)["message"]
    assert_error(client.get("/v2/alert-rule?foo=1", headers=AUTH), 400, 40001)
    assert_error(client.post("/v2/ingest?endpointId=e1", json=[record()], headers=AUTH), 400, 40001)
    assert clients(client) == {}


def test_parameters_starting_with_an_underscore_are_ignored(client):
    three_clients(client)
    assert client.get("/v2/client?_=1700000000&endpointId=e1", headers=AUTH).status_code == 200
    assert client.get("/v2/privacy?_=1700000000", headers=AUTH).status_code == 200
    assert log_count(client, "endpointId[]=e1&_=1") == 30


def test_a_float_for_an_integer_is_refused_and_nothing_stored(client):
    before = client.get("/v2/privacy", headers=AUTH).json
    body = {"clientIp": "truncate", "ipv4Prefix": 24.9}
    assert "'ipv4Prefix'" in assert_error(client.put("/v2/privacy/e1", json=body, headers=AUTH), 400, 40001)["message"]
    assert client.get("/v2/privacy", headers=AUTH).json == before


def test_a_nested_unknown_field_is_named_with_its_path(client):
    body = {"steps": [{"afterDays": 3, "clientIP": "drop"}]}
    error = assert_error(client.put("/v2/privacy/e1", json=body, headers=AUTH), 400, 40001)
    assert "'steps[0].clientIP'" in error["message"] and "'clientIp'" in error["message"]


def test_a_number_for_a_boolean_is_refused(client):
    three_clients(client)
    assert_error(client.put("/v2/client/logging/e1/c1", json={"logged": 0}, headers=AUTH), 400, 40001)
    assert clients(client)["e1"]["clients"]["c1"]["logged"] is True
    assert log_count(client, "clientId[]=c1") == 10
    # In a query string a boolean is written true or false, not 1 or yes.
    assert_error(client.get("/v2/statistic/count?startTime=-1d&cached[]=1", headers=AUTH), 400, 40001)
    ingest(client, record("e1", "c1", cached=False))
    assert log_count(client, "cached[]=false") == log_count(client, "cached[]=False") == 1


def test_a_record_less_client_entry_is_what_the_document_says(app, client):
    assert client.put("/v2/client/logging/e1/quiet", json={"logged": False}, headers=AUTH).status_code == 200
    response = client.get("/v2/client", headers=AUTH)
    assert response.json["items"]["e1"]["clients"]["quiet"]["lastActivityTime"] is None
    document = schemathesis.openapi.from_wsgi("/v2/openapi.json", app)
    document["/v2/client"]["GET"].validate_response(response)
    entry = client.put("/v2/client/logging/e1/quiet", json={"logged": False}, headers=AUTH)
    document["/v2/client/logging/{endpointId}/{clientId}"]["PUT"].validate_response(entry)
