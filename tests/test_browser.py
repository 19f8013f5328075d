"""A real browser as a client: headless Chromium on the API reference and on an EventSource page."""

import threading
import urllib.parse
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support.browser import MISSING, Chromium, find_chromium
from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn

# What a dashboard author writes: fetch a token with the key, then open an EventSource with it
# (EventSource cannot send an Authorization header). The key and the API's base URL come in the
# fragment, which the browser never sends to the page's server.
TAIL_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>tail</title></head>
<body>
<p id="status">starting</p>
<ul id="events"></ul>
<script>
const params = new URLSearchParams(location.hash.slice(1));
const base = params.get("base");
const status = document.getElementById("status");
fetch(base + "/v2/auth/token", {headers: {Authorization: params.get("key")}})
  .then((response) => {
    if (!response.ok) throw new Error("token: HTTP " + response.status);
    return response.json();
  })
  .then(({token}) => {
    const url = base + "/v2/activity-log/realtime?authToken=" + encodeURIComponent(token)
      + "&endpointId=" + encodeURIComponent(params.get("endpoint"));
    const source = new EventSource(url);
    source.onopen = () => { status.textContent = "open"; };
    source.onerror = () => { status.textContent = "error " + source.readyState; };
    source.onmessage = (event) => {
      const item = document.createElement("li");
      item.textContent = JSON.parse(event.data).question;
      item.dataset.id = event.lastEventId;
      document.getElementById("events").append(item);
    };
  })
  .catch((error) => { status.textContent = "failed: " + error.message; });
</script>
</body></html>
"""


class PageHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = TAIL_PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page_origin():
    """A static page server on a loopback port of its own: another origin than the API's."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, page_origin):
    tmp = tmp_path_factory.mktemp("browser-server")
    env = {
        "ANALYTICS_DATABASE": str(tmp / "analytics.db"),
        "ANALYTICS_API_KEY": API_KEY,
        "ANALYTICS_CORS_ORIGINS": page_origin,
    }
    server = Gunicorn(tmp, env, workers=2)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if find_chromium() is None:
        pytest.fail(MISSING, pytrace=False)  # loudly: a skip would hide the browser tests
    chromium = Chromium(tmp_path_factory.mktemp("chromium"))
    try:
        yield chromium
    finally:
        chromium.close()


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_reference_page_renders_the_operations_with_no_other_host(server, browser):
    browser.open(f"{server.base}/v2/docs")
    paths = browser.wait_for(
        "Array.from(document.querySelectorAll('.opblock-summary-path'), (el) => el.getAttribute('data-path'))"
    )
    assert {"/v2/client", "/v2/ingest", "/v2/activity-log/realtime"} <= set(paths)
    assert f"{server.base}/v2/openapi.json" in browser.requests
    # data: URLs (Swagger UI's inline icons) are no requests to anywhere.
    fetched = [url for url in browser.requests if not url.startswith("data:")]
    elsewhere = [url for url in fetched if not url.startswith(f"{server.base}/")]
    assert elsewhere == [], elsewhere


def test_event_source_on_another_origin_receives_records_ingested_meanwhile(server, browser, page_origin):
    fragment = urllib.parse.urlencode({"base": server.base, "key": API_KEY, "endpoint": "browser"})
    browser.open(f"{page_origin}/#{fragment}")
    status = "document.getElementById('status').textContent"
    assert browser.wait_for(f"{status} !== 'starting' && {status}") == "open", browser.console

    shown = "Array.from(document.querySelectorAll('#events li'), (li) => li.textContent)"
    batch = [
        record(endpoint="browser", question="first.example", timestamp=now()),
        record(endpoint="elsewhere", question="filtered-out.example", timestamp=now()),
        record(endpoint="browser", question="second.example", timestamp=now()),
    ]
    assert server.call("POST", "/v2/ingest", batch, AUTH) == (200, {"accepted": 3, "pastRetention": 0})
    browser.wait_for(f"{shown}.length >= 2")
    assert browser.evaluate(shown) == ["first.example", "second.example"]

    # The same stream keeps delivering: a later batch arrives after the first.
    later = [record(endpoint="browser", question="third.example", timestamp=now())]
    assert server.call("POST", "/v2/ingest", later, AUTH) == (200, {"accepted": 1, "pastRetention": 0})
    browser.wait_for(f"{shown}.length >= 3")
    assert browser.evaluate(shown) == ["first.example", "second.example", "third.example"]
    ids = browser.evaluate("Array.from(document.querySelectorAll('#events li'), (li) => Number(li.dataset.id))")
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert browser.evaluate(status) == "open"
