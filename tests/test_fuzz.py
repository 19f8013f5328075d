"""Schema-driven fuzzing with schemathesis: every operation of /v2/openapi.json with every check
schemathesis has (as `st run --checks all`: positive and negative data), bounded."""

import itertools
import json
import os
import tempfile

import postgres
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks

from app import create_app

from helpers import API_KEY, ingest, record
from servers import FAST_ONLY


def fuzz_app(database):
    """The app under fuzzing, on its own database with some records in it, and client entries
    with none (one marked not logged, one whose records were deleted, with an alias), whose
    lastActivityTime is null. (schemathesis parametrizes at import time, so these apps are
    built then, one per engine.)"""
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
    client = app.test_client()
    ingest(client, *[record(f"e{i % 3}", f"c{i % 5}", question=f"q{i}.example.com") for i in range(50)])
    auth = {"Authorization": API_KEY}
    assert client.put("/v2/client/logging/e0/quiet", json={"logged": False}, headers=auth).status_code == 200
    assert client.delete("/v2/activity-log?endpointId=e1&clientId[]=c1", headers=auth).status_code == 200
    assert client.put("/v2/client/alias/e1/c1", json={"alias": "gone"}, headers=auth).status_code == 200
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


load_all_checks()
EVERY_CHECK = list(CHECKS.get_all())
# Each case comes from an address of its own: the service answers a 429 to an address past 10
# failed authentications a minute (docs/api.md), and ignored_auth's probes without the key are
# such failures, a few per case.
ADDRESSES = (f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in itertools.count(1))


def call_and_validate(case):
    case.call_and_validate(
        headers={"Authorization": API_KEY},
        environ_base={"REMOTE_ADDR": next(ADDRESSES)},
        checks=EVERY_CHECK,
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
