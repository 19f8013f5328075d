"""Two horizons: records expire at ANALYTICS_RETENTION_DAYS, statistics (daily rollups) at
ANALYTICS_STATISTICS_RETENTION_DAYS. A known data set is expired and its statistics are asked
again; deletions remove what can still be attributed past the records' horizon."""

import pytest

from models.runtime.clock import now_ms
from schemas.datetimes import format_ms, parse_datetime

from support.helpers import AUTH, ingest, record
from support.stores import run_sql

DAY = 86_400_000
HOUR = 3_600_000

# What is asked of the old days, before and after they expire: every kind of statistic, with
# the filters and groups the rollups keep past the records' horizon.
ASKED = [
    "count",
    "count?action[]=0",
    "count?clientId[]=a",
    "count?endpointId=e2",
    "count/question",
    "count/question?action[]=0",
    "count/question?action[]=1&action[]=-1",
    "count/question?limit=2&sortOrder=asc",
    "count/clientId",
    "count/clientId?endpointId=e1",
    "count/action",
    "count/action?endpointId=e1",
    "count/endpointId",
    "count/rrType",
    "timeseries?interval=86400",
    "timeseries?interval=86400&clientId[]=a",
    "timeseries/question?interval=86400",
    "timeseries/action?interval=86400&action[]=0",
    "count/registrableDomain",
    "count/registrableDomain?action[]=0",
    "count?registrableDomain[]=x.com",
    "count/question?registrableDomain[]=x.com",
    "timeseries/registrableDomain?interval=86400",
]


