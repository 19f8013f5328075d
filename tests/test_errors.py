"""One error shape for everything: validation, routing, auth, crashes; the documented codes."""

import os
import re

from app.errors import ErrorCode

from support import stores
from support.helpers import AUTH, assert_error, ingest, record


def test_400_names_the_parameter(client):
    error = assert_error(client.get("/v2/client?clientId[]=", headers=AUTH), 400, 40001)
    assert "clientId" in error["message"]


def test_400_invalid_datetime_has_its_own_code(client):
    error = assert_error(client.delete("/v2/activity-log?all=true&endTime=soon", headers=AUTH), 400, 40002)
    assert "endTime" in error["message"]


def test_400_not_422_for_body_validation(client):
    assert_error(client.delete("/v2/client", json={"endpointIds": [3]}, headers=AUTH), 400, 40001)


def test_401_missing_and_invalid_key(client):
    assert_error(client.get("/v2/client"), 401, 40101)
    assert_error(client.get("/v2/client", headers={"Authorization": "wrong"}), 401, 40102)


def test_404_unknown_path(client):
    assert_error(client.get("/v2/nothing-here", headers=AUTH), 404, 40401)
    assert_error(client.get("/nothing-here", headers=AUTH), 404, 40401)  # "/" is the dashboard
    assert_error(client.get("/dashboard/assets/no-such.js"), 404, 40401)
    assert_error(client.get("/dashboard/assets/../../__init__.py"), 404, 40401)


def test_405_wrong_method_keeps_allow_header(client):
    response = client.patch("/v2/client", headers=AUTH)
    assert_error(response, 405, 40501)
    assert "GET" in response.headers["Allow"]


def test_500_does_not_leak_internals(client, database):
    ingest(client, record())
    stores.run_sql(database, "DROP TABLE client")
    response = client.get("/v2/client", headers=AUTH)
    error = assert_error(response, 500, 50001)
    text = response.get_data(as_text=True)
    assert error["message"] == "Internal server error."
    for leak in ("Traceback", "SELECT", "sqlite", "psycopg", "no such table", "relation", "client c"):
        assert leak not in text


def test_unknown_query_parameters_are_refused(client):
    # Issue 42 overrides the contract's "ignored": a misspelt filter must not widen a read.
    ingest(client, record())
    response = client.get("/v2/client?colour=blue&endpointId=ep1", headers=AUTH)
    assert_error(response, 400, 40001)
    assert "colour" in response.json["error"]["message"]


def test_every_error_code_is_in_the_docs_table():
    table = open(os.path.join(os.path.dirname(__file__), "..", "docs", "errors.md"), encoding="utf-8").read()
    documented = {int(code) for code in re.findall(r"^\| `?(\d{5})`? \|", table, re.MULTILINE)}
    assert documented == {int(code) for code in ErrorCode}
