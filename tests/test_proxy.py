"""The service behind nginx, run with the committed deploy/nginx-site.conf in front of a real
gunicorn: TLS, the client's address, realtime streams, the sub-path, the body limit."""

import collections
import http.client
import json
import socket
import ssl
import threading
import time
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from support import nginx
from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn, free_port

CLIENT_ADDRESS = "127.0.0.5"  # the test's own loopback address; nginx reaches gunicorn from 127.0.0.1
GUESSER_ADDRESS = "127.0.0.6"  # another client, guessing keys
PREFIX = "/dns-analytics"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """One gunicorn behind one nginx for the module (each test uses endpoints of its own)."""
    if nginx.UNAVAILABLE:
        pytest.skip(nginx.banner())
    folder = tmp_path_factory.mktemp("proxied")
    env = {"ANALYTICS_DATABASE": str(folder / "proxied.db"), "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_PROXY_COUNT": "1"}
    server = Gunicorn(folder, env, workers=2)
    front = None
    try:
        front = nginx.Nginx(server.port)
        yield front
    finally:
        if front is not None:
            front.stop()
        server.stop()


def connect(proxy, timeout=30) -> http.client.HTTPSConnection:
    """A TLS connection to nginx from CLIENT_ADDRESS (the certificate is the test's own)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return http.client.HTTPSConnection(
        "127.0.0.1", proxy.https_port, timeout=timeout, context=context, source_address=(CLIENT_ADDRESS, 0)
    )


def call(proxy, method, path, body=None, headers=None):
    """(status, headers, body bytes) of one request through nginx."""
    connection = connect(proxy)
    try:
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def test_client_address_reaches_the_audit_log(proxy):
    assert call(proxy, "POST", "/v2/ingest", [record("audited", "tv")], AUTH)[0] == 200
    # A forged X-Forwarded-For is not believed: nginx appends the real address, the one trusted.
    forged = {**AUTH, "X-Forwarded-For": "203.0.113.9"}
    assert call(proxy, "PUT", "/v2/client/alias/audited/tv", {"alias": "Living room"}, forged)[0] == 200
    query = "startTime=2020-01-01T00:00:00Z&action=client.alias.set&search=audited"
    status, _, body = call(proxy, "GET", f"/v2/admin-action?{query}", headers=AUTH)
    assert status == 200
    assert [a["sourceIp"] for a in json.loads(body)["actions"]] == [CLIENT_ADDRESS]


def test_http_is_sent_to_https(proxy):
    connection = http.client.HTTPConnection("127.0.0.1", proxy.http_port, timeout=10)
    connection.request("GET", "/v2/client")
    response = connection.getresponse()
    assert response.status == 301
    assert response.headers["Location"].startswith("https://")


@pytest.mark.parametrize("prefix", ["", PREFIX])
def test_realtime_events_arrive_through_the_proxy_within_a_second(proxy, prefix):
    stream = connect(proxy)
    stream.request("GET", f"{prefix}/v2/activity-log/realtime?endpointId=live", headers=AUTH)
    response = stream.getresponse()
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    assert response.readline().startswith(b": connected")
    arrived = {}

    def read():
        for line in response:
            if line.startswith(b"data: "):
                arrived[json.loads(line[6:])["clientId"]] = time.monotonic()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.3)
    sent = time.monotonic()
    assert call(proxy, "POST", f"{prefix}/v2/ingest", [record("live", "live")], AUTH)[0] == 200
    reader.join(timeout=5)
    stream.sock.shutdown(2)
    stream.close()
    assert "live" in arrived, "the event never came through nginx"
    assert arrived["live"] - sent < 1.0, arrived["live"] - sent


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [attrs[name] for name in ("src", "href") if attrs.get(name)]


def test_reference_and_api_under_a_sub_path(proxy):
    page_path = f"{PREFIX}/v2/docs"
    status, headers, body = call(proxy, "GET", page_path)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page = f"https://analytics.example.org{page_path}"
    parser = Links()
    parser.feed(body.decode())
    html = body.decode()
    spec = html[html.index("var override_config") :]
    spec_url = json.loads(spec[spec.index("{") : spec.index("}") + 1])["url"]
    for link in [*parser.links, spec_url]:
        path = urlsplit(urljoin(page, link)).path
        assert path.startswith(f"{PREFIX}/v2/"), link
        assert call(proxy, "GET", path)[0] == 200, path
    # With a trailing slash too.
    status, headers, _ = call(proxy, "GET", f"{page_path}/")
    assert status == 308 and urlsplit(urljoin(page + "/", headers["Location"])).path == page_path
    # And the API itself.
    assert call(proxy, "POST", f"{PREFIX}/v2/ingest", [record("prefixed", "tv")], AUTH)[0] == 200
    status, _, body = call(proxy, "GET", f"{PREFIX}/v2/client?endpointId=prefixed", headers=AUTH)
    assert status == 200 and "tv" in json.loads(body)["items"]["prefixed"]["clients"]


@pytest.mark.parametrize("prefix", ["", PREFIX])
def test_an_oversized_body_is_refused_by_nginx_with_the_api_error(proxy, prefix):
    def announce_too_much(connection, path):
        # Announced, never sent: the answer comes from the headers alone.
        connection.putrequest("POST", path)
        connection.putheader("Authorization", API_KEY)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(17 * 1024 * 1024))
        connection.endheaders()
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response, body

    response, body = announce_too_much(connect(proxy), f"{prefix}/v2/ingest")
    assert response.status == 413
    assert response.headers["Content-Type"] == "application/json"
    # The very answer the service gives by itself, so clients see one error shape.
    own, own_body = announce_too_much(http.client.HTTPConnection("127.0.0.1", proxy.upstream_port), "/v2/ingest")
    assert own.status == 413
    assert json.loads(body) == json.loads(own_body)
    assert json.loads(body)["error"]["code"] == 41301
    # 10 MB (unknown fields are ignored) goes through to the service.
    big = [record("big", "big", pad="x" * 2000)] * 5_000
    assert call(proxy, "POST", f"{prefix}/v2/ingest", big, AUTH)[:1] == (200,)


@pytest.mark.parametrize("kind", ["ndjson", "array"])
def test_a_chunked_body_passes_the_proxy_whole(proxy, kind):
    records = [record(f"chunked-{kind}", f"c{i % 5}", question=f"q{i}.example.com") for i in range(1000)]
    lines = [json.dumps(r).encode() for r in records]
    body = b"\n".join(lines) if kind == "ndjson" else b"[" + b",".join(lines) + b"]"
    content_type = "application/x-ndjson" if kind == "ndjson" else "application/json"
    connection = connect(proxy)
    connection.request(
        "POST",
        "/v2/ingest",
        body=(body[i : i + 3000] for i in range(0, len(body), 3000)),
        headers={**AUTH, "Content-Type": content_type},
        encode_chunked=True,
    )
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"accepted": 1000, "pastRetention": 0})
    connection.close()
    query = f"startTime=2000-01-01T00:00:00Z&endpointId[]=chunked-{kind}"
    status, _, answer = call(proxy, "GET", f"/v2/statistic/count?{query}", headers=AUTH)
    assert (status, json.loads(answer)["count"]) == (200, 1000)


def test_broken_chunked_framing_gets_the_api_error_from_the_proxy(proxy):
    connection = connect(proxy)
    connection.putrequest("POST", "/v2/ingest")
    for name, value in {**AUTH, "Content-Type": "application/json", "Transfer-Encoding": "chunked"}.items():
        connection.putheader(name, value)
    connection.endheaders(b"zz\r\n[]\r\n0\r\n\r\n")
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status == 400 and response.headers["Content-Type"] == "application/json", body[:200]
    assert json.loads(body)["error"]["code"] == 40004


def test_long_urls_pass_the_proxy_and_longer_ones_get_the_api_error(proxy):
    window = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
    many = "&".join(f"question%5B%5D=host-{i:04d}.some-long-subdomain.example-company.com" for i in range(1000))
    status, _, body = call(proxy, "GET", f"/v2/activity-log?{window}&{many}", headers=AUTH)
    assert status == 200, body[:200]
    for size, code in ((600_000, 41401), (1_200_000, 41401)):  # refused by the service, then by nginx
        status, headers, body = call(proxy, "GET", f"/v2/activity-log?searchQuestion={'a' * size}", headers=AUTH)
        assert status == 414 and headers["Content-Type"].startswith("application/json"), (size, body[:200])
        assert json.loads(body)["error"]["code"] == code


def test_a_guessing_loop_is_held_to_the_proxys_rate_and_a_valid_key_is_served(proxy):
    """One address sending wrong keys back to back: the service refuses the first ones (401,
    then its own 429 past 10 failures a minute) and nginx's limit_req the rest, at no cost to
    the service; a valid key from another address is served meanwhile."""
    codes = collections.Counter()
    connection = connect(proxy)
    connection.source_address = (GUESSER_ADDRESS, 0)
    for i in range(400):
        connection.request("GET", "/v2/client", headers={"Authorization": f"guess-{i}"})
        response = connection.getresponse()
        body = json.loads(response.read())
        codes[body["error"]["code"]] += 1
        if response.status == 429 and body["error"]["code"] == 42901:
            assert response.headers["Content-Type"] == "application/json"
            assert response.headers["Retry-After"] == "1"
    connection.close()
    assert 10 <= codes[40102] <= 20 and codes[42903] > 0, codes  # the service's own (10 free per worker)
    assert codes[42901] >= 100, codes  # past 20 a second and a burst of 200: nginx's
    started = time.monotonic()
    status, _, _ = call(proxy, "GET", "/v2/client", headers=AUTH)
    assert status == 200 and time.monotonic() - started < 2


def test_slow_senders_hold_nginx_connections_not_server_threads(tmp_path):
    """70 clients sending one header line every 2 s, against a gunicorn of 4 threads behind
    nginx: nginx passes only whole requests on, so a valid request is answered at once."""
    if nginx.UNAVAILABLE:
        pytest.skip(nginx.banner())
    env = {"ANALYTICS_DATABASE": str(tmp_path / "slow.db"), "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_THREADS": "4"}
    server = Gunicorn(tmp_path, env, workers=1)
    front, slow, stop = None, [], threading.Event()
    try:
        front = nginx.Nginx(server.port)

        def trickle(connection):
            try:
                connection.putrequest("GET", "/v2/client")
                for i in range(10):
                    connection.putheader(f"X-Slow-{i}", "1")
                    connection.send(b"")  # putheader only buffers: flush what is there
                    if stop.wait(2):
                        return
            except OSError:
                pass  # nginx gave up on it (client_header_timeout): as it should

        for _ in range(70):
            connection = connect(front)
            connection.connect()
            slow.append(connection)
            threading.Thread(target=trickle, args=(connection,), daemon=True).start()
        time.sleep(3)
        for _ in range(5):
            started = time.monotonic()
            status, _, _ = call(front, "GET", "/v2/client", headers=AUTH)
            assert status == 200 and time.monotonic() - started < 2
    finally:
        stop.set()
        for connection in slow:
            connection.close()
        if front is not None:
            front.stop()
        server.stop()


def tls_socket(port: int, source: str):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    return context.wrap_socket(raw)


def api_error(status: int, headers, body: bytes) -> dict:
    """The error of an ErrorResponse (API.md), whoever made it."""
    assert headers["Content-Type"].startswith("application/json"), (status, body[:200])
    answer = json.loads(body)
    assert answer["success"] is False and set(answer["error"]) == {"message", "code"}
    assert str(answer["error"]["code"]).startswith(str(status))
    return answer["error"]


def test_too_many_connections_from_one_address_get_the_api_error(proxy):
    """64 requests from one address whose bodies have not come (nginx waits for them): the next
    one from that address gets nginx's 503 as the API's error, with a Retry-After."""
    address = "127.0.0.7"
    head = f"POST /v2/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: {API_KEY}\r\nContent-Length: 100\r\n\r\n"
    waiting = []
    try:
        for _ in range(64):
            waiting.append(tls_socket(proxy.https_port, address))
            waiting[-1].sendall(head.encode())
        time.sleep(0.5)  # nginx has read every head
        connection = connect(proxy)
        connection.source_address = (address, 0)
        connection.request("GET", "/v2/client", headers=AUTH)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status == 503, body[:200]
        assert api_error(503, response.headers, body)["code"] == 50303
        assert response.headers["Retry-After"] == "1"
    finally:
        for sock in waiting:
            sock.close()
    assert call(proxy, "GET", "/v2/client", headers=AUTH)[0] == 200, "another address is served meanwhile"


def test_the_service_down_gets_the_api_error_from_the_proxy():
    """nginx in front of a port nothing listens on: its 502 is the API's error too."""
    if nginx.UNAVAILABLE:
        pytest.skip(nginx.banner())
    front = nginx.Nginx(free_port())
    try:
        status, headers, body = call(front, "GET", "/v2/client", headers=AUTH)
        assert status == 502, body[:200]
        assert api_error(502, headers, body)["code"] == 50201
    finally:
        front.stop()
