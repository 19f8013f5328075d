"""How long a query takes to reach the activity log: a real resolver (Unbound, BIND 9, Knot
Resolver or dnsdist, each given docs/feeding.md's own dnstap lines, as tests/test_quick_starts.py
runs them) sends its dnstap to the collector (`dns-analytics-feed collect-dnstap`), which stores
it in the service's SQLite database (the local sink) or pushes it to the service's POST
/v2/ingest (`--url`); real gunicorn serves GET /v2/activity-log. One query at a time: its answer,
then the log polled (every 10 ms) until the query is in it; prints the median, p90, p99 and the
largest delay per resolver and sink.

.venv/bin/python bench/query_to_visible.py [--resolver unbound,bind,knot,dnsdist] [--samples 60]
    [--sink local,url] [--pause 0.3] [--jitter 1] [--background 0]

What is measured is what docs/feeding.md says: to try a resolver's setting, edit its quick start
there and run this again. Needs Debian's unbound, bind9, knot-resolver and dnsdist
(scripts/ensure-unbound and scripts/ensure-resolvers install them).
"""

import argparse
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import dns.exception
from resolver_load import start_collector, wait_for
from server import ROOT, Server

sys.path.insert(0, os.path.join(ROOT, "tests"))
# The tests' harness: each resolver run the way the quick-start tests run it, with the docs' lines.
from support import unbound  # noqa: E402
from support.resolvers import BIND, DNSDIST, KNOT, Bind, Dnsdist, Knot, documented_lines  # noqa: E402

POLL_SECONDS = 0.01
GIVE_UP_SECONDS = 30.0


def start_unbound(folder: Path, socket_path: Path):
    return unbound.Unbound(folder, dnstap=documented_lines("unbound", socket_path))


# name -> (starts it on the collector's socket, a zone of its where every other name is
# NXDOMAIN: nothing is asked of the internet, and each query's name is new to its cache)
RESOLVERS = {
    "unbound": (start_unbound, "home.test"),
    "bind": (Bind, "home.example"),
    "knot": (Knot, "ads.example"),  # the harness's policy answers NXDOMAIN under it
    "dnsdist": (Dnsdist, "home.example"),  # its upstream answers NXDOMAIN under it
}


