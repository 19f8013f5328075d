"""searchQuestionMode=regex: a pattern (RE2 syntax, linear time) on the question, in the
activity log, its CSV export, the realtime stream and the statistics, the same on both engines;
a pattern RE2 refuses, or one too costly, is a clear 400 that reads nothing."""

import csv
import io
import urllib.parse

import pytest

from support.helpers import AUTH, assert_error, ingest, record
from support.streams import events

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
NAMES = ["example.com", "a.example.com", "cdn-7.example.net", "cdn-x.example.net", "tracker.io", "x9.tracker.io"]


def search(pattern: str) -> str:
    return f"{WINDOW}&searchQuestionMode=regex&searchQuestion={urllib.parse.quote(pattern, safe='')}"


@pytest.mark.parametrize(
    "pattern, matches",
    [
        (r"^cdn-\d+\.", {"cdn-7.example.net"}),
        (r"\.io$", {"tracker.io", "x9.tracker.io"}),
        ("example", {"example.com", "a.example.com", "cdn-7.example.net", "cdn-x.example.net"}),
        (r"^(a\.)?example\.com$", {"example.com", "a.example.com"}),
        ("[0-9]", {"cdn-7.example.net", "x9.tracker.io"}),
        ("EXAMPLE", set()),  # names are stored in lower case; (?i) makes a pattern ignore case
        ("(?i)EXAMPLE.COM", {"example.com", "a.example.com"}),
        ("nothing-matches", set()),
    ],
)
def test_patterns_select_the_same_records_everywhere(client, pattern, matches):
    ingest(client, *[record(question=name, timestamp=f"2024-05-01T12:00:0{i}Z") for i, name in enumerate(NAMES)])
    # Other strings the store holds (client ids, other fields, even with a line of their own
    # that matches, after non-ASCII text) never make a record match.
    ingest(
        client,
        record(
            question="plain.org",
            client_id="cdn-9.example.net",
            triggerValue="çà\ncdn-1.example.net\nexample",
            timestamp="2024-05-01T12:00:09Z",
        ),
    )
    query = search(pattern)
    log = client.get(f"/v2/activity-log?{query}&pageSize=100", headers=AUTH)
    assert log.status_code == 200, log.json
    assert {row["question"] for row in log.json["queries"]} == matches
    exported = client.get(f"/v2/activity-log/csv?{query}", headers=AUTH).get_data(as_text=True)
    assert {row["question"] for row in csv.DictReader(io.StringIO(exported))} == matches
    counted = client.get(f"/v2/statistic/count?{query}", headers=AUTH).json["count"]
    assert counted == len(matches)
    grouped = client.get(f"/v2/statistic/count/question?{query}", headers=AUTH).json["counts"]
    assert {entry["value"] for entry in grouped} == matches


def test_a_pattern_asked_again_finds_names_stored_since(client):
    # A worker remembers what a pattern matched and searches only the strings stored since:
    # names new since, and strings stored before under another field that are now asked.
    ingest(client, record(question="api.one.com", spoofTarget="api.three.com", timestamp="2024-05-01T12:00:00Z"))

    def names():
        found = client.get(f"/v2/activity-log?{search('^api[.]')}", headers=AUTH).json["queries"]
        return {row["question"] for row in found}

    assert names() == {"api.one.com"}
    ingest(
        client,
        record(question="api.two.com", timestamp="2024-05-01T12:00:01Z"),
        record(question="api.three.com", timestamp="2024-05-01T12:00:02Z"),
        record(question="web.four.com", timestamp="2024-05-01T12:00:03Z"),
    )
    assert names() == {"api.one.com", "api.two.com", "api.three.com"}


def test_a_stream_matches_names_it_has_never_seen(client):
    """A live stream meets names that did not exist when it opened: each record's is matched."""
    token = client.get("/v2/auth/token", headers=AUTH).json["token"]
    pattern = urllib.parse.quote(r"^cdn-\d+\.", safe="")
    response = client.get(
        f"/v2/activity-log/realtime?authToken={token}&searchQuestionMode=regex&searchQuestion={pattern}",
        buffered=False,
    )
    assert response.status_code == 200
    chunks = iter(response.response)
    assert next(chunks).decode().startswith(":")
    ingest(client, record(question="cdn-x.example.net"), record(question="cdn-42.example.net"))
    got = events([next(chunks).decode()])
    assert [event["data"]["question"] for event in got] == ["cdn-42.example.net"]
    response.close()


@pytest.mark.parametrize(
    "pattern, says",
    [
        ("(unclosed", "missing )"),
        (r"(a)\1", "invalid escape"),  # backreferences: not linear, not RE2
        ("(?=look)ahead", "invalid perl operator"),
        ("a{1001}", "invalid repetition size"),
        ("((((a{100}){100}){100}){100})", "repetition"),
        (r"\pL{1000}", "too costly"),
        (r"(\pL{100}){10}", "too costly"),
    ],
)
def test_patterns_re2_refuses_or_too_costly_are_400(client, pattern, says):
    ingest(client, record(question="example.com", timestamp="2024-05-01T12:00:00Z"))
    for path in ("/v2/activity-log", "/v2/activity-log/csv", "/v2/statistic/count"):
        response = client.get(f"{path}?{search(pattern)}", headers=AUTH)
        assert_error(response, 400, 40001)
        message = response.json["error"]["message"]
        assert "searchQuestion" in message and says in message, message
