"""API keys from the command line: created with a secret shown once, stored hashed, listed
without secrets, revoked."""

import pytest

from support import stores
from support.helpers import AUTH, assert_error, create


def test_create_use_list_revoke(runner, client):
    secret = create(runner, "--name", "dash", "--scope", "read")
    assert client.get("/v2/client", headers={"Authorization": secret}).status_code == 200
    assert client.get("/v2/client", headers={"Authorization": f"Bearer {secret}"}).status_code == 200

    listing = runner.invoke(args=["keys", "list"]).output
    assert "dash" in listing and "read" in listing and "active" in listing
    assert secret not in listing

    result = runner.invoke(args=["keys", "revoke", "dash"])
    assert result.exit_code == 0, result.output
    assert_error(client.get("/v2/client", headers={"Authorization": secret}), 401, 40102)
    assert "revoked" in runner.invoke(args=["keys", "list"]).output
    assert runner.invoke(args=["keys", "revoke", "dash"]).exit_code != 0, "already revoked"


def test_revoke_by_id(runner, client):
    secret = create(runner, "--name", "a", "--scope", "admin")
    create(runner, "--name", "b", "--scope", "admin")
    assert runner.invoke(args=["keys", "revoke", "1"]).exit_code == 0
    assert client.get("/v2/client", headers={"Authorization": secret}).status_code == 401


def test_a_name_that_looks_like_an_id_is_the_name(runner, client):
    first = create(runner, "--name", "first", "--scope", "read")
    second = create(runner, "--name", "1", "--scope", "read")  # id 2, named "1"
    assert "Revoked key 2 '1'" in runner.invoke(args=["keys", "revoke", "1"]).output
    assert client.get("/v2/client", headers={"Authorization": second}).status_code == 401
    assert client.get("/v2/client", headers={"Authorization": first}).status_code == 200


def test_keys_are_stored_only_as_hashes(runner, database):
    secrets = [create(runner, "--name", f"k{i}", "--scope", "read", "--endpoint", "e1") for i in range(3)]
    stored = stores.run_sql(database, "SELECT * FROM api_key")
    raw = b""
    if not stores.is_postgres(database):  # the whole file, free pages and WAL included
        stores.run_sql(database, "PRAGMA wal_checkpoint(TRUNCATE)")
        raw = open(database, "rb").read()
    for secret in secrets:
        assert secret.encode() not in raw
        assert all(secret not in str(row) and secret[5:] not in str(row) for row in stored)
        assert secret[5:].encode() not in raw


def test_names_are_unique_and_options_checked(runner):
    create(runner, "--name", "same", "--scope", "read")
    assert runner.invoke(args=["keys", "create", "--name", "same", "--scope", "read"]).exit_code != 0
    assert runner.invoke(args=["keys", "create", "--name", "x", "--scope", "superuser"]).exit_code != 0
    assert runner.invoke(args=["keys", "create", "--name", "y"]).exit_code != 0, "a scope is required"
    assert runner.invoke(args=["keys", "create", "--name", " ", "--scope", "read"]).exit_code != 0


@pytest.mark.parametrize("header", ["dnsa_not-a-real-key", "Bearer dnsa_x", "x" * 5000])
def test_unknown_secrets_are_401(client, header):
    assert_error(client.get("/v2/client", headers={"Authorization": header}), 401, 40102)


def test_the_operator_key_keeps_working(runner, client):
    create(runner, "--name", "other", "--scope", "read")
    assert client.get("/v2/client", headers=AUTH).status_code == 200


def test_failed_attempts_past_the_free_ones_are_a_429_per_address_but_valid_keys_never(client):
    from app.guards.failed_auth import FailedAttempts

    client.application.extensions["guards"].failed_auth = FailedAttempts(free=5)
    for attempt in range(12):
        response = client.get("/v2/client", headers={"Authorization": "guess"})
        if attempt < 5:
            assert_error(response, 401, 40102)
        else:
            assert_error(response, 429, 42903)
            assert 1 <= int(response.headers["Retry-After"]) <= 60
        assert client.get("/v2/client", headers=AUTH).status_code == 200
    other = {"REMOTE_ADDR": "192.0.2.99"}
    response = client.get("/v2/client", headers={"Authorization": "guess"}, environ_base=other)
    assert_error(response, 401, 40102)  # another address has a count of its own


def test_requests_without_a_key_count_as_failures_too(client):
    from app.guards.failed_auth import FailedAttempts

    client.application.extensions["guards"].failed_auth = FailedAttempts(free=3)
    for _ in range(3):
        assert_error(client.get("/v2/client"), 401, 40101)
    assert_error(client.get("/v2/client"), 429, 42903)
    assert_error(client.get("/v2/activity-log/realtime?authToken=forged"), 429, 42903)
    assert client.get("/v2/client", headers=AUTH).status_code == 200