def versions() -> dict[str, str]:
    """Each resolver's version, or why it cannot run (starting with UNAVAILABLE)."""
    unbound.probe()
    found = {"unbound": (unbound.VERSION, unbound.UNAVAILABLE)}
    for name, program in (("bind", BIND), ("knot", KNOT), ("dnsdist", DNSDIST)):
        program.probe()
        found[name] = (program.VERSION, program.UNAVAILABLE)
    return {name: version or f"UNAVAILABLE: {why}" for name, (version, why) in found.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolver", default="unbound", help=f"{', '.join(RESOLVERS)}, comma-separated")
    parser.add_argument("--samples", type=int, default=60, help="queries per resolver and sink")
    parser.add_argument("--sink", default="local,url", help="local, url or both, comma-separated")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between one query's arrival and the next")
    parser.add_argument(
        "--jitter",
        type=float,
        default=1.0,
        help="up to this many seconds more, at random, added to each pause",
    )
    parser.add_argument(
        "--background",
        type=float,
        default=0,
        help="queries a second of other names asked meanwhile (a steady trickle, as a busy home network's)",
    )
    parser.add_argument("--collector", default="", help="extra options for collect-dnstap, e.g. '--batch-delay 1'")
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    args = parser.parse_args(argv)
    chosen = args.resolver.split(",")
    unknown = sorted(set(chosen) - set(RESOLVERS))
    if unknown:
        parser.error(f"no resolver {', '.join(unknown)}: choose among {', '.join(RESOLVERS)}")
    found = versions()
    missing = [f"{name}: {found[name]}" for name in chosen if found[name].startswith("UNAVAILABLE")]
    if missing:
        print("\n".join(missing))
        return 1
    options = args.collector.split()
    load_before = os.getloadavg()[0]
    rows = [
        (name, sink, run(name, sink, args.samples, (args.pause, args.jitter), args.background, options, args.keep))
        for name in chosen
        for sink in args.sink.split(",")
    ]
    print(
        f"\n{os.cpu_count()} cores, load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {args.samples} queries per resolver and sink, "
        f"one at a time, {args.pause:g} s + up to {args.jitter:g} s apart; "
        f"{args.background:g} other queries a second meanwhile; collector options: {args.collector or 'defaults'}\n"
    )
    for name in chosen:
        print(f"- {name}: {found[name]}")
    print("\n| resolver | sink | samples | median | p90 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    for name, sink, delays in rows:
        figures = " | ".join(f"{value:.2f} s" for value in summary(delays))
        print(f"| {name} | {sink} | {len(delays)} | {figures} |")
    return 0


def summary(delays: list[float]) -> tuple[float, float, float, float]:
    """Median, p90, p99 (nearest rank) and the largest."""
    ordered = sorted(delays)

    def rank(share):
        return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]

    return statistics.median(ordered), rank(0.90), rank(0.99), ordered[-1]


def connect(name: str, folder: Path):
    """The resolver, started on the socket of the collector start_collector started, once it
    has connected (Knot Resolver connects only when it starts: the collector goes first)."""
    socket_path = folder / "dnstap.sock"
    wait_for(socket_path.exists, "the collector's socket")
    unbound.let_connect(socket_path)
    resolver = RESOLVERS[name][0](folder, socket_path)
    try:
        wait_for(lambda: "A resolver connected" in (folder / "collector.log").read_text(), f"{name}'s connection")
    except RuntimeError:
        resolver.stop()
        raise
    return resolver


def trickle(resolver, name: str, rate: float, stop: threading.Event) -> None:
    """Other queries at `rate` a second, at random moments (a Poisson stream), until `stop`."""
    number = 0
    while not stop.wait(random.expovariate(rate)):
        number += 1
        try:
            resolver.ask(f"b{number}-{secrets.token_hex(4)}.{RESOLVERS[name][1]}", "A", timeout=2)
        except (OSError, dns.exception.DNSException):
            pass  # a background query lost changes nothing measured


def run(
    name: str, sink: str, samples: int, pause: tuple[float, float], background: float, options: list, keep: bool
) -> list[float]:
    folder = Path(tempfile.mkdtemp(prefix=f"q2v-{name}-{sink}-"))
    folder.chmod(0o755)
    database = folder / "analytics.db"
    key = secrets.token_hex(16)
    service = Server(str(database), key, 2, str(folder / "gunicorn.log"))
    if sink == "url":
        url = f"http://127.0.0.1:{service.port}"
        options = [*options, "--url", url, "--key", key, "--spool", str(folder / "spool")]
        # The collector's own store stays unused: its batches go to the service.
        database = folder / "unused.db"
    collector, log = start_collector(folder, "visible", options, str(database))
    resolver = None
    stop = threading.Event()
    try:
        resolver = connect(name, folder)
        if background:
            threading.Thread(target=trickle, args=(resolver, name, background, stop), daemon=True).start()
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
        delays = []
        for number in range(samples):
            question = f"v{number}-{secrets.token_hex(4)}.{RESOLVERS[name][1]}"
            resolver.ask(question, "A")
            answered = time.monotonic()
            path = "/v2/activity-log?" + urllib.parse.urlencode({"startTime": start, "question[]": question})
            while b'"question"' not in service.call("GET", path)[1]:
                if time.monotonic() - answered > GIVE_UP_SECONDS:
                    raise RuntimeError(f"{question} never reached the log; see {folder}")
                time.sleep(POLL_SECONDS)
            delays.append(time.monotonic() - answered)
            print(f"{name} {sink} {number + 1}/{samples}: {delays[-1]:.3f} s", flush=True)
            # A fixed pause would lock the queries to one phase of a resolver's flush timer
            # (libfstrm's ticks every second whatever arrives): the delay would be the same
            # fraction of a second every time instead of its spread.
            time.sleep(pause[0] + random.uniform(0, pause[1]))
        return delays
    finally:
        stop.set()
        if resolver is not None:
            resolver.stop()
        if collector.poll() is None:
            collector.send_signal(signal.SIGTERM)
            try:
                collector.wait(30)
            except subprocess.TimeoutExpired:
                collector.kill()
        log.close()
        service.stop()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {folder}")


if __name__ == "__main__":
    sys.exit(main())
