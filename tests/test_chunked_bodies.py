"""Bodies of unknown length (Transfer-Encoding: chunked), as streaming clients send them, through
real gunicorn as gunicorn.conf.py runs it: stored whole, or refused whole with a clear error."""

import http.client
import json
import socket
import time

import pytest

from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn

KINDS = ("ndjson", "array", "object")


def body_of(kind: str, endpoint: str, count: int) -> tuple[str, bytes]:
    """(Content-Type, body) of `count` records for `endpoint`, in one of the three ingest forms."""
    records = [record(endpoint, f"c{i % 7}", question=f"q{i}.example.com") for i in range(count)]
    if kind == "ndjson":
        return "application/x-ndjson", "\n".join(json.dumps(r) for r in records).encode()
    return "application/json", json.dumps(records if kind == "array" else {"records": records}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chunked")
    env = {"ANALYTICS_DATABASE": str(folder / "chunked.db"), "ANALYTICS_API_KEY": API_KEY}
    running = Gunicorn(folder, env, workers=1)
    yield running
    running.stop()


def count(server, endpoint) -> int:
    status, body = server.call(
        "GET", f"/v2/statistic/count?startTime=2000-01-01T00:00:00Z&endpointId[]={endpoint}", headers=AUTH
    )
    assert status == 200, body
    return body["count"]


def post_chunked(port, content_type: str, body: bytes, chunk_size: int):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v2/ingest",
            body=(body[i : i + chunk_size] for i in range(0, len(body), chunk_size)),
            headers={"Authorization": API_KEY, "Content-Type": content_type},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunk_size, records", [(1, 5), (4096, 1000), (1 << 20, 1000)])
def test_a_chunked_body_is_stored_whole(server, kind, chunk_size, records):
    endpoint = f"{kind}-{chunk_size}"
    status, answer = post_chunked(server.port, *body_of(kind, endpoint, records), chunk_size)
    assert (status, answer) == (200, {"accepted": records, "pastRetention": 0})
    assert count(server, endpoint) == records


def raw_exchange(port, head: bytes, body: bytes, hang_up=False) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        if hang_up:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
        return answer


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 1 << 30


BROKEN = {
    "a chunk size that is no number": (b"zz\r\n" + b"x" * 10 + b"\r\n0\r\n\r\n", False),
    "a chunk longer than its size": (b"3\r\n[{}, {}]\r\n0\r\n\r\n", False),
    "a bad trailer": (b"2\r\n[]\r\n0\r\nno colon here\r\n\r\n", False),
    "a client hanging up mid-body": (b"1000\r\n" + b'[{"endpointId": "broken"', True),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_chunked_framing_is_a_400_and_stores_nothing(server, case):
    body, hang_up = BROKEN[case]
    head = (
        b"POST /v2/ingest HTTP/1.1\r\nHost: test\r\nAuthorization: " + API_KEY.encode() + b"\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    before = server.log_path.read_text()
    answer = raw_exchange(server.port, head, body, hang_up)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 400"), answer[:300]
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert error["code"] == 40004, error
    assert count(server, "broken") == 0
    logged = server.log_path.read_text()[len(before) :]
    assert "Traceback" not in logged and "Error handling request" not in logged, logged


def answers_until_closed(port, request: bytes) -> tuple[bytes, float]:
    """All the server sends on one connection until it closes it, and how long that took."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while part := sock.recv(65536):
            answer += part
    return answer, time.monotonic() - started


@pytest.mark.parametrize("case", BROKEN)
def test_a_refused_request_with_a_broken_chunked_body_is_answered_once_and_closed(server, case):
    """Refused before its body is read (a wrong key), a request's broken body is never read as
    a next request: one answer, the service's, and the connection closed."""
    body, _ = BROKEN[case]
    head = (
        b"POST /v2/ingest HTTP/1.1\r\nHost: test\r\nAuthorization: wrong\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    answer, took = answers_until_closed(server.port, head + body)
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 401"), answer[:600]
    assert b"Connection: close" in answer.partition(b"\r\n\r\n")[0] and took < 5, took
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["error"]["code"] == 40102


def test_a_refused_request_with_a_body_keeps_nothing_of_it_for_later(server):
    """The body of a refused request is not read to find a next request either: the answer, then
    the connection closed, with most of a 100 MB body never sent."""
    head = b"POST /v2/ingest HTTP/1.1\r\nHost: test\r\nAuthorization: wrong\r\nContent-Length: 100000000\r\n\r\n"
    answer, took = answers_until_closed(server.port, head + b"x" * 65536 + b"GET /v2/client HTTP/1.1\r\n\r\n")
    assert answer.count(b"HTTP/1.1 ") == 1 and answer.startswith(b"HTTP/1.1 401"), answer[:600]
    assert b"Connection: close" in answer.partition(b"\r\n\r\n")[0] and took < 5, took
