"""A question pattern means what RE2 says of each name alone, in the log and the statistics as
in the realtime stream: \\A and \\z anchor the name, and no match runs across two names, though
the stored names are searched many at a time (models/records/filters.py)."""

import itertools
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import models.records.filters

from support.helpers import AUTH, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"


def search(pattern: str) -> str:
    return f"{WINDOW}&searchQuestionMode=regex&searchQuestion={urllib.parse.quote(pattern, safe='')}"


@pytest.mark.parametrize(
    "pattern, matches",
    [
        (r"\Awww\.", {"www.example.com", "www.github.io"}),
        (r"github\.io\z", {"user.github.io", "www.github.io"}),
        (r"\A(?:user|www)\.github\.io\z", {"user.github.io", "www.github.io"}),
        # In the batch, "...com\nuser..." would be one match of each of these.
        (r"com[^x]user", set()),
        (r"com\suser", set()),
        (r"(?s)com.user", set()),
    ],
)
def test_anchors_mean_the_name_and_no_match_spans_two(client, pattern, matches):
    names = ["www.example.com", "user.github.io", "a.www.example.com", "github.io.example.com", "www.github.io"]
    ingest(client, *[record(question=name, timestamp=f"2024-05-01T12:00:0{i}Z") for i, name in enumerate(names)])
    log = client.get(f"/v2/activity-log?{search(pattern)}&pageSize=100", headers=AUTH)
    assert log.status_code == 200, log.json
    assert {row["question"] for row in log.json["queries"]} == matches
    counted = client.get(f"/v2/statistic/count/question?{search(pattern)}", headers=AUTH)
    assert counted.status_code == 200, counted.json
    assert {entry["value"] for entry in counted.json["counts"]} == matches


# Pieces of patterns: anchors, classes that match a newline, dots, letters of the names.
ATOMS = [r"\A", r"\z", "^", "$", r"\b", r"\B", "[^x]", r"\s", r"\S", "(?s:.)", ".", "a", "b", "x", r"\.", "-", "[ab]"]
patterns = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda pair: f"(?:{pair[0]}|{pair[1]})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,2}"])).map(lambda pair: f"(?:{pair[0]}){pair[1]}"),
        inner.map(lambda p: f"(?s){p}"),
        inner.map(lambda p: f"(?m){p}"),
    ),
    max_leaves=6,
)
labels = st.text(alphabet="abx-", min_size=1, max_size=4)
names = st.lists(st.lists(labels, min_size=1, max_size=3).map(".".join), min_size=1, max_size=12, unique=True)
_ENDPOINTS = itertools.count()


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=patterns, stored=names)
def test_the_log_finds_the_names_the_stream_matches(client, pattern, stored):
    try:
        alone = models.records.filters.compile_pattern(pattern)  # the realtime stream's matcher, per name
    except ValueError:
        return
    endpoint = f"e{next(_ENDPOINTS)}"
    ingest(client, *[record(endpoint, question=name, timestamp="2024-05-01T12:00:00Z") for name in stored])
    response = client.get(
        f"/v2/statistic/count/question?{search(pattern)}&endpointId={endpoint}&limit=100", headers=AUTH
    )
    assert response.status_code == 200, response.json
    found = {entry["value"] for entry in response.json["counts"]}
    assert found == {name for name in stored if alone.search(name)}, repr((pattern, stored))
