"""Sane times at the door (issue 42): a number that can only be epoch seconds is refused
wherever a time is read, a record stamped further in the future than
ANALYTICS_FUTURE_TOLERANCE_SECONDS is refused, and records already stored with such a time are
listed and removed by `retention future`, leaving last-activity times as if never stored."""

import json
import os

import pytest

import models.engine.database
from app.jobs.alerts import run_alerts
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import API_KEY, AUTH, assert_error, clients, ingest, record
from support.servers import Gunicorn

SECONDS = 1795793000  # 2026-11-27 in epoch seconds: 1970-01-21 as milliseconds
# Operations that take startTime, with what their path needs; a test below holds the list to
# the OpenAPI document.
WINDOWED = [
    "/v2/activity-log",
    "/v2/activity-log/csv",
    "/v2/data-availability",
    "/v2/statistic/count",
    "/v2/statistic/count/clientId",
    "/v2/statistic/latency",
    "/v2/statistic/latency/upstream",
    "/v2/statistic/timeseries",
    "/v2/statistic/timeseries/clientId",
    "/v2/statistic/first-seen/question",
    "/v2/statistic/trend/question",
    "/v2/admin-action",
    "/v2/access-log",
    "/v2/alert",
]


def stored(client) -> list[str]:
    response = client.get("/v2/activity-log?startTime=0001-01-01T00:00:00Z&endTime=9999-01-01T00:00:00Z", headers=AUTH)
    assert response.status_code == 200, response.json
    return [item["question"] for item in response.json["queries"]]


def ingest_body(client, body: str):
    return client.post("/v2/ingest", data=body, headers={**AUTH, "Content-Type": "application/json"})


# A batch the fast path reads, and one it leaves to the reference path (an escaped surrogate
# pair, which msgspec and orjson read differently): each must refuse the record.
PATHS = {"fast": "laptop", "reference": "\\ud83d\\ude00"}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("value", [SECONDS, str(SECONDS)])
def test_a_timestamp_in_epoch_seconds_is_refused_and_nothing_stored(client, path, value):
    good = json.dumps(record(question="good.example", timestamp=format_ms(now_ms())))
    bad = json.dumps(record(question="bad.example", timestamp=value)).replace("cl1", PATHS[path])
    error = assert_error(ingest_body(client, f"[{good}, {bad}]"), 400, 40005)
    assert error["message"] == (
        "Record 1: field 'timestamp' is not a valid datetime: 1795793000 is 1970-01-21 as epoch milliseconds; "
        "it looks like epoch seconds: send milliseconds (1795793000000) or an RFC 3339 date-time. Nothing was stored."
    )
    assert stored(client) == []
    assert clients(client) == {}


@pytest.mark.parametrize("value", [0, -1, -SECONDS * 1000, 99_999_999_999, "0", "-5"])
def test_every_number_before_1973_is_refused_in_a_record(client, value):
    error = assert_error(ingest_body(client, json.dumps([record(timestamp=value)])), 400, 40005)
    assert "as epoch milliseconds" in error["message"] and ".." not in error["message"]
    assert "-24h" not in error["message"] and "now" not in error["message"]
    assert stored(client) == []


def test_a_record_timestamp_error_offers_no_relative_time_and_one_period(client):
    error = assert_error(ingest_body(client, json.dumps([record(timestamp="-24h")])), 400, 40005)
    assert error["message"] == (
        "Record 0: field 'timestamp' is not a valid datetime: use RFC 3339 (e.g. 2024-05-01T12:00:00Z) or epoch "
        "milliseconds. Nothing was stored."
    )


def test_the_list_of_windowed_operations_is_every_one_taking_start_time(client):
    paths = client.get("/v2/openapi.json").json["paths"]
    taking = {
        path
        for path, operations in paths.items()
        for operation in operations.values()
        if isinstance(operation, dict) and any(p.get("name") == "startTime" for p in operation.get("parameters", []))
    }
    templated = {path.split("/{")[0] for path in taking}
    assert templated == {path if path.count("/") < 4 else path.rsplit("/", 1)[0] for path in WINDOWED}


@pytest.mark.parametrize("path", WINDOWED)
def test_start_time_0_is_refused(client, path):
    error = assert_error(client.get(f"{path}?startTime=0", headers=AUTH), 400, 40002)
    message = "Invalid 'startTime': Not a valid datetime: 0 is 1970-01-01 as epoch milliseconds"
    assert error["message"].startswith(message)
    assert error["message"].endswith("(e.g. 1970-01-01T00:00:00Z).")
    # The beginning, said as a date, is still a time (a time series refuses that many buckets).
    response = client.get(f"{path}?startTime=1970-01-01T00:00:00Z", headers=AUTH)
    assert response.status_code == 200 or response.json["error"]["code"] != 40002, response.json