def old_records(old: int):
    """Three days of records: clients a and b on e1, c on e2; three names; every action."""
    found = []
    for i in range(60):
        client = "abc"[i % 3]
        found.append(
            record(
                "e2" if client == "c" else "e1",
                client,
                format_ms(old + (i // 3) % 3 * DAY + (i * 37 % 24) * HOUR + i * 1000),
                ["www.x.com", "y.org", "mail.x.com"][i * 7 % 3],
                action=[None, -1, 0, 1, 0, 2][i % 6],
                rrType=["A", "AAAA"][i % 2],
            )
        )
    return found


def recent_records():
    return [record("e1", "a", format_ms(now_ms() - HOUR), "recent.com", action=0)]


def asked(client, path: str, window: str):
    response = client.get(f"/v2/statistic/{path}{'&' if '?' in path else '?'}{window}", headers=AUTH)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = dict(response.json)
    body.pop("startTime"), body.pop("endTime")
    return body


def logged(client, window: str) -> int:
    return len(client.get(f"/v2/activity-log?{window}&pageSize=500", headers=AUTH).json["queries"])


@pytest.fixture
def app(app):
    """The shared app with a 30-day records' horizon and a 60-day statistics horizon (both are
    read at each use)."""
    app.config.update(ANALYTICS_RETENTION_DAYS=30, ANALYTICS_STATISTICS_RETENTION_DAYS=60)
    return app


@pytest.fixture
def old() -> int:
    """The first of three whole days past a 30-day records' horizon: 40 days before the UTC day
    the test runs in. Counted as the test starts, not as the module is imported: a run that
    imported it before midnight and ran a test after it expired a day more than that test says."""
    return now_ms() // DAY * DAY - 40 * DAY


@pytest.fixture
def window(old) -> str:
    """The three old days."""
    return f"startTime={format_ms(old)}&endTime={format_ms(old + 3 * DAY - 1)}"


@pytest.fixture
def expired(app, client, runner, old, window):
    """The old data set ingested, its statistics taken, then expired: (answers before)."""
    ingest(client, *old_records(old), *recent_records())
    before = {path: asked(client, path, window) for path in ASKED}
    assert before["count"]["count"] == logged(client, window) == 60
    assert "Deleted 60 records" in runner.invoke(args=["retention"]).output
    return before


def test_statistics_of_expired_records_still_answer(client, expired, window):
    assert logged(client, window) == 0, "the activity log answers from records only"
    csv = client.get(f"/v2/activity-log/csv?{window}", headers=AUTH).get_data(as_text=True)
    assert csv.count("\n") == 1, "the export has its header only"
    for path, before in expired.items():
        assert asked(client, path, window) == before, path
    # No rollup holds both a client and an action: that asks the records, gone past the horizon.
    assert asked(client, "count/action?clientId[]=b", window)["counts"] == []
    # A sanity check that the answers are not trivially empty.
    assert expired["count/question?action[]=0"]["counts"]
    assert expired["count?clientId[]=a"]["count"] == 20


def test_the_newest_days_keep_their_client_counts_when_their_records_expire(client, runner, old, window):
    """A client's days are summed from its hours once newer records show a day over. With no
    record after them, the retention run sums the days before their hours expire with the
    records."""
    ingest(client, *old_records(old))
    paths = ["count/clientId", "count/clientId?endpointId=e1", "count?clientId[]=a", "timeseries?interval=86400"]
    before = {path: asked(client, path, window) for path in paths}
    assert before["count?clientId[]=a"]["count"] == 20
    assert "Deleted 60 records" in runner.invoke(args=["retention"]).output
    assert logged(client, window) == 0
    assert {path: asked(client, path, window) for path in paths} == before


def test_past_the_records_horizon_a_window_counts_whole_days(client, expired, old):
    later = f"startTime={format_ms(old + 6 * HOUR)}&endTime={format_ms(old + 3 * DAY - 1)}"
    last_two = f"startTime={format_ms(old + DAY)}&endTime={format_ms(old + 3 * DAY - 1)}"
    assert asked(client, "count", later) == asked(client, "count", last_two)
    assert asked(client, "count", later)["count"] > 0
    assert asked(client, "count/question", later) == asked(client, "count/question", last_two)


def test_a_trend_compares_expired_days(client, expired, old):
    window = (
        f"startTime={format_ms(old + 2 * DAY)}&endTime={format_ms(old + 3 * DAY - 1)}"
        f"&baselineStartTime={format_ms(old + DAY)}&baselineEndTime={format_ms(old + 2 * DAY - 1)}"
    )
    trends = asked(client, "trend/question?limit=3", window)["trends"]
    assert sum(t["count"] for t in trends) == expired["timeseries?interval=86400"]["queries"][2]["count"]
    assert sum(t["baselineCount"] for t in trends) == expired["timeseries?interval=86400"]["queries"][1]["count"]


def test_data_availability_reports_both_horizons(client, expired, old):
    body = client.get(f"/v2/data-availability?startTime={format_ms(old)}", headers=AUTH).json
    assert body["retentionDays"] == 30
    assert body["recordCount"] == 1, "only the recent record is stored"
    statistics = body["statistics"]
    assert statistics["retentionDays"] == 60
    assert statistics["startTime"] <= format_ms(old)
    day, records = statistics["resolutions"]
    assert (day["resolution"], day["startTime"]) == ("day", format_ms(old))
    assert records["resolution"] == "record"
    assert abs(_ms(records["startTime"]) - (now_ms() - 30 * DAY)) < 60_000
    assert _ms(day["endTime"]) == _ms(records["startTime"]) - 1


def test_statistics_expire_at_their_own_horizon(app, client, runner, old, window):
    ingest(client, *old_records(old))
    before = [q["count"] for q in asked(client, "timeseries?interval=86400", window)["queries"]]
    app.config["ANALYTICS_STATISTICS_RETENTION_DAYS"] = 39  # the first old day began 40 days ago
    runner.invoke(args=["retention"])
    assert [q["count"] for q in asked(client, "timeseries?interval=86400", window)["queries"]] == [0, *before[1:]]
    assert asked(client, "count", window)["count"] == sum(before[1:])
    app.config["ANALYTICS_STATISTICS_RETENTION_DAYS"] = 37  # the last one began 38 days ago
    runner.invoke(args=["retention"])
    assert asked(client, "count", window)["count"] == 0
    assert asked(client, "count/question", window)["counts"] == []
    assert run_sql(app.config["ANALYTICS_DATABASE"], "SELECT COUNT(*) FROM rollup")[0][0] == 0
    statistics = client.get("/v2/data-availability", headers=AUTH).json["statistics"]
    assert statistics["retentionDays"] == 37
    assert statistics["startTime"] is None


def test_statistics_are_never_kept_shorter_than_the_records(app, client):
    app.config["ANALYTICS_STATISTICS_RETENTION_DAYS"] = 10
    assert client.get("/v2/data-availability", headers=AUTH).json["statistics"]["retentionDays"] == 30
    app.config["ANALYTICS_RETENTION_DAYS"] = 0
    assert client.get("/v2/data-availability", headers=AUTH).json["statistics"]["retentionDays"] == 0


def test_history_older_than_the_records_horizon_lands_in_the_statistics(client, runner, old, window):
    answer = ingest(client, *old_records(old)).json
    assert answer == {"accepted": 60, "pastRetention": 60}
    runner.invoke(args=["retention"])
    assert logged(client, window) == 0
    assert asked(client, "count", window)["count"] == 60


def test_deleting_a_client_removes_what_still_names_it(client, expired, window):
    response = client.delete("/v2/client", json={"endpointIds": ["e1"], "clientIds": ["a"]}, headers=AUTH)
    assert response.json["deletedClients"] == [{"endpointId": "e1", "clientId": "a"}]
    assert asked(client, "count?clientId[]=a", window)["count"] == 0
    assert "a" not in {g["value"] for g in asked(client, "count/clientId", window)["counts"]}
    # What is anonymous past the records' horizon stays: totals, names, actions.
    assert asked(client, "count", window) == expired["count"]
    assert asked(client, "count/question", window) == expired["count/question"]


def test_deleting_an_endpoints_records_removes_its_statistics(client, expired, window):
    assert client.delete("/v2/activity-log?endpointId=e2", headers=AUTH).status_code == 200
    assert asked(client, "count?endpointId=e2", window)["count"] == 0
    assert "e2" not in {g["value"] for g in asked(client, "count/endpointId", window)["counts"]}
    assert (
        asked(client, "count", window)["count"] == expired["count"]["count"] - expired["count?endpointId=e2"]["count"]
    )
    # Top names are counted over all endpoints: past the records' horizon e2's part stays in them.
    assert asked(client, "count/question", window) == expired["count/question"]


def test_deleting_every_record_removes_every_statistic(client, expired, window):
    assert asked(client, "count", window) == expired["count"]
    assert client.delete("/v2/activity-log?all=true", headers=AUTH).status_code == 200
    for path in ("count", "count?action[]=0", "count?clientId[]=a"):
        assert asked(client, path, window)["count"] == 0, path
    assert asked(client, "count/question", window)["counts"] == []


def test_deleting_up_to_a_time_keeps_the_days_after_it(client, expired, old, window):
    end = format_ms(old + DAY - 1)
    assert client.delete(f"/v2/activity-log?clientId=a&endTime={end}", headers=AUTH).status_code == 200
    per_day = asked(client, "timeseries?interval=86400&clientId[]=a", window)["queries"]
    before = expired["timeseries?interval=86400&clientId[]=a"]["queries"]
    assert [q["count"] for q in per_day] == [0] + [q["count"] for q in before[1:]]
    assert all(q["count"] for q in before)


def test_a_new_rollup_layout_keeps_expired_statistics(app, make_app, client, expired, database, window):
    """A catalogue change renumbers dims: rows of dims that keep their meaning move with them
    (past the records' horizon they could not be counted again)."""
    (layout,) = run_sql(database, "SELECT value FROM store_setting WHERE name = 'rollup_layout'")[0]
    entries = [entry.partition(":") for entry in layout.split(";")]
    top = len(entries) - 1
    # An older layout: the same dims numbered backwards, the rows numbered to match.
    older = ";".join(f"{top - int(ident)}:{meaning}" for ident, _, meaning in entries)
    run_sql(database, "UPDATE rollup SET dim = dim + 1000")  # (a key never collides on the way)
    run_sql(database, "UPDATE rollup SET dim = ? - dim", [top + 1000])
    run_sql(database, "UPDATE store_setting SET value = ? WHERE name = 'rollup_layout'", [older])
    restarted = make_app(**app.config).test_client()
    for path, before in expired.items():
        assert asked(restarted, path, window) == before, path


def _ms(text: str) -> int:
    return parse_datetime(text)
