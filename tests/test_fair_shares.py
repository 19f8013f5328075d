"""One key, or a client with no valid key at all, cannot take the service from the others:
against real gunicorn with few threads, so that a held thread shows."""

import http.client
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn

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


def test_a_finished_export_has_given_its_share_back_when_its_client_has_read_it(tmp_path):
    # The client of a streamed answer reads its end before the server has closed the response;
    # a key exporting one file after another must not find its own last export still counted.
    server = single_worker(tmp_path, "sequential", ANALYTICS_MAX_EXPENSIVE_PER_KEY="1")
    try:
        assert server.call("POST", "/v2/ingest", [record(client_id=f"c{i}") for i in range(50)], AUTH)[0] == 200
        statuses = []
        for _ in range(100):
            statuses.append(get(server, f"/v2/activity-log/csv?{WINDOW}", AUTH)[0])
            statuses.append(get(server, f"/v2/activity-log?{WINDOW}&pageSize=10", AUTH)[0])
        assert statuses == [200] * 200, f"{statuses.count(429)} answers of 200 were 429"
    finally:
        server.stop()


def worker_use(pid: int) -> tuple[float, int]:
    """(CPU seconds so far, resident MiB) of a process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    with open(f"/proc/{pid}/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), rss_kib // 1024


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends before it closes (or goes quiet for the socket's timeout)."""
    answer = b""
    try:
        while part := sock.recv(65536):
            answer += part
    except (TimeoutError, ConnectionResetError):
        pass
    return answer


def test_a_request_line_that_never_ends_is_refused_and_costs_the_worker_little(tmp_path):
    """Reached directly, gunicorn bounds a request line (gunicorn.conf.py): each of 8 connections
    sending 8 MiB of a line that never ends is refused once past the bound, at little cost to
    the worker, which then serves as before."""
    server = single_worker(tmp_path, "lines", ANALYTICS_THREADS="4")
    try:
        [worker] = server.worker_pids()
        assert get(server, "/v2/client", AUTH)[0] == 200
        cpu, rss = worker_use(worker)
        lines = raw_connections(server, 8, b"GET /v2/activity-log?searchQuestion=")
        chunk = b"a" * 65536
        for sock in lines:
            sock.settimeout(5)
            try:
                for _ in range(128):  # 8 MiB
                    sock.sendall(chunk)
            except OSError:  # refused and closed while sending: the point
                pass
        answers = [answer_of(sock) for sock in lines]
        for sock in lines:
            sock.close()
        assert all(a.startswith((b"HTTP/1.1 431", b"HTTP/1.1 414")) for a in answers), [a[:40] for a in answers]
        cpu_now, rss_now = worker_use(worker)
        spent, grown = cpu_now - cpu, rss_now - rss
        assert spent < 3, f"the lines cost the worker {spent:.1f} s of CPU"
        assert grown < 64, f"the worker grew by {grown} MiB"
        assert timed(server, "/v2/client", AUTH) < 2
    finally:
        server.stop()


def test_the_longest_urls_the_service_reads_pass_gunicorn(tmp_path):
    """1,000 values (the documented limit) of the longest domain names, ~270 KB of URL."""
    server = single_worker(tmp_path, "long")
    try:
        labels = ".".join(["a" * 63] * 3)
        names = [f"{labels}.{i:061d}" for i in range(1000)]
        assert len(names[0]) == 253
        many = "&".join(f"question%5B%5D={name}" for name in names)
        status, body = get(server, f"/v2/activity-log?{WINDOW}&{many}", AUTH)
        assert status == 200, body
    finally:
        server.stop()


@pytest.mark.parametrize(
    "headers",
    [
        "".join(f"X-Field-{i}: {i}\r\n" for i in range(101)),  # more fields than 100
        f"X-Big: {'b' * 8200}\r\n",  # a field over 8190 bytes
    ],
    ids=["101 fields", "an 8 KiB field"],
)
def test_heads_past_the_header_bounds_are_refused_at_once(tmp_path, headers):
    server = single_worker(tmp_path, "heads")
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(f"GET /v2/client HTTP/1.1\r\nHost: x\r\nAuthorization: {API_KEY}\r\n{headers}\r\n".encode())
            answer = answer_of(sock)
        assert answer.startswith(b"HTTP/1.1 431") and answer.count(b"HTTP/1.1 ") == 1, answer[:200]
    finally:
        server.stop()
