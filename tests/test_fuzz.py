"""Schema-driven fuzzing with schemathesis: every operation of /v2/openapi.json with every check
schemathesis has (as `st run --checks all`: positive and negative data), bounded."""

import itertools
import json
import os
import re
import tempfile

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import positive_data_acceptance as schemathesis_positive_data_acceptance

from app import create_app

from support import postgres
from support.helpers import API_KEY, ingest, record
from support.servers import FAST_ONLY


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


@schemathesis.check
def error_body_is_an_error_response(ctx, response, case):
    if response.status_code >= 400:
        body = json.loads(response.content)
        assert set(body) == {"success", "error"} and body["success"] is False, body
        assert set(body["error"]) == {"message", "code"}, body
        assert str(body["error"]["code"]).startswith(str(response.status_code)), body


load_all_checks()
EVERY_CHECK = [check for check in CHECKS.get_all() if check is not schemathesis_positive_data_acceptance]
# Each case comes from an address of its own: the service answers a 429 to an address past 10
# failed authentications a minute (docs/api.md), and ignored_auth's probes without the key are
# such failures, a few per case.
ADDRESSES = (f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in itertools.count(1))


# What a schema cannot say, each a 400 of its own (docs/testing.md): positive_data_acceptance
# takes these answers to schema-valid requests for refusals the service owes, by their message.
KNOWN_REFUSALS = {
    "a sweeping deletion needs its confirmation": r"^Deleting (every client|the records of every endpoint) needs",
    "a window starts no later than it ends": r"^Invalid '(startTime|baselineStartTime)': \w+ is after \w+\.$",
    "an NDJSON body's lines are JSON records": r"^Line \d+ is not valid JSON\.$",
    "an output's URL is its kind's": r"^Invalid 'url': an? \w+ output needs",
    "an output's header names are HTTP tokens": r"is not a header name$",
    "an alert rule takes its kind's fields only": r"^Invalid '\w+': not a field of kind ",
    "an alert rule has its kind's required fields": r"^Missing required field '\w+' \(kind ",
    "an alert destination is a URL a sender knows": r"^Invalid 'destinations\[\d+\]': neither http",
    "a date-time lies in the years 1 to 9999": r"outside the years 1 to 9999\.$",
    "a trend's baseline window (as long as the window, before it) starts in the year 1 or later": (
        r"the windows would begin before the year 1\.$"
    ),
    "a window and interval make no more buckets than limit": r"^Invalid '(limit|interval)': .*buckets",
    "no string holds a NUL character": r"must not contain NUL characters\.$",
    "a pattern (searchQuestion in regex mode, an alert's watched pattern) is one RE2 runs": (
        r"not a pattern this service runs \(RE2 syntax\)"
    ),
    "an output takes its kind's fields only": r"^Invalid '\w+': not an option of an? \w+ output",
    "an output's tls.caCert is a PEM certificate": r"^Invalid 'tls\.caCert': not a PEM certificate",
    "a client-share rule's threshold is a share (0 to 1) with metric share": r"^Invalid 'threshold'",
    "each age step has an afterDays of its own": r"^Invalid 'steps': Each step has an afterDays of its own\.$",
    "a record's own rules (an id or question is not empty; QueryData is also the answers' shape)": r"^Record \d+: ",
}


def positive_data_acceptance(ctx, response, case):
    """schemathesis' check, but for the known refusals above."""
    if response.status_code == 400:
        message = json.loads(response.content)["error"]["message"]
        if any(re.search(pattern, message) for pattern in KNOWN_REFUSALS.values()):
            return None
    return schemathesis_positive_data_acceptance(ctx, response, case)


def call_and_validate(case):
    # A case that leaves out the required Authorization header is sent without it.
    without_key = case.meta is not None and case.meta.is_negative_at(ParameterLocation.HEADER)
    case.call_and_validate(
        headers=None if without_key else {"Authorization": API_KEY},
        environ_base={"REMOTE_ADDR": next(ADDRESSES)},
        checks=EVERY_CHECK,
        additional_checks=[error_body_is_an_error_response, positive_data_acceptance],
    )


# Derandomized: the suite's run tries the same cases each time, so a run that passes keeps
# passing until the code or the document changes; ANALYTICS_FUZZ_RANDOM=1 explores afresh.
FUZZ = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=not os.environ.get("ANALYTICS_FUZZ_RANDOM"),
)
# On PostgreSQL, fewer drawn cases: what differs there is how the engine takes the values the
# schema allows (their edges, which schemathesis' coverage phase sends whatever the count);
# SQLite's run draws the rest (PostgreSQL's at 15 took 350 s of the suite's workers).
FUZZ_POSTGRESQL = settings(FUZZ, max_examples=6)


@pytest.mark.slow  # about 70 s of a worker: the whole run's, not the fast lane's
@schema.parametrize()
@FUZZ
def test_every_operation(case):
    call_and_validate(case)


if postgres_schema is not None:

    @pytest.mark.system
    @postgres_schema.parametrize()
    @FUZZ_POSTGRESQL
    def test_every_operation_on_postgresql(case):
        call_and_validate(case)

else:

    @pytest.mark.system
    def test_every_operation_on_postgresql():
        pytest.skip(postgres.banner() if postgres.UNAVAILABLE else "the fast lane starts no PostgreSQL")
