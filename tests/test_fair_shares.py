"""One key, or a client with no valid key at all, cannot take the service from the others:
against real gunicorn with few threads, so that a held thread shows."""

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import API_KEY, AUTH, record
from servers import Gunicorn

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"


@pytest.fixture
def few_threads(tmp_path):
    """gunicorn with 2 workers of 4 threads each."""
    env = {"ANALYTICS_DATABASE": str(tmp_path / "fair.db"), "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_THREADS": "4"}
    server = Gunicorn(tmp_path, env, workers=2)
    yield server
    server.stop()


def get(server, path, headers, timeout=60) -> tuple[int, dict]:
    """(status, headers) of one GET on a connection of its own."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.headers)
    finally:
        connection.close()


def timed(server, path, headers, timeout=60) -> float:
    started = time.monotonic()
    status, _ = get(server, path, headers, timeout)
    assert status == 200
    return time.monotonic() - started


def raw_connections(server, count: int, data: bytes) -> list[socket.socket]:
    """`count` connections that each sent `data` and then nothing."""
    connections = []
    for _ in range(count):
        connections.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        connections[-1].sendall(data)
    return connections


def single_worker(tmp_path, name, **settings) -> Gunicorn:
    """gunicorn with one worker and these settings (environment variables)."""
    env = {"ANALYTICS_DATABASE": str(tmp_path / f"{name}.db"), "ANALYTICS_API_KEY": API_KEY, **settings}
    return Gunicorn(tmp_path, env, workers=1)


def test_wrong_keys_do_not_hold_threads_and_valid_keys_are_not_delayed(few_threads):
    server = few_threads
    answers = []

    def guess(i):
        answers.append(get(server, "/v2/client", {"Authorization": f"guess-{i}"}))

    with ThreadPoolExecutor(200) as pool:
        for i in range(200):
            pool.submit(guess, i)
        time.sleep(0.5)  # the guesses are in flight
        valid = [timed(server, "/v2/client", AUTH) for _ in range(5)]
    assert max(valid) < 2, f"a valid key waited {max(valid):.1f} s behind 200 wrong keys"
    statuses = {status for status, _ in answers}
    assert len(answers) == 200 and statuses <= {401, 429}, statuses
    refused = [headers for status, headers in answers if status == 429]
    assert refused and all(1 <= int(h["Retry-After"]) <= 60 for h in refused), "past the free ones: 429"


def test_a_client_guessing_keys_in_a_loop_is_slowed_without_holding_threads(few_threads):
    """Past the free failures each refusal is answered after a second: a guessing loop makes
    one guess per second and connection instead of hundreds, and the held answers hold no
    thread (8 threads in all; 40 answers held by sleeping threads would stop everyone)."""
    server = few_threads
    answers, stop = [], threading.Event()

    def guess(i):
        while not stop.is_set():
            started = time.monotonic()
            status, headers = get(server, "/v2/client", {"Authorization": f"guess-{i}"})
            answers.append((status, headers, time.monotonic() - started))

    with ThreadPoolExecutor(40) as pool:
        for i in range(40):
            pool.submit(guess, i)
        time.sleep(1)  # past the free ones: answers are held now
        valid = sorted(timed(server, "/v2/client", AUTH) for _ in range(10))
        time.sleep(max(0.0, 3 - 1 - sum(valid)))
        stop.set()
    assert valid[5] < 0.5, f"a valid key's median was {valid[5]:.2f} s among held guesses"
    # 3 s of 40 connections: at most ~4 answers each, plus the 10 free ones per worker (answered
    # at once, the loop made thousands).
    assert len(answers) < 300, f"{len(answers)} guesses answered in 3 s"
    held = [(headers, seconds) for status, headers, seconds in answers if status == 429]
    assert held and all(seconds >= 0.9 and 1 <= int(h["Retry-After"]) <= 60 for h, seconds in held)


def test_held_refusals_keep_their_connection_open(tmp_path):
    """A held answer goes whole, and the kept-alive connection serves the next request."""
    server = single_worker(tmp_path, "held")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        for _ in range(10):  # the free ones
            assert get(server, "/v2/client", {"Authorization": "guess"})[0] == 401
        for _ in range(3):
            started = time.monotonic()
            connection.request("GET", "/v2/client", headers={"Authorization": "guess"})
            response = connection.getresponse()
            body = json.loads(response.read())
            assert response.status == 429 and body["error"]["code"] == 42903, body
            assert time.monotonic() - started >= 0.9
        connection.request("GET", "/v2/client", headers=AUTH)
        assert connection.getresponse().status == 200  # the same connection, not delayed
    finally:
        connection.close()
        server.stop()


def test_slow_senders_hold_no_thread_and_are_dropped_when_their_head_is_late(tmp_path):
    """20 clients sending their headers a line at a time, on one worker of 4 threads: the
    event loop reads heads, so valid requests go on being served, and a head not whole within
    ANALYTICS_HEADER_SECONDS closes its connection."""
    server = single_worker(tmp_path, "slow", ANALYTICS_THREADS="4", ANALYTICS_HEADER_SECONDS="3")
    slow = []
    try:
        slow = raw_connections(server, 20, b"GET /v2/client HTTP/1.1\r\nHost: x\r\n")
        waits = []
        for _ in range(4):
            for sock in slow:
                sock.sendall(b"X-Slow: 1\r\n")
            started = time.monotonic()
            try:
                status, _ = get(server, "/v2/client", AUTH, timeout=2)
            except TimeoutError:
                status = None
            waits.append(time.monotonic() - started if status == 200 else 2.0)
            time.sleep(0.4)
        assert sorted(waits)[2] < 0.5, f"valid requests waited {waits} behind slow senders"
        # Their heads began 3 s ago at least: closed by now, or within a second.
        for sock in slow:
            sock.settimeout(2)
            try:
                assert sock.recv(100) == b"", "a late head was answered"
            except ConnectionResetError:
                pass
    finally:
        for sock in slow:
            sock.close()
        server.stop()


def test_clients_that_never_read_nor_close_do_not_stall_the_worker(tmp_path):
    """A last answer's connection is closed once the client closes too (or after 2 s); clients
    that do neither, waited for one after the other, held up the whole worker 2 s each."""
    server = single_worker(tmp_path, "linger")
    silent = []
    try:
        silent = raw_connections(server, 10, b"GET /v2/client HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.5)
        try:
            waited = timed(server, "/v2/client", AUTH, timeout=5)
        except TimeoutError:
            waited = 5.0
        assert waited < 1, f"a valid request waited {waited:.1f} s behind 10 silent clients"
        for sock in silent:
            assert b"401" in sock.recv(100)  # each got its answer whole
    finally:
        for sock in silent:
            sock.close()
        server.stop()


def held_export(server, key) -> socket.socket:
    """A CSV export asked for and then not read: its answer waits in full socket buffers, and
    the request holds its server thread until the socket closes."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET /v2/activity-log/csv?{WINDOW} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\n\r\n".encode())
    return sock


