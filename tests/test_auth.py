"""Authentication: the Authorization header, raw or Bearer; checked before validation."""

from support.helpers import API_KEY, AUTH, assert_error, ingest, record


def test_raw_key_and_bearer_are_accepted(client):
    for header in (API_KEY, f"Bearer {API_KEY}", f"bearer   {API_KEY}"):
        assert client.get("/v2/client", headers={"Authorization": header}).status_code == 200


def test_every_operation_needs_a_key(client):
    from app.guards.failed_auth import FailedAttempts

    client.application.extensions["guards"].failed_auth = FailedAttempts(free=100)  # 12 failures here
    ingest(client, record())
    calls = [
        ("GET", "/v2/client"),
        ("DELETE", "/v2/client"),
        ("PUT", "/v2/client/alias/ep1/cl1"),
        ("DELETE", "/v2/client/alias/ep1/cl1"),
        ("POST", "/v2/ingest"),
        ("DELETE", "/v2/activity-log"),
    ]
    for method, path in calls:
        assert_error(client.open(path, method=method, json={"alias": "x"}), 401, 40101)
        bad = {"Authorization": "Bearer nope"}
        assert_error(client.open(path, method=method, json={"alias": "x"}, headers=bad), 401, 40102)
    assert client.get("/v2/client", headers=AUTH).json["items"]["ep1"]["clients"]["cl1"]["alias"] == ""


def test_auth_is_checked_before_input_validation(client):
    assert_error(client.get("/v2/client?clientId[]="), 401, 40101)
    assert_error(client.post("/v2/ingest", data="not json"), 401, 40101)


def test_a_prefix_of_the_key_is_not_the_key(client):
    for wrong in (API_KEY[:-1], API_KEY + "x", API_KEY.upper(), ""):
        assert client.get("/v2/client", headers={"Authorization": wrong}).status_code == 401


def test_no_key_configured_means_no_access(app, client):
    app.config["ANALYTICS_API_KEY"] = None
    assert_error(client.get("/v2/client", headers=AUTH), 401, 40102)


def test_the_api_description_is_public(client):
    response = client.get("/v2/openapi.json")
    assert response.status_code == 200
    assert response.json["components"]["securitySchemes"]["ApiKey"]["name"] == "Authorization"


def test_a_key_can_read_what_it_may_do(client, runner):
    """GET /v2/auth/key: the page's way to know which controls to show; never the secret."""
    assert client.get("/v2/auth/key", headers=AUTH).json == {
        "name": "operator",
        "scopes": ["admin", "ingest", "metrics", "read", "write"],
        "endpoints": None,
    }
    result = runner.invoke(args=["keys", "create", "--name", "viewer", "--scope", "read", "--endpoint", "b"])
    secret = result.output.strip().splitlines()[-1]
    answer = client.get("/v2/auth/key", headers={"Authorization": secret}).json
    assert answer == {"name": "viewer", "scopes": ["read"], "endpoints": ["b"]}
    assert secret not in client.get("/v2/auth/key", headers={"Authorization": secret}).get_data(as_text=True)
    assert_error(client.get("/v2/auth/key"), 401, 40101)
    assert_error(client.get("/v2/auth/key", headers={"Authorization": "wrong"}), 401, 40102)
