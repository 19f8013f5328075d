"""GET /metrics: Prometheus text format, its own key scope, bounded labels, and sums that are
right whichever of several gunicorn workers counted or answers."""

import os
import signal
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.helpers import API_KEY, AUTH, assert_error, create, ingest, record, samples
from support.servers import Gunicorn
from support.streams import StreamReader


def value(scraped: dict, name: str, **labels) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(client, headers=AUTH) -> dict:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/plain"
    return samples(response.get_data(as_text=True))


def test_metrics_key_scope(client, runner):
    assert_error(client.get("/metrics"), 401, 40101)
    reader = create(runner, "--name", "dash", "--scope", "read")
    assert_error(client.get("/metrics", headers={"Authorization": reader}), 403, 40301)
    limited = create(runner, "--name", "prom-home", "--scope", "metrics", "--endpoint", "home")
    assert_error(client.get("/metrics", headers={"Authorization": limited}), 403, 40302)
    prometheus = create(runner, "--name", "prom", "--scope", "metrics")
    scraped = scrape(client, {"Authorization": f"Bearer {prometheus}"})
    assert value(scraped, "dns_analytics_database_size_bytes") > 0
    # A metrics key reads nothing else.
    assert_error(client.get("/v2/client", headers={"Authorization": prometheus}), 403, 40301)