def test_one_key_cannot_take_every_thread_with_expensive_requests(tmp_path):
    server = single_worker(tmp_path, "shares", ANALYTICS_THREADS="4", ANALYTICS_MAX_EXPENSIVE_PER_KEY="2")
    held = []
    try:
        reader = server.create_key("--name", "greedy", "--scope", "read")
        # ~8 MB of CSV: more than the kernel buffers between server and a client that does not read.
        long = "x" * 150
        for start in range(0, 20_000, 5_000):
            batch = [record(client_id=f"c{i % 7}", question=f"{long}-{i}.example") for i in range(start, start + 5_000)]
            assert server.call("POST", "/v2/ingest", batch, headers=AUTH)[0] == 200
        held = [held_export(server, reader) for _ in range(8)]
        statuses = [int(sock.recv(12)[9:12]) for sock in held]
        assert sorted(statuses) == [200] * 2 + [429] * 6, statuses
        status, headers = get(server, f"/v2/statistic/count?{WINDOW}", {"Authorization": reader})
        assert status == 429 and headers["Retry-After"] == "2"
        # Another key (the operator's) is served at once, statistics included.
        assert timed(server, "/v2/client", AUTH) < 3
        assert timed(server, f"/v2/statistic/count?{WINDOW}", AUTH) < 3
        # A hang-up gives the shares back.
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 10
        while get(server, f"/v2/statistic/count?{WINDOW}", {"Authorization": reader})[0] != 200:
            assert time.monotonic() < deadline, "the closed exports' shares never came back"
            time.sleep(0.2)
    finally:
        for sock in held:
            sock.close()
        server.stop()
