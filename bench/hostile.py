"""Hostile and heavy use against real gunicorn (issue 15's "Done when"): prints a markdown table.

.venv/bin/python bench/hostile.py                    # 2,000,000 records, 2 workers
.venv/bin/python bench/hostile.py --records 200000   # a smoke run
"""

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import loads
import probes
from server import Server, memory_kib
from traffic import Traffic

DAY_MS = 86_400_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--wal-seconds", type=float, default=60, help="length of the WAL scenario")
    parser.add_argument("--dir", help="work folder (default: a temporary one, removed after)")
    parser.add_argument("--scenarios", default="abcdefg", help="which scenarios to run (default: all, abcdefg)")
    args = parser.parse_args(argv)
    workdir = args.dir or tempfile.mkdtemp(prefix="dns-hostile-")
    os.makedirs(workdir, exist_ok=True)
    traffic = Traffic(args.records, int(time.time() // 60 * 60_000))
    database = os.path.join(workdir, "hostile.db")
    server = Server(database, secrets.token_urlsafe(24), args.workers, os.path.join(workdir, "gunicorn.log"))
    rows = []
    try:
        print(f"loading {args.records:,} records over HTTP ...", flush=True)
        loads.load_http(traffic, server, 4)
        env = {**server.env}
        reader = probes.flask(server, env, "keys", "create", "--name", "hostile-reader", "--scope", "read")
        reader = reader.stdout.strip().splitlines()[-1]
        window = (
            f"startTime={traffic.format_ms(traffic.end_ms - 30 * DAY_MS)}&endTime={traffic.format_ms(traffic.end_ms)}"
        )
        for name, scenario in (
            ("a", lambda: expensive_hang_ups(server, reader, window)),
            ("b", lambda: wrong_keys(server)),
            ("c", lambda: hostile_batches(server)),
            ("d", lambda: wal_under_reads(server, traffic, database, window, args.wal_seconds)),
            ("e", lambda: deletes_during_reads(server, traffic, window)),
            ("f", lambda: chunked_over_limit(server, window)),
            ("g", lambda: revoked_stream(server, env)),
        ):
            if name not in args.scenarios:
                continue
            print(f"scenario {name} ...", flush=True)
            rows.append((name, *scenario()))
    finally:
        server.stop()
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{args.records:,} records, {args.workers} workers\n")
    print("| | scenario | measured | target |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


def call(server, path, key=None, method="GET", body=None, headers=None, timeout=120) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers={"Authorization": key or server.api_key, **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def p50_ms(server, path="/v2/client", calls=20, key=None) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        call(server, path, key)
        times.append((time.perf_counter() - started) * 1000)
        time.sleep(0.05)
    return statistics.median(times)


def send_and_hang_up(server, path, key):
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\n\r\n".encode())


def expensive_hang_ups(server, reader, window):
    path = f"/v2/statistic/timeseries/question?{window}"
    for _ in range(64):
        send_and_hang_up(server, path, reader)
    p50 = p50_ms(server)
    return (
        "64 × 30-day timeseries/question from a read key, hung up → operator `GET /v2/client` p50",
        f"{p50:,.0f} ms",
        "≤ 250 ms",
    )


def _guess(port: int, first: int, count: int, stop):
    """One attacking process: `count` connections sending wrong keys back to back."""

    def loop(i):
        while not stop.is_set():
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                connection.request("GET", "/v2/client", headers={"Authorization": f"wrong-{i}"})
                connection.getresponse().read()
            except OSError:
                pass
            finally:
                connection.close()

    with ThreadPoolExecutor(count) as pool:
        for i in range(first, first + count):
            pool.submit(loop, i)


def wrong_keys(server, connections=200, processes=4):
    """The attackers run in processes of their own: threads of this one would share its GIL
    with the valid key's timed calls and time the client, not the service."""
    stop = multiprocessing.Event()
    each = connections // processes
    attackers = [
        multiprocessing.Process(target=_guess, args=(server.port, i * each, each, stop), daemon=True)
        for i in range(processes)
    ]
    for attacker in attackers:
        attacker.start()
    time.sleep(2)
    p50 = p50_ms(server)
    stop.set()
    for attacker in attackers:
        attacker.join(30)
    return f"{connections} connections with wrong keys → a valid key's p50", f"{p50:,.0f} ms", "≤ 100 ms"


def hostile_batches(server):
    before = {pid: memory_kib(pid)["VmRSS"] for pid in server.workers()}
    for n in range(40):
        batch = [
            {
                "endpointId": "hostile",
                "clientId": "c",
                "question": f"h{n}-{i}.example",
                "answers": [{"ips": [f"10.{n % 250}.{i % 250}.{j % 250}" for j in range(200)]}],
            }
            for i in range(2000)
        ]
        batch.append({"endpointId": "hostile"})  # invalid: nothing of the batch is stored
        call(server, "/v2/ingest", method="POST", body=json.dumps(batch), headers={"Content-Type": "application/json"})
    growth = max(memory_kib(pid)["VmRSS"] - before.get(pid, 0) for pid in server.workers()) / 1024
    return "40 rejected batches of large distinct answer sets → worker RSS growth", f"{growth:,.0f} MB", "< 150 MB"


def wal_under_reads(server, traffic, database, window, seconds):
    stop, biggest = threading.Event(), [0]

    def read():
        while not stop.is_set():
            call(server, f"/v2/statistic/count/question?{window}")

    def ingest():
        index = 0
        while not stop.is_set():
            call(
                server,
                "/v2/ingest",
                method="POST",
                body=traffic.batch_json(index % traffic.batches),
                headers={"Content-Type": "application/json"},
            )
            index += 1

    threads = [threading.Thread(target=f) for f in (read, read, read, ingest)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            biggest[0] = max(biggest[0], os.path.getsize(database + "-wal"))
        except OSError:
            pass
        time.sleep(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    return (
        f"WAL during {seconds:g} s of ingest + 3 looping 30-day count/question",
        f"{biggest[0] / 2**20:,.0f} MB",
        "≤ 256 MB",
    )


def deletes_during_reads(server, traffic, window):
    errors, cut, stop = [], [0], threading.Event()

    def export():
        while not stop.is_set():
            status, body = call(server, f"/v2/activity-log/csv?{window}&pageSize=500", timeout=600)
            if status != 200:
                errors.append(status)
            elif not body.endswith(b"\n"):
                cut[0] += 1

    def pages():
        while not stop.is_set():
            status, _ = call(server, f"/v2/activity-log?{window}&pageSize=500")
            if status not in (200, 429):
                errors.append(status)

    threads = [threading.Thread(target=f) for f in (export, pages, pages)]
    for thread in threads:
        thread.start()
    clients = [base for base, _ in traffic.clients][:20]
    for client in clients:
        body = json.dumps({"clientIds": [client["clientId"]], "endpointIds": [client["endpointId"]]})
        status, _ = call(server, "/v2/client", method="DELETE", body=body, headers={"Content-Type": "application/json"})
        if status != 200:
            errors.append(status)
    stop.set()
    for thread in threads:
        thread.join()
    return (
        "20 × DELETE /v2/client during exports and log pages → errors, cut exports",
        f"{len(errors)}, {cut[0]}",
        "0, 0",
    )


def chunked_over_limit(server, window):
    count = lambda: json.loads(call(server, "/v2/statistic/count?startTime=2000-01-01T00:00:00Z")[1])["count"]  # noqa: E731
    before = count()
    lines = (
        json.dumps({"endpointId": "chunked", "clientId": "c", "question": f"q{i}.example", "pad": "x" * 950})
        for i in range(17_500)
    )
    # The answer is read while the body is still being sent: the service answers 413 as soon as
    # the limit is passed and closes, and a reset would then lose an answer read only at the end.
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=120)
    answer = []
    reader = threading.Thread(target=lambda: answer.append(sock.recv(4096)), daemon=True)
    reader.start()
    try:
        sock.sendall(
            b"POST /v2/ingest HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/x-ndjson\r\nAuthorization: " + server.api_key.encode() + b"\r\n\r\n"
        )
        for line in lines:
            chunk = line.encode() + b"\n"
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # refused before the whole body was sent
    reader.join(30)
    sock.close()
    head = answer[0].split(b"\r\n", 1)[0].decode(errors="replace") if answer and answer[0] else ""
    status = head.split(" ")[1] if head.startswith("HTTP/") else "no answer"
    return "a chunked 17 MB NDJSON body → status, records stored", f"{status}, {count() - before}", "413, 0"


def revoked_stream(server, env):
    key = probes.flask(server, env, "keys", "create", "--name", "hostile-stream", "--scope", "read")
    key = key.stdout.strip().splitlines()[-1]
    token = json.loads(call(server, "/v2/auth/token", key)[1])["token"]
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", f"/v2/activity-log/realtime?authToken={token}")
    response = connection.getresponse()
    probes.flask(server, env, "keys", "revoke", "hostile-stream")
    revoked = time.monotonic()
    try:
        while response.read1(65536):
            pass
        ended = f"{time.monotonic() - revoked:.1f} s"
    except OSError:
        ended = "not within 30 s"
    finally:
        connection.close()
    return "a revoked key's open stream ends after", ended, "≤ 5 s"


if __name__ == "__main__":
    sys.exit(main())
