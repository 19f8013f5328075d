"""Security basics: response headers, and no secrets in the server's logs."""

import http.client

from support.helpers import API_KEY, AUTH, ingest, record
from support.servers import Gunicorn


def test_security_headers_on_answers_and_errors(client):
    ingest(client, record())
    for response in (
        client.get("/v2/client", headers=AUTH),
        client.get("/v2/client"),  # a 401
        client.get("/v2/nowhere", headers=AUTH),  # a 404
        client.get("/v2/activity-log/csv?startTime=2024-05-01T00:00:00Z", headers=AUTH),
    ):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert response.headers["Cache-Control"] == "no-store"
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]


def test_cors_is_off_by_default(client):
    response = client.get("/v2/client", headers={**AUTH, "Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in response.headers


def test_no_keys_or_tokens_in_the_server_log(tmp_path):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "s.db"), "ANALYTICS_API_KEY": API_KEY})
    try:
        status, body = server.call("GET", "/v2/auth/token", headers=AUTH)
        token = body["token"]
        # Redeem the token (the stream is closed by the client right away).
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", f"/v2/activity-log/realtime?authToken={token}")
        assert connection.getresponse().status == 200
        connection.close()
        wrong = "dnsa_this-is-a-guessed-secret"
        for _ in range(3):
            server.call("GET", "/v2/client", headers={"Authorization": wrong})
        server.call("POST", "/v2/ingest", [record()], AUTH)
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "/v2/activity-log/realtime" in log, "the access log is there"
    for secret in (token, API_KEY, wrong):
        assert secret not in log


def test_the_database_files_are_readable_by_their_owner_only(make_app, tmp_path):
    import stat

    from support.helpers import AUTH, ingest, record

    path = tmp_path / "private" / "analytics.db"
    app = make_app(ANALYTICS_DATABASE=str(path))
    ingest(app.test_client(), record())
    assert app.test_client().get("/v2/client", headers=AUTH).status_code == 200
    for name in (path, path.with_name(path.name + "-wal")):
        assert stat.S_IMODE(name.stat().st_mode) & 0o077 == 0, (name, oct(name.stat().st_mode))