def test_times_in_seconds_are_refused_in_query_strings_and_bodies_and_delete_nothing(client):
    ingest(client, record(timestamp=format_ms(now_ms() - 60_000)))
    error = assert_error(client.delete(f"/v2/activity-log?all=true&endTime={SECONDS}", headers=AUTH), 400, 40002)
    assert error["message"] == (
        "Invalid 'endTime': Not a valid datetime: 1795793000 is 1970-01-21 as epoch milliseconds; it looks like "
        "epoch seconds: send milliseconds (1795793000000) or an RFC 3339 date-time."
    )
    assert_error(client.delete("/v2/client", json={"endTime": SECONDS}, headers=AUTH), 400, 40002)
    assert_error(client.delete("/v2/client", json={"endTime": str(SECONDS)}, headers=AUTH), 400, 40002)
    assert stored(client) == ["example.com"]
    assert list(clients(client)["ep1"]["clients"]) == ["cl1"]


def test_a_record_from_2099_is_refused_and_leaves_no_activity(client):
    ingest(client, record(question="now.example", timestamp=format_ms(now_ms() - 60_000)))
    error = assert_error(ingest_body(client, json.dumps([record(timestamp="2099-01-01T00:00:00Z")])), 400, 40005)
    assert error["message"].startswith(
        "Record 0: field 'timestamp' is 2099-01-01T00:00:00.000Z, more than 300 s after the record was received ("
    )
    assert "ANALYTICS_FUTURE_TOLERANCE_SECONDS" in error["message"] and ".." not in error["message"]
    assert error["message"].endswith("or no timestamp to have it stamped on receipt. Nothing was stored.")
    assert stored(client) == ["now.example"]
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] < format_ms(now_ms())
    assert client.get("/v2/data-availability", headers=AUTH).json["endTime"] < format_ms(now_ms())


def test_a_minute_ahead_is_clock_skew_and_accepted(client):
    ahead = format_ms(now_ms() + 60_000)
    assert ingest(client, record(timestamp=ahead)).json == {"accepted": 1, "pastRetention": 0}
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] == ahead


def test_the_tolerance_is_a_setting(make_app, database):
    ahead = format_ms(now_ms() + 600_000)
    client = make_app().test_client()
    assert_error(ingest_body(client, json.dumps([record(timestamp=ahead)])), 400, 40005)
    client = make_app(ANALYTICS_FUTURE_TOLERANCE_SECONDS="900").test_client()
    ingest(client, record(timestamp=ahead))
    client = make_app(ANALYTICS_FUTURE_TOLERANCE_SECONDS=0).test_client()
    error = assert_error(ingest_body(client, json.dumps([record(timestamp=format_ms(now_ms() + 5000))])), 400, 40005)
    assert "more than 0 s after" in error["message"]
    with pytest.raises(RuntimeError, match="ANALYTICS_FUTURE_TOLERANCE_SECONDS must be 0 or more"):
        make_app(ANALYTICS_FUTURE_TOLERANCE_SECONDS=-1)


@pytest.mark.parametrize("value", [SECONDS, "2099-01-01T00:00:00Z"])
def test_no_new_client_alert_fires_for_a_refused_record(app, client, value):
    nobody = "http://127.0.0.1:9/hook"
    rule = {"kind": "new-client", "endpointIds": ["home"], "destinations": [nobody]}
    assert client.post("/v2/alert-rule", json=rule, headers=AUTH).status_code == 201
    ingest(client, record("home", "laptop", format_ms(now_ms() - 60_000)))
    with app.app_context(), models.engine.database.connection():
        run_alerts(now=now_ms())
    assert_error(ingest_body(client, json.dumps([record("home", "intruder", value)])), 400, 40005)
    with app.app_context(), models.engine.database.connection():
        run_alerts(now=now_ms() + 1000)
    alerts = client.get("/v2/alert?startTime=2020-01-01T00:00:00Z&endTime=2100-01-01T00:00:00Z", headers=AUTH).json
    assert [alert["detail"]["clientId"] for alert in alerts["alerts"]] == ["laptop"]


