"""Every searchQuestionMode is a pattern over the stored names (models/records/filters.py's
name_pattern): the names it matches are found once, and the frozen blocks are chosen by them.
The pages it gives are the ones the SQL LIKE search gave (ASCII case ignored, wildcards
literal), over rows and frozen blocks alike, on both engines."""

import itertools
import time
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.engine.postgres import Postgres
from models.engine.sql import like_escape
from models.engine.sqlite import SQLite

from support import stores
from support.helpers import AUTH, ingest, record

MODES = ("includes", "startsWith", "endsWith", "excludes", "apex")
START = "2024-05-01T00:00:00Z"
# Letters whose case RE2's (?i) folds beyond ASCII (the long s, the Kelvin sign), LIKE's
# wildcards and escape, an answer set's first character, dots.
ALPHABET = "abksSK\u017f\u212a\u00e9\u00c9_%\\[."
_ENDPOINTS = itertools.count()

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


def before_issue_44(dialect, text: str, mode: str) -> tuple[str, list]:
    """The question search as SQL LIKE over the term table, as the store ran it before every
    mode became a pattern: the reference the pages are held to."""
    text = text.lower()
    pattern = like_escape(text)
    like = dialect.like_ascii_nocase("value")
    if mode == "apex":
        exact, params = dialect.term_in([text])
        return f"r.question IN (SELECT id FROM term WHERE ({exact}) OR {like})", [*params, "%." + pattern]
    pattern = {"startsWith": f"{pattern}%", "endsWith": f"%{pattern}"}.get(mode, f"%{pattern}%")
    negate = "NOT " if mode == "excludes" else ""
    return f"r.question {negate}IN (SELECT id FROM term WHERE {like})", [pattern]


def stamp(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


names = st.text(alphabet=ALPHABET, min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stored=st.lists(names, min_size=1, max_size=10),
    text=st.text(alphabet=ALPHABET, min_size=1, max_size=3),
    mode=st.sampled_from(MODES),
)
def test_every_mode_pages_as_the_like_search_did(client, database, stored, text, mode):
    endpoint = f"e{next(_ENDPOINTS)}"
    now = int(time.time() * 1000)
    # Old records are frozen into blocks as they arrive; the last minutes' stay rows.
    old = [
        record(endpoint, question=name, timestamp=f"2024-05-0{1 + i % 3}T1{i % 10}:00:0{i % 7}Z")
        for i, name in enumerate(stored)
    ]
    recent = [record(endpoint, question=name, timestamp=stamp(now - 60_000 - 997 * i)) for i, name in enumerate(stored)]
    ingest(client, *old, *recent)
    dialect = Postgres() if stores.is_postgres(database) else SQLite()
    condition, params = before_issue_44(dialect, text, mode)
    expected = stores.on_records(
        database,
        "SELECT r.ts, t.value FROM {records} r JOIN term t ON t.id = r.question"
        f" WHERE r.endpoint = (SELECT id FROM endpoint WHERE name = ?) AND {condition} ORDER BY r.ts DESC, r.id DESC",
        [endpoint, *params],
    )
    search = urllib.parse.urlencode(
        {"startTime": START, "endpointId": endpoint, "searchQuestion": text, "searchQuestionMode": mode}
    )
    for size in (100, 3):
        response = client.get(f"/v2/activity-log?{search}&pageSize={size}", headers=AUTH)
        assert response.status_code == 200, response.json
        found = [(row["timestamp"], row["question"]) for row in response.json["queries"]]
        assert found == [(stamp(ts), name) for ts, name in expected[:size]], (stored, text, mode)
    counted = client.get(f"/v2/statistic/count?{search}", headers=AUTH)
    assert counted.json["count"] == len(expected), (stored, text, mode)


def test_an_excludes_matching_most_names_finds_the_records_of_the_few_it_leaves(client, database):
    # Past 1,000 names matched, the records are read as those of the names left (question IN).
    now = int(time.time() * 1000)
    ingest(
        client,
        *[record(question=f"n{i}.example", timestamp=stamp(now - 60_000 - i)) for i in range(1_005)],
        record(question="wpad", timestamp=stamp(now - 30_000)),
        record(question="localhost", timestamp=stamp(now - 20_000)),
        record(question="wpad", timestamp="2024-05-01T10:00:00Z"),  # frozen
    )
    search = urllib.parse.urlencode({"startTime": START, "searchQuestion": ".", "searchQuestionMode": "excludes"})
    response = client.get(f"/v2/activity-log?{search}", headers=AUTH)
    assert response.status_code == 200, response.json
    assert [row["question"] for row in response.json["queries"]] == ["localhost", "wpad", "wpad"]
    assert client.get(f"/v2/statistic/count?{search}", headers=AUTH).json["count"] == 3


def test_a_search_that_matches_little_reads_only_the_blocks_its_names_may_be_in(client, database):
    hours = [f"2024-05-01T{hour:02d}:10:00Z" for hour in range(8, 14)]
    ingest(client, record(question="wpad", timestamp=hours[0]))
    ingest(client, *[record(question=f"www.common{i}.example", timestamp=at) for i, at in enumerate(hours[1:])])
    wanted = stores.scalar(database, "SELECT id FROM record_block WHERE n = 1 ORDER BY hour LIMIT 1")
    assert stores.scalar(database, "SELECT COUNT(*) FROM record_block") == len(hours)
    # A block unpacked would fail the read: only the one holding the name found may be opened.
    stores.run_sql(database, "UPDATE record_block SET data = ? WHERE id <> ?", [b"\x00not a block", wanted])
    for mode, text in [
        ("includes", "WPA"),
        ("startsWith", "wp"),
        ("endsWith", "pad"),
        ("apex", "wpad"),
        ("regex", "^wpad$"),
        ("excludes", "."),
    ]:
        search = urllib.parse.urlencode({"startTime": START, "searchQuestion": text, "searchQuestionMode": mode})
        response = client.get(f"/v2/activity-log?{search}", headers=AUTH)
        assert response.status_code == 200, (mode, response.get_data(as_text=True))
        assert [row["question"] for row in response.json["queries"]] == ["wpad"], mode
