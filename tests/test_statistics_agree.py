"""Property: every count agrees with the activity log, for random records, filters and windows
(whole days come from the rollups, the rest from the records), also after deletions, whether
the records were counted into the rollups as they were stored, not yet (the tail), or some."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import models.statistics.counting

from support.helpers import AUTH, ingest, record

DAY = 86_400_000
BASE = 1714521600000  # 2024-05-01T00:00:00Z

records = st.lists(
    st.builds(
        lambda endpoint, client_id, minute, question, action, rr_type, asn: record(
            endpoint,
            client_id,
            BASE + minute * 60_000,
            question,
            action=action,
            rrType=rr_type,
            sourceGeoip={"asn": asn},
        ),
        st.sampled_from(["e1", "e2"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 3 * 24 * 60 - 1),  # three days
        st.sampled_from(["x.com", "a.x.com", "y.org", "zz.net", "w.y.co.uk"]),
        st.sampled_from([None, -1, 0, 1, 2]),
        st.sampled_from([None, "A", "AAAA"]),
        st.sampled_from([None, 1, 2]),
    ),
    min_size=5,
    max_size=40,
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "endpointId[]": st.lists(st.sampled_from(["e1", "e2", "e9"]), min_size=1, max_size=2),
        "clientId[]": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2),
        "action[]": st.lists(st.sampled_from([-1, 0, 1, 2, 3]), min_size=1, max_size=3),
        "rrType[]": st.lists(st.sampled_from(["A", "AAAA", "MX"]), min_size=1, max_size=2),
        "srcAsn[]": st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=2),
        "registrableDomain[]": st.lists(st.sampled_from(["x.com", "y.co.uk", "q.com"]), min_size=1, max_size=2),
        "searchQuestion": st.sampled_from(["x", "x.com", "org", "a."]),
        "searchQuestionMode": st.sampled_from(["includes", "startsWith", "endsWith", "excludes", "apex"]),
    },
)
# One filter alone: rollups keyed by that column answer for it (action, clientId, question).
single_filters = st.one_of(
    st.fixed_dictionaries({"action[]": st.lists(st.sampled_from([-1, 0, 1, 2, 3]), min_size=1, max_size=3)}),
    st.fixed_dictionaries({"clientId[]": st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=2)}),
    st.fixed_dictionaries({"question[]": st.lists(st.sampled_from(["x.com", "y.org"]), min_size=1, max_size=2)}),
    # Counted by the question's rollups, through each name's registrable domain.
    st.fixed_dictionaries(
        {"registrableDomain[]": st.lists(st.sampled_from(["x.com", "y.co.uk"]), min_size=1, max_size=2)}
    ),
)
groups = st.sampled_from(
    ["endpointId", "clientId", "action", "rrType", "question", "srcAsn", "dstAsn", "registrableDomain"]
)


windows = st.one_of(
    st.tuples(st.integers(0, 3 * DAY - 1), st.integers(0, 3 * DAY - 1)).map(sorted),
    st.just([0, 3 * DAY - 1]),  # whole days only
    st.tuples(st.integers(0, DAY - 1), st.integers(2 * DAY, 3 * DAY - 1)),  # a whole day between two parts
)


def query_string(chosen: dict, window) -> str:
    parts = [f"startTime={BASE + window[0]}", f"endTime={BASE + window[1]}"]
    for name, value in chosen.items():
        for item in value if isinstance(value, list) else [value]:
            parts.append(f"{name}={item}")
    return "&".join(parts)


# How far behind the rollups are when the counts are read: every batch counted as it was
# stored, none (all in the tail, which reads count from the records), or the first batch only.
COUNTED = st.sampled_from(["all", "none", "first"])
BEHIND = 1_000_000  # no tail in these tests is this long: nothing is counted until asked


def fresh_client(make_app, tmp_path_factory, new_database, name: str):
    """A test client of an app on a database of its own (one per generated example)."""
    path = tmp_path_factory.mktemp(name)
    return make_app(ANALYTICS_DATABASE=new_database(f"{path.name}.db"), INSTANCE_PATH=str(path / "i")).test_client()


def ingest_counted(client, batches, counted: str):
    """Store `batches`, the rollups counting them as `counted` says (see COUNTED)."""
    try:
        for i, batch in enumerate(batches):
            models.statistics.counting.behind_limit = (
                0 if counted == "all" or (counted == "first" and i == 0) else BEHIND
            )
            if batch:
                ingest(client, *batch)
    finally:
        models.statistics.counting.behind_limit = 0


def log_count(client, query) -> int:
    total, page = 0, 0
    while True:
        body = client.get(f"/v2/activity-log?{query}&pageSize=500&page={page}", headers=AUTH).json
        total += len(body["queries"])
        if len(body["queries"]) < 500:
            return total
        page += 1


AGREEING = dict(
    data=records,
    chosen=st.one_of(filters, single_filters, st.just({}), st.fixed_dictionaries({"endpointId[]": st.just(["e1"])})),
    group=groups,
    window=windows,
    delete_client=st.sampled_from([None, "a", "b"]),
    delete_endpoint=st.sampled_from([None, "e2"]),
    counted=COUNTED,
)


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@pytest.mark.sql_store
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**AGREEING)
def test_counts_agree_with_the_activity_log(make_app, tmp_path_factory, new_database, **drawn):
    counts_agree_with_the_log(make_app, tmp_path_factory, new_database, **drawn)


# Fewer examples on ClickHouse (a chDB database an example: 107 s of the suite at 40), whose
# statistics tests/test_clickhouse_records.py and _statistics.py hold to the SQL store's besides.
@pytest.mark.parametrize("engine", ["clickhouse"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**AGREEING)
def test_counts_agree_with_the_activity_log_on_clickhouse(make_app, tmp_path_factory, new_database, **drawn):
    counts_agree_with_the_log(make_app, tmp_path_factory, new_database, **drawn)


def counts_agree_with_the_log(
    make_app, tmp_path_factory, new_database, data, chosen, group, window, delete_client, delete_endpoint, counted
):
    client = fresh_client(make_app, tmp_path_factory, new_database, "prop")
    # Two batches: rollups add up.
    ingest_counted(client, [data[: len(data) // 2], data[len(data) // 2 :]], counted)
    if delete_client:
        client.delete(f"/v2/activity-log?clientId[]={delete_client}&endTime={BASE + DAY + 5}", headers=AUTH)
    if delete_endpoint:
        client.delete("/v2/client", json={"endpointIds": [delete_endpoint], "endTime": BASE + 2 * DAY}, headers=AUTH)
    query = query_string(chosen, window)

    expected = log_count(client, query)
    count = client.get(f"/v2/statistic/count?{query}", headers=AUTH).json["count"]
    assert count == expected
    groups_body = client.get(f"/v2/statistic/count/{group}?{query}&limit=1000", headers=AUTH).json
    assert sum(c["count"] for c in groups_body["counts"]) == count
    # Quarter hours and hours: the hourly and quarter-hour rollups; longer: the daily ones.
    for interval in (900, 3600, 21600, 86400, 604800):
        series = client.get(f"/v2/statistic/timeseries?{query}&interval={interval}&limit=1000", headers=AUTH).json
        assert sum(q["count"] for q in series["queries"]) == count
        per_group = client.get(
            f"/v2/statistic/timeseries/{group}?{query}&interval={interval}&limit=1000&groupLimit=100", headers=AUTH
        ).json
        assert sum(sum(q["count"].values()) for q in per_group["queries"]) == count
        for bucket, point in zip(series["queries"], per_group["queries"], strict=True):
            assert sum(point["count"].values()) == bucket["count"]
    if f"{group}[]" not in chosen:  # a group's count is the log's count when filtered by it
        for item in groups_body["counts"][:2]:
            if item["value"]:
                assert log_count(client, f"{query}&{group}[]={item['value']}") == item["count"]


# Top lists and the filters rollups hold: each value's count, not just their sum, is checked
# against the activity log filtered by that value.
TOP_LISTS = [
    ("", "question"),
    ("action[]=0", "question"),
    ("action[]=-1&action[]=1", "question"),
    ("question[]=x.com", "action"),
    ("question[]=y.org&action[]=0&action[]=2", "question"),
    ("clientId[]=a", "clientId"),
    ("clientId[]=a&clientId[]=b", "question"),
    ("action[]=2", "endpointId"),
    ("", "registrableDomain"),
    ("action[]=0", "registrableDomain"),
    ("registrableDomain[]=x.com", "action"),
    ("registrableDomain[]=x.com&action[]=0&action[]=1", "question"),
    ("clientId[]=a", "registrableDomain"),
]


@pytest.mark.slow  # seconds of a worker: the whole run has it, the fast lane not (docs/testing.md)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=records,
    window=windows,
    top_list=st.sampled_from(TOP_LISTS),
    delete_client=st.sampled_from([None, "a"]),
    counted=COUNTED,
)
def test_each_value_of_a_top_list_agrees_with_the_activity_log(
    make_app, tmp_path_factory, new_database, data, window, top_list, delete_client, counted
):
    client = fresh_client(make_app, tmp_path_factory, new_database, "top")
    ingest_counted(client, [data[: len(data) // 2], data[len(data) // 2 :]], counted)
    if delete_client:
        client.delete(f"/v2/activity-log?clientId[]={delete_client}&endTime={BASE + DAY + 5}", headers=AUTH)
    filters, group = top_list
    query = "&".join(part for part in (query_string({}, window), filters) if part)
    counts = client.get(f"/v2/statistic/count/{group}?{query}&limit=1000", headers=AUTH).json["counts"]
    assert sum(c["count"] for c in counts) == log_count(client, query)
    for item in counts:
        if item["value"]:
            assert log_count(client, f"{query}&{group}[]={item['value']}") == item["count"], item