def test_retention_future_removes_what_a_looser_tolerance_let_in_and_activity_reads_true(make_app, database):
    loose = make_app(ANALYTICS_FUTURE_TOLERANCE_SECONDS=10**10).test_client()
    now = now_ms()
    hour_ago, minute_ago = format_ms(now - 3_600_000), format_ms(now - 60_000)
    ingest(
        loose,
        record("home", "laptop", hour_ago, "old.example"),
        record("home", "tv", minute_ago, "recent.example"),
        record("home", "tv", "2099-01-01T00:00:00Z", "future.example"),
        record("home", "phone", "2099-06-01T00:00:00Z", "future.example"),
        record("lab", "probe", "2098-01-01T00:00:00Z", "lab.example"),
    )
    # The tv's recent record deleted through the API: the endpoint keeps its time as lost...
    assert loose.delete("/v2/activity-log?clientId=tv&endTime=-30s", headers=AUTH).json == {"deletedCount": 1}
    # ...and the lab's 2099 record deleted through the API leaves a mark in 2098 behind.
    assert loose.delete("/v2/activity-log?endpointId=lab", headers=AUTH).json == {"deletedCount": 1}
    assert clients(loose)["home"]["lastActivityTime"] == "2099-06-01T00:00:00.000Z"
    assert clients(loose)["lab"]["lastActivityTime"] == "2098-01-01T00:00:00.000Z"

    app = make_app()
    runner, client = app.test_cli_runner(), app.test_client()
    listed = runner.invoke(args=["retention", "future"])
    assert listed.exit_code == 0, listed.output
    assert "home: 2 records from 2099-01-01T00:00:00.000Z to 2099-06-01T00:00:00.000Z" in listed.output
    assert "2 records are stamped after" in listed.output
    assert sorted(stored(client)) == ["future.example", "future.example", "old.example"]

    deleted = runner.invoke(args=["retention", "future", "--delete"])
    assert deleted.exit_code == 0, deleted.output
    assert "Deleted 2 records stamped after" in deleted.output
    assert stored(client) == ["old.example"]
    items = clients(client)
    assert items["home"]["lastActivityTime"] == minute_ago, "the mark of the record really lost, not 2099"
    assert items["home"]["clients"]["tv"]["lastActivityTime"] is None
    assert items["home"]["clients"]["laptop"]["lastActivityTime"] == hour_ago
    assert items["lab"]["lastActivityTime"] is None, "a mark in the future is no activity"
    availability = client.get("/v2/data-availability", headers=AUTH).json
    assert (availability["startTime"], availability["endTime"], availability["recordCount"]) == (hour_ago, hour_ago, 1)
    counts = client.get("/v2/statistic/count/question?startTime=-1d&endTime=2100-01-01T00:00:00Z", headers=AUTH).json
    assert counts["counts"] == [{"value": "old.example", "count": 1}]
    actions = client.get("/v2/admin-action?startTime=-1h&action=retention.future", headers=AUTH).json["actions"]
    assert [action["metadata"]["result"] for action in actions] == [{"deletedCount": 2}]
    assert runner.invoke(args=["retention", "future"]).output.startswith("0 records are stamped after ")
    assert "Deleted" in runner.invoke(args=["retention"]).output, "the retention run is still the bare command"


def refused_lines(folder) -> list[dict]:
    files = [name for name in os.listdir(folder) if name.startswith("rejected")] if os.path.isdir(folder) else []
    lines = []
    for name in files:
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            lines += [json.loads(line) for line in handle]
    return lines


def test_an_import_stores_the_good_records_and_sets_the_future_one_aside(app, client, runner, tmp_path):
    now = now_ms()
    wire = [
        record(question="first.example", timestamp=format_ms(now - 60_000)),
        record(question="future.example", timestamp="2099-01-01T00:00:00Z"),
        record(question="seconds.example", timestamp=SECONDS),
        record(question="last.example", timestamp=format_ms(now - 30_000)),
    ]
    path = tmp_path / "records.ndjson"
    path.write_text("".join(json.dumps(item) + "\n" for item in wire))
    result = runner.invoke(args=["ingest", str(path)])
    assert result.exit_code == 0, result.output
    assert "Stored 2 records. Skipped 2: 2 rejected (timestamp)." in result.output
    assert sorted(stored(client)) == ["first.example", "last.example"]
    lines = refused_lines(os.path.join(app.instance_path, "rejected"))
    assert [line["record"] for line in lines] == wire[1:3]
    assert lines[0]["error"].startswith("field 'timestamp' is 2099-01-01T00:00:00.000Z, more than 300 s after")
    assert "it looks like epoch seconds" in lines[1]["error"]
    assert len({line["source"] for line in lines}) == 1 and str(path) in lines[0]["source"]
    # Run again: the file is read on from where it stood, nothing refused is tried again.
    again = runner.invoke(args=["ingest", str(path)])
    assert "Stored 0 records" in again.output, again.output
    assert len(refused_lines(os.path.join(app.instance_path, "rejected"))) == 2


def test_a_pushing_feed_sets_aside_the_record_the_service_refuses_and_delivers_the_rest(tmp_path):
    """The feed's clock or tolerance let a record through that the service refuses: the
    batch must neither be retried forever nor lose its good records."""
    from feeds.sinks import RemoteSink

    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "service.db"), "ANALYTICS_API_KEY": API_KEY})
    now = now_ms()
    wire = [record(question=f"q{i}.example", timestamp=format_ms(now - 60_000 + i)) for i in range(5)]
    wire[1]["timestamp"] = wire[3]["timestamp"] = "2099-01-01T00:00:00Z"
    spool = tmp_path / "spool"
    try:
        with RemoteSink(service.base, API_KEY, str(spool), wait_seconds=30) as sink:
            sink.commit("src", [], wire, {"n": 1}, 0)
        assert sink.pending() == 0
        sink.check()
        body = service.call("GET", "/v2/activity-log?startTime=-1h&sortOrder=asc", headers=AUTH)[1]
        assert [q["question"] for q in body["queries"]] == ["q0.example", "q2.example", "q4.example"]
        (folder,) = [spool / name for name in os.listdir(spool)]
        lines = refused_lines(folder)
        assert [line["record"]["question"] for line in lines] == ["q1.example", "q3.example"]
        assert all(line["source"] == "src" for line in lines)
        assert lines[0]["error"].startswith("Record 1: field 'timestamp' is 2099-01-01T00:00:00.000Z, more than")
    finally:
        service.stop()
