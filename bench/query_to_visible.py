"""How long a query takes to reach the activity log: a real Unbound sends its dnstap to the
collector (`dns-analytics-feed collect-dnstap`), which stores it in the service's SQLite
database (the local sink) or pushes it to the service's POST /v2/ingest (`--url`); real
gunicorn serves GET /v2/activity-log. One query at a time: its answer, then the log polled
(every 10 ms) until the query is in it; prints the median, p90, p99 and the largest delay.

.venv/bin/python bench/query_to_visible.py [--samples 60] [--sink local,url] [--pause 0.3]

Needs Debian's unbound (scripts/ensure-unbound installs it).
"""

import argparse
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from resolver_load import connect_unbound, start_collector
from server import ROOT, Server

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support import unbound  # noqa: E402 - the tests' harness runs Debian's Unbound the same way

POLL_SECONDS = 0.01
GIVE_UP_SECONDS = 30.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=60, help="queries per sink")
    parser.add_argument("--sink", default="local,url", help="local, url or both, comma-separated")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between one query's arrival and the next")
    parser.add_argument("--collector", default="", help="extra options for collect-dnstap, e.g. '--batch-delay 1'")
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    args = parser.parse_args(argv)
    unbound.probe()
    if unbound.UNAVAILABLE:
        print(unbound.UNAVAILABLE)
        return 1
    options = args.collector.split()
    rows = [(sink, run(sink, args.samples, args.pause, options, args.keep)) for sink in args.sink.split(",")]
    print(
        f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; Unbound {unbound.VERSION} (1 thread); "
        f"{args.samples} queries per sink, one at a time, {args.pause:g} s apart; "
        f"collector options: {args.collector or 'defaults'}\n"
    )
    print("| sink | samples | median | p90 | p99 | max |")
    print("|---|---|---|---|---|---|")
    for sink, delays in rows:
        print(f"| {sink} | {len(delays)} | " + " | ".join(f"{value:.2f} s" for value in summary(delays)) + " |")
    return 0


def summary(delays: list[float]) -> tuple[float, float, float, float]:
    """Median, p90, p99 (nearest rank) and the largest."""
    ordered = sorted(delays)

    def rank(share):
        return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]

    return statistics.median(ordered), rank(0.90), rank(0.99), ordered[-1]


def run(sink: str, samples: int, pause: float, options: list, keep: bool) -> list[float]:
    folder = Path(tempfile.mkdtemp(prefix=f"query-to-visible-{sink}-"))
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
    try:
        resolver = connect_unbound(folder)
        start = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
        delays = []
        for number in range(samples):
            name = f"v{number}-{secrets.token_hex(4)}.home.test"  # NXDOMAIN in the harness's static zone
            resolver.ask(name, "A")
            answered = time.monotonic()
            path = "/v2/activity-log?" + urllib.parse.urlencode({"startTime": start, "question[]": name})
            while b'"question"' not in service.call("GET", path)[1]:
                if time.monotonic() - answered > GIVE_UP_SECONDS:
                    raise RuntimeError(f"{name} never reached the log; see {folder}")
                time.sleep(POLL_SECONDS)
            delays.append(time.monotonic() - answered)
            print(f"{sink} {number + 1}/{samples}: {delays[-1]:.3f} s", flush=True)
            time.sleep(pause)
        return delays
    finally:
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
