"""Schema-driven fuzzing with schemathesis: every operation of /v2/openapi.json, bounded."""

import json
import os
import tempfile

import postgres
import pytest
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
from servers import FAST_ONLY


def fuzz_app(database):
    """The app under fuzzing, on its own database with some records in it. (schemathesis
    parametrizes at import time, so these apps are built then, one per engine.)"""
    path = tempfile.mkdtemp(prefix="fuzz-")
    app = create_app(
        {
            "TESTING": True,
            "PROPAGATE_EXCEPTIONS": False,
            "INSTANCE_PATH": os.path.join(path, "i"),
            "ANALYTICS_DATABASE": database or os.path.join(path, "fuzz.db"),
            "ANALYTICS_API_KEY": API_KEY,
        }
    )
    ingest(app.test_client(), *[record(f"e{i % 3}", f"c{i % 5}", question=f"q{i}.example.com") for i in range(50)])
    return app


def schema_for(database=None):
    # The realtime stream never ends by itself: it has its own tests.
    app = fuzz_app(database)
    return schemathesis.openapi.from_wsgi("/v2/openapi.json", app).exclude(path="/v2/activity-log/realtime")


schema = schema_for()


def postgres_schema_for_this_run():
    """The same on PostgreSQL (schemathesis parametrizes at import time, so the session's server
    starts when this module is collected), except in the fast lane, which starts no server."""
    if os.environ.get(FAST_ONLY):
        return None
    postgres.start_once()
    return None if postgres.UNAVAILABLE else schema_for(postgres.CLUSTER.new_database())


postgres_schema = postgres_schema_for_this_run()


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


def call_and_validate(case):
    case.call_and_validate(
        headers={"Authorization": API_KEY},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
        additional_checks=[schemathesis.check(error_body_is_an_error_response)],
    )


FUZZ = settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))


@schema.parametrize()
@FUZZ
def test_every_operation(case):
    call_and_validate(case)


if postgres_schema is not None:

    @pytest.mark.system
    @postgres_schema.parametrize()
    @FUZZ
    def test_every_operation_on_postgresql(case):
        call_and_validate(case)

else:

    @pytest.mark.system
    def test_every_operation_on_postgresql():
        pytest.skip(postgres.banner() if postgres.UNAVAILABLE else "the fast lane starts no PostgreSQL")
