"""Schema-driven fuzzing with schemathesis: every operation of /v2/openapi.json, bounded."""

import json
import os
import tempfile

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app import create_app

from helpers import API_KEY, ingest, record


def fuzz_app():
    """The app under fuzzing, on its own temporary database with some records in it.
    (schemathesis parametrizes at import time, so this one app is built then.)"""
    path = tempfile.mkdtemp(prefix="fuzz-")
    app = create_app(
        {
            "TESTING": True,
            "PROPAGATE_EXCEPTIONS": False,
            "INSTANCE_PATH": os.path.join(path, "i"),
            "ANALYTICS_DATABASE": os.path.join(path, "fuzz.db"),
            "ANALYTICS_API_KEY": API_KEY,
        }
    )
    ingest(app.test_client(), *[record(f"e{i % 3}", f"c{i % 5}", question=f"q{i}.example.com") for i in range(50)])
    return app


# The realtime stream never ends by itself: it has its own tests.
schema = schemathesis.openapi.from_wsgi("/v2/openapi.json", fuzz_app()).exclude(path="/v2/activity-log/realtime")


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    """NDJSON ingest bodies are documented as text: send the generated text as it is."""
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else json.dumps(value).encode()


def error_body_is_an_error_response(ctx, response, case):
    if response.status_code >= 400:
        body = json.loads(response.content)
        assert set(body) == {"success", "error"} and body["success"] is False, body
        assert set(body["error"]) == {"message", "code"}, body
        assert str(body["error"]["code"]).startswith(str(response.status_code)), body


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation(case):
    case.call_and_validate(
        headers={"Authorization": API_KEY},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
        additional_checks=[schemathesis.check(error_body_is_an_error_response)],
    )
