"""Cross-origin access (ANALYTICS_CORS_ORIGINS): off by default, on only for the listed origins."""

import pytest

from support.helpers import AUTH, assert_error

ALLOWED = "http://dashboard.example"
OTHER = "http://elsewhere.example"
PREFLIGHT = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}


@pytest.fixture(autouse=True)
def no_cors_in_environment(monkeypatch):
    monkeypatch.delenv("ANALYTICS_CORS_ORIGINS", raising=False)


@pytest.fixture
def make_client(make_app, tmp_path):
    """A test client of an app on a SQLite file of its own, with these settings."""
    return lambda **config: make_app(ANALYTICS_DATABASE=str(tmp_path / "analytics.db"), **config).test_client()


def test_off_by_default_no_header_and_no_preflight(client):
    response = client.get("/v2/auth/token", headers={**AUTH, "Origin": ALLOWED})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Origin" not in response.vary
    preflight = client.options("/v2/auth/token", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert not any(name.startswith("Access-Control-") for name in preflight.headers.keys())


def test_listed_origins_get_the_header_others_do_not(make_client):
    client = make_client(ANALYTICS_CORS_ORIGINS=f"{ALLOWED}, http://second.example/")
    for origin in (ALLOWED, "http://second.example"):
        response = client.get("/v2/auth/token", headers={**AUTH, "Origin": origin})
        assert response.headers["Access-Control-Allow-Origin"] == origin
        assert "Origin" in response.vary
    response = client.get("/v2/auth/token", headers={**AUTH, "Origin": OTHER})
    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Origin" in response.vary  # a cache must not hand this answer to a listed origin


def test_errors_carry_the_header_so_the_page_can_read_them(make_client):
    client = make_client(ANALYTICS_CORS_ORIGINS=ALLOWED)
    response = client.get("/v2/auth/token", headers={"Origin": ALLOWED})
    assert_error(response, 401, 40101)
    assert response.headers["Access-Control-Allow-Origin"] == ALLOWED


def test_preflight_is_answered_without_a_key_for_listed_origins_only(make_client):
    client = make_client(ANALYTICS_CORS_ORIGINS=ALLOWED)
    preflight = client.options("/v2/auth/token", headers={"Origin": ALLOWED, **PREFLIGHT})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert "Authorization" in preflight.headers["Access-Control-Allow-Headers"]
    assert "GET" in preflight.headers["Access-Control-Allow-Methods"]
    refused = client.options("/v2/auth/token", headers={"Origin": OTHER, **PREFLIGHT})
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert "Access-Control-Allow-Headers" not in refused.headers


def test_environment_sets_it_too(make_client, monkeypatch):
    monkeypatch.setenv("ANALYTICS_CORS_ORIGINS", ALLOWED)
    response = make_client().get("/v2/openapi.json", headers={"Origin": ALLOWED})
    assert response.headers["Access-Control-Allow-Origin"] == ALLOWED