def test_ingest_counts_by_endpoint_action_status_and_store_figures(client):
    before = scrape(client)
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 60))
    ingest(
        client,
        record("metrics-a", "c1", stamp, action=0, statusCode="NXDOMAIN"),
        record("metrics-a", "c2", stamp, action=0, statusCode="NXDOMAIN"),
        record("metrics-a", "c1", stamp, action=1, statusCode="made-up"),
        record("metrics-a", "c1", stamp),
        record("metrics-a", "c1", "2020-01-01T00:00:00Z"),  # long past the 33 days' retention
    )
    assert_error(client.post("/v2/ingest", json=[{"endpointId": "x"}], headers=AUTH), 400, 40005)
    after = scrape(client)

    def added(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    stored = "dns_analytics_queries_stored_total"
    assert added(stored, endpoint="metrics-a", action="0", status="NXDOMAIN") == 2
    assert added(stored, endpoint="metrics-a", action="1", status="other") == 1
    assert added(stored, endpoint="metrics-a", action="unknown", status="unknown") == 2
    assert added("dns_analytics_ingest_records_total") == 5
    assert added("dns_analytics_ingest_past_retention_records_total") == 1
    assert added("dns_analytics_ingest_requests_total", result="accepted") == 1
    assert added("dns_analytics_ingest_requests_total", result="40005") == 1
    assert added("dns_analytics_request_duration_seconds_count", operation="POST /v2/ingest") == 2
    assert value(after, "dns_analytics_database_size_bytes") > 0
    age = value(after, "dns_analytics_newest_record_age_seconds", endpoint="metrics-a")
    assert 59 <= age < 600, age


def test_feeds_report_their_losses_as_totals_per_run(client, runner):
    """POST /v2/ingest/losses keeps each feed run's totals by place (a repeated or late
    report never counts twice); /metrics sums the runs."""

    def report(run, endpoint, losses, headers=AUTH):
        return client.post(
            "/v2/ingest/losses", json={"run": run, "endpointId": endpoint, "losses": losses}, headers=headers
        )

    def lost(endpoint, place):
        return value(scrape(client), "dns_analytics_feed_lost_records_total", endpoint=endpoint, place=place)

    assert report("run-1", "lossy", {"collector-queue": 5, "resolver": 2}).json == {"recorded": 2}
    assert report("run-1", "lossy", {"collector-queue": 5}).status_code == 200  # sent again
    assert report("run-1", "lossy", {"collector-queue": 3}).status_code == 200  # late: older news
    assert report("run-2", "lossy", {"collector-queue": 4}).status_code == 200  # a later run
    assert (lost("lossy", "collector-queue"), lost("lossy", "resolver")) == (9, 2)

    for bad in (
        {"run": "r", "endpointId": "lossy", "losses": {"somewhere": 1}},
        {"run": "r", "endpointId": "lossy", "losses": {"resolver": -1}},
        {"run": "r", "endpointId": "lossy", "losses": {"resolver": "many"}},
        {"run": "r" * 65, "endpointId": "lossy", "losses": {"resolver": 1}},
        {"run": "r", "endpointId": "", "losses": {"resolver": 1}},
    ):
        assert_error(client.post("/v2/ingest/losses", json=bad, headers=AUTH), 400, 40001)
    missing = {"run": "r", "endpointId": "lossy"}
    assert_error(client.post("/v2/ingest/losses", json=missing, headers=AUTH), 400, 40003)
    assert_error(client.post("/v2/ingest/losses", data="[", headers=AUTH), 400)
    limited = {"Authorization": create(runner, "--name", "feed-home", "--scope", "ingest", "--endpoint", "home")}
    assert_error(report("r", "lossy", {"resolver": 50}, limited), 403, 40302)
    reader = {"Authorization": create(runner, "--name", "reader", "--scope", "read")}
    assert_error(report("r", "lossy", {"resolver": 50}, reader), 403, 40301)
    assert report("r", "home", {"resolver": 1}, limited).status_code == 200
    assert (lost("lossy", "resolver"), lost("home", "resolver")) == (2, 1)


def test_endpoint_labels_are_bounded(make_app, database):
    app = make_app(ANALYTICS_METRICS_ENDPOINTS=2)
    client = app.test_client()
    for name in ("bound-1", "bound-2", "bound-3", "bound-4"):
        ingest(client, record(name, "c"))
    text = client.get("/metrics", headers=AUTH).get_data(as_text=True)
    endpoints = {
        sample.labels["endpoint"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "endpoint" in sample.labels
    }
    assert {"bound-1", "bound-2", "other"} <= endpoints
    assert not endpoints & {"bound-3", "bound-4"}


@pytest.fixture
def server(tmp_path, database):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    yield server
    server.stop()


def test_sums_over_gunicorn_workers_and_open_streams(server):
    def ingest_batches():
        for batch in range(10):
            batch = [record("home", f"c{i}", question=f"q{batch}.com") for i in range(5)]
            assert server.call("POST", "/v2/ingest", batch, AUTH)[0] == 200

    def scraped():
        status, raw = server.fetch("GET", "/metrics", headers=AUTH)
        assert status == 200
        return samples(raw.decode())

    ingest_batches()
    stream = StreamReader(server, "/v2/activity-log/realtime", AUTH)
    assert stream.response.status == 200
    assert value(scraped(), "dns_analytics_realtime_streams_open") == 1

    # Workers that die take their open streams with them; their counts stay in the sums.
    old = set(server.worker_pids())
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (len(server.worker_pids()) < 2 or set(server.worker_pids()) & old):
        time.sleep(0.1)
    server.wait_ready()
    ingest_batches()
    log = server.log_path.read_text().splitlines()
    assert len({line.split("pid=")[1] for line in log if '"POST /v2/ingest' in line}) >= 2
    for _ in range(6):  # whichever worker answers, the sums are the same
        figures = scraped()
        assert value(figures, "dns_analytics_ingest_records_total") == 100
        labels = {"endpoint": "home", "action": "unknown", "status": "unknown"}
        assert value(figures, "dns_analytics_queries_stored_total", **labels) == 100
        assert value(figures, "dns_analytics_ingest_requests_total", result="accepted") == 20
        assert value(figures, "dns_analytics_realtime_streams_open") == 0

    stream = StreamReader(server, "/v2/activity-log/realtime", AUTH)
    assert value(scraped(), "dns_analytics_realtime_streams_open") == 1
    stream.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and value(scraped(), "dns_analytics_realtime_streams_open") != 0:
        time.sleep(0.1)
    assert value(scraped(), "dns_analytics_realtime_streams_open") == 0
