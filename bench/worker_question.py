"""What the custom gunicorn worker (app/worker.py) still buys behind the shipped nginx site:
a valid key's latency while clients guess keys in a loop, and while clients send their
requests a byte now and then, for the worker as shipped, plain gthread, and plain gthread
with nginx's own request-rate limit. Prints a markdown table.

.venv/bin/python bench/worker_question.py [--seconds 10] [--connections 200] [--rounds 2]
"""

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import ssl
import statistics
import sys
import tempfile
import threading
import time

from server import ROOT, Server, machine_busy_seconds

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support import nginx  # noqa: E402 - the tests' harness runs the committed site file

# nginx's own rate limit per client address, as an operator would add it to the site.
RATE_LIMIT = {
    "limit_conn_zone $binary_remote_addr zone=dns_analytics_per_address:10m;": (
        "limit_conn_zone $binary_remote_addr zone=dns_analytics_per_address:10m;\n"
        "limit_req_zone $binary_remote_addr zone=dns_analytics_rate:10m rate=20r/s;"
    ),
    "    limit_conn dns_analytics_per_address 64;": (
        "    limit_conn dns_analytics_per_address 64;\n    limit_req zone=dns_analytics_rate burst=200 nodelay;\n"
        "    limit_req_status 429;"
    ),
}
SETUPS = {
    "custom worker (as shipped)": ((), False),
    "plain gthread": (("-k", "gthread"), False),
    "plain gthread + nginx limit_req 20 r/s, burst 200": (("-k", "gthread"), True),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10, help="length of each attack")
    parser.add_argument("--connections", type=int, default=200, help="guessing connections")
    parser.add_argument("--rounds", type=int, default=2, help="each setup this often, in turns")
    args = parser.parse_args(argv)
    results = {name: [] for name in SETUPS}
    for _ in range(args.rounds):
        for name, (extra, limited) in SETUPS.items():
            print(f"{name} ...", flush=True)
            results[name].append(measure(extra, limited, args.seconds, args.connections))
    print(
        f"\n{args.connections} guessing connections from one address through nginx, {args.seconds:g} s each, "
        f"{args.rounds} rounds in turns; 2 gunicorn workers; {os.cpu_count()} cores\n"
    )
    print(
        "| setup | valid p50 idle | valid p50 / p95, guessing | guesses answered/s | "
        "valid p50, 70 slow senders | machine busy |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        for run in runs:
            print(
                f"| {name} | {run['idle']:.0f} ms | {run['p50']:.0f} / {run['p95']:.0f} ms | "
                f"{run['guesses']:,.0f} | {run['slow']:.0f} ms | {run['busy']:.2f} cores |"
            )
    return 0


def measure(extra, limited, seconds, connections) -> dict:
    folder = tempfile.mkdtemp(prefix="worker-question-")
    key = secrets.token_urlsafe(24)
    server = Server(
        os.path.join(folder, "q.db"),
        key,
        2,
        os.path.join(folder, "gunicorn.log"),
        extra=extra,
        env={"ANALYTICS_PROXY_COUNT": "1"},
    )
    site = nginx.SITE
    front = None
    try:
        if limited:
            text = open(site, encoding="utf-8").read()
            for old, new in RATE_LIMIT.items():
                assert old in text, old
                text = text.replace(old, new)
            nginx.SITE = os.path.join(folder, "site.conf")
            with open(nginx.SITE, "w", encoding="utf-8") as out:
                out.write(text)
        front = nginx.Nginx(server.port)
        records = [{"endpointId": "e", "clientId": f"c{i % 50}", "question": f"q{i}.example"} for i in range(2000)]
        status, _ = call(front.https_port, "POST", "/v2/ingest", key, json.dumps(records))
        assert status == 200, status
        idle = timed(front.https_port, key)
        stop, counter = multiprocessing.Event(), multiprocessing.Value("l", 0)
        attackers = [
            multiprocessing.Process(target=guess, args=(front.https_port, connections // 4, stop, counter), daemon=True)
            for _ in range(4)
        ]
        for attacker in attackers:
            attacker.start()
        time.sleep(2)
        busy_before, started = machine_busy_seconds(), time.monotonic()
        with counter.get_lock():
            counter.value = 0
        times = timed(front.https_port, key, seconds, all_times=True)
        guesses = counter.value / (time.monotonic() - started)
        busy = (machine_busy_seconds() - busy_before) / (time.monotonic() - started)
        stop.set()
        for attacker in attackers:
            attacker.join(30)
        slow = slow_senders(front.https_port, key)
        return {
            "idle": idle,
            "p50": statistics.median(times),
            "p95": statistics.quantiles(times, n=20)[18],
            "guesses": guesses,
            "slow": slow,
            "busy": busy,
        }
    finally:
        nginx.SITE = site
        if front is not None:
            front.stop()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


VALID, ATTACKER = "127.0.0.1", "127.0.0.2"  # two client addresses, as nginx's per-address limits see them


def connect(port, timeout=30, source=VALID) -> http.client.HTTPSConnection:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context, source_address=(source, 0))


def call(port, method, path, key, body=None):
    connection = connect(port)
    try:
        connection.request(method, path, body=body, headers={"Authorization": key, "Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def timed(port, key, seconds=3.0, all_times=False):
    times, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline or len(times) < 5:
        started = time.perf_counter()
        status, _ = call(port, "GET", "/v2/client", key)
        times.append((time.perf_counter() - started) * 1000)
        assert status == 200, status
        time.sleep(0.05)
    return times if all_times else statistics.median(times)


def guess(port, count, stop, counter):
    """`count` keep-alive connections sending wrong keys back to back."""

    def loop(i):
        connection = None
        while not stop.is_set():
            try:
                connection = connection or connect(port, source=ATTACKER)
                connection.request("GET", "/v2/client", headers={"Authorization": f"wrong-{i}"})
                connection.getresponse().read()
                with counter.get_lock():
                    counter.value += 1
            except (OSError, http.client.HTTPException):
                connection = None

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    stop.wait()


def slow_senders(port, key, count=70) -> float:
    """A valid key's p50 while `count` clients send a header line every 2 s."""
    stop = threading.Event()
    connections = []

    def trickle(connection):
        try:
            connection.putrequest("GET", "/v2/client")
            for i in range(10):
                connection.putheader(f"X-Slow-{i}", "1")
                connection.send(b"")
                if stop.wait(2):
                    return
        except OSError:
            pass

    for _ in range(count):
        connection = connect(port, source=ATTACKER)
        connection.connect()
        connections.append(connection)
        threading.Thread(target=trickle, args=(connection,), daemon=True).start()
    time.sleep(2)
    try:
        return timed(port, key, 4.0)
    finally:
        stop.set()
        for connection in connections:
            connection.close()


if __name__ == "__main__":
    sys.exit(main())
