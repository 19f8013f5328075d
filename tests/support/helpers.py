"""Helpers the tests share: records, ingestion, the ErrorResponse check, API keys made on the
command line, metrics scrapes parsed, and waiting for a condition."""

import time

from prometheus_client.parser import text_string_to_metric_families

API_KEY = "test-operator-key"
AUTH = {"Authorization": API_KEY}


def record(endpoint="ep1", client_id="cl1", timestamp="2024-05-01T12:00:00Z", question="example.com", **extra):
    """A valid wire record; keyword arguments add or replace fields."""
    return {
        "timestamp": timestamp,
        "endpointId": endpoint,
        "clientId": client_id,
        "question": question,
        **extra,
    }


def ingest(client, *records, expect=200):
    response = client.post("/v2/ingest", json=list(records), headers=AUTH)
    assert response.status_code == expect, response.json
    return response


def clients(client, query=""):
    response = client.get(f"/v2/client{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json["items"]


def assert_error(response, status, code=None):
    """The ErrorResponse shape of API.md, with this status (and code, when given)."""
    assert response.status_code == status, response.get_data(as_text=True)
    body = response.json
    assert set(body) == {"success", "error"}
    assert body["success"] is False
    assert set(body["error"]) == {"message", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert str(body["error"]["code"]).startswith(str(status))
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


def create(runner, *args):
    result = runner.invoke(args=["keys", "create", *args])
    assert result.exit_code == 0, result.output
    return result.output.strip().splitlines()[-1]


def samples(text: str) -> dict:
    """{(sample name, sorted labels): value} of a scrape."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def wait_for(condition, timeout=30.0, what="the condition"):
    """Return once `condition()` is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# The states of the counting behind the records (models/statistics/counting.py) a read is checked in: every
# record counted as it was stored, or every one still waiting (read from the records).
COUNTING = {"counted": 0, "waiting": 1_000_000}


def count_as(app, state: str):
    """Count records as COUNTING[state] says, as a gunicorn web worker sets it (for
    a test module's app fixture; conftest sets it back after each test)."""
    import models.statistics.counting

    models.statistics.counting.behind_limit = app.config["ANALYTICS_COUNT_BEHIND"] = COUNTING[state]
    return app
