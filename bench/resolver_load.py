"""A real Unbound answering dnsperf's load on loopback, its dnstap going to the collector
(`dns-analytics-feed collect-dnstap`) with the default local SQLite store, all on this machine:
prints, per rate, the queries dnsperf had answered, the records stored, the loss, and the
collector's CPU per stored record. With --record-store chdb, the records go to chDB in a folder
beside that SQLite database (ANALYTICS_RECORD_STORE, docs/clickhouse.md).

.venv/bin/python bench/resolver_load.py [--rates 1000,3000,6000,10000,20000] [--seconds 30] [--code COMMIT,...]
    [--record-store chdb]

With --code, each rate runs once per commit's collector (a frozen copy of its code, run with this
checkout's packages), the commits in turn: two versions side by side on a shared machine.

Needs Debian's unbound and dnsperf (scripts/ensure-unbound and scripts/ensure-dnsperf install them).
"""

import argparse
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import codecopy
from server import ROOT, children, cpu_seconds, machine_busy_seconds

sys.path.insert(0, os.path.join(ROOT, "tests"))
from support import unbound  # noqa: E402 - the tests' harness runs Debian's Unbound the same way

FEED = os.path.join(os.path.dirname(sys.executable), "dns-analytics-feed")
# What the load asks: names of the tests' local zones (answers, a block, NXDOMAIN, TXT).
QUERIES = ["a.home.test A", "b.home.test AAAA", "c.home.test TXT", "blocked.test A", "x.ads.test A"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,3000,6000,10000,20000", help="queries a second, comma-separated")
    parser.add_argument("--seconds", type=float, default=30, help="length of each load")
    parser.add_argument("--collector", default="", help="extra options for collect-dnstap, e.g. '--batch-size 5000'")
    parser.add_argument(
        "--kill-after",
        type=float,
        default=None,
        help="SIGKILL the collector and its store process this many seconds after the load ends "
        "(instead of stopping it with SIGTERM once stored): what a kill loses",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    parser.add_argument(
        "--code",
        default="",
        help="comma-separated commits whose collectors run in turn at each rate ('.' the working tree); "
        "default: this checkout's installed collector",
    )
    parser.add_argument("--rounds", type=int, default=1, help="how many times each rate (and commit) runs")
    parser.add_argument(
        "--record-store", choices=("sqlite", "chdb"), default="sqlite", help="where the records go (sqlite)"
    )
    args = parser.parse_args(argv)
    unbound.probe()
    if unbound.UNAVAILABLE or not shutil.which("dnsperf"):
        print(unbound.UNAVAILABLE or "dnsperf is missing (scripts/ensure-dnsperf installs it)")
        return 1
    workdir = tempfile.mkdtemp(prefix="resolver-load-code-")
    codes = [_code(commit, workdir) for commit in args.code.split(",")] if args.code else [(None, "installed")]
    rows = []
    try:
        for rate in args.rates.split(","):
            for _ in range(args.rounds):
                for code, origin in codes:  # in turns, so that the machine's moods fall on each alike
                    options = args.collector.split()
                    row = run(int(rate), args.seconds, options, args.keep, args.kill_after, code, args.record_store)
                    rows.append({**row, "code": origin})
                    print(line(row | {"code": origin}), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ending = "SIGTERM once stored" if args.kill_after is None else f"SIGKILL {args.kill_after:g} s after the load"
    print(
        f"\n{os.cpu_count()} cores; Unbound {unbound.VERSION} (1 thread); {args.seconds:g} s per rate; "
        f"collector options: {args.collector or 'defaults'}; collector stopped by {ending}; "
        f"records in {args.record_store}\n"
    )
    columns = "rate (q/s)|code|answered|stored|lost|loss|collector CPU|µs CPU / record|machine busy|said"
    print("| " + " | ".join(columns.split("|")) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(line(row))
    return 0


def line(row: dict) -> str:
    return (
        "| {rate:,} | {code} | {answered:,} | {stored:,} | {lost:,} | {loss:.2%} | {cpu:.1f} s | {per:.0f} "
        "| {busy:.2f} cores | {said} |"
    ).format(**row)


def _code(commit: str, workdir: str) -> tuple[str, str]:
    """A frozen copy of `commit`'s code ('.' the working tree) to run the collector from; (its
    folder, what it is)."""
    folder = os.path.join(workdir, commit.replace("/", "_"))
    origin = codecopy.snapshot(folder, None if commit == "." else commit)
    return folder, origin.split(" (content")[0]


def run(
    rate: int,
    seconds: float,
    options: list,
    keep: bool,
    kill_after: float | None = None,
    code: str | None = None,
    record_store: str = "sqlite",
) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"resolver-load-{rate}-"))
    folder.chmod(0o755)
    database = folder / "analytics.db"
    chdb = folder / "clickhouse" if record_store == "chdb" else None
    (folder / "queries.txt").write_text("\n".join(QUERIES) + "\n")
    collector, log = start_collector(folder, "load", options, str(database), code, chdb)
    resolver = None
    try:
        resolver = connect_unbound(folder)
        cpu_before, busy_before, started = collector_cpu(collector.pid), machine_busy_seconds(), time.monotonic()
        perf = subprocess.run(
            [
                "dnsperf",
                "-s",
                "127.0.0.1",
                "-p",
                str(resolver.port),
                "-d",
                str(folder / "queries.txt"),
                "-Q",
                str(rate),
                "-l",
                str(seconds),
                "-c",
                "10",
                "-q",
                "1000",
            ],
            capture_output=True,
            text=True,
        )
        answered = int(re.search(r"Queries completed:\s+(\d+)", perf.stdout).group(1))
        if kill_after is not None:
            time.sleep(kill_after)
            cpu = collector_cpu(collector.pid) - cpu_before
            for pid in [*children(collector.pid), collector.pid]:  # as systemd kills a unit's group
                os.kill(pid, signal.SIGKILL)
            collector.wait(60)
        else:
            settle(database, chdb is not None)
            cpu = collector_cpu(collector.pid) - cpu_before
        busy = (machine_busy_seconds() - busy_before) / (time.monotonic() - started)
        if kill_after is None:
            collector.send_signal(signal.SIGTERM)
            collector.wait(60)
        stored = count(database) if chdb is None else count_chdb(chdb)
        said = (
            "; ".join(
                line
                for line in (folder / "collector.log").read_text().splitlines()
                if "drop" in line or "NOT delivered" in line or line.startswith("LOST")
            )
            or "-"
        )
        return {
            "rate": rate,
            "answered": answered,
            "stored": stored,
            "lost": answered - stored,
            "loss": (answered - stored) / answered if answered else 0,
            "cpu": cpu,
            "per": cpu * 1e6 / stored if stored else 0,
            "busy": busy,
            "said": said[:200],
        }
    finally:
        if resolver is not None:
            resolver.stop()
        if collector.poll() is None:
            collector.kill()
        log.close()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {folder}")


def start_collector(
    folder: Path, endpoint: str, options: list, database: str, code: str | None = None, chdb: Path | None = None
):
    """`dns-analytics-feed collect-dnstap` on `folder`/dnstap.sock (`python -m feeds` from the
    copy of the code in `code`, if given), its output in `folder`/collector.log, the records in
    `database` or the chDB folder `chdb`; (the process, the log's handle)."""
    env = {**os.environ, "ANALYTICS_DATABASE": database, "ANALYTICS_RETENTION_DAYS": "0"}
    if chdb is not None:
        env["ANALYTICS_RECORD_STORE"] = f"chdb://{chdb}"
    program = [FEED]
    if code is not None:
        # The copy first on the path, in the store's spawned process too.
        env["PYTHONPATH"] = code
        program = [sys.executable, "-m", "feeds"]
    log = open(folder / "collector.log", "wb")
    collector = subprocess.Popen(
        [*program, "collect-dnstap", "--socket", str(folder / "dnstap.sock"), "--endpoint", endpoint, *options],
        cwd=code or ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return collector, log


def connect_unbound(folder: Path) -> unbound.Unbound:
    """A real Unbound sending its dnstap to the collector start_collector started, once connected."""
    socket_path = folder / "dnstap.sock"
    wait_for(socket_path.exists, "the collector's socket")
    unbound.let_connect(socket_path)
    resolver = unbound.Unbound(folder, socket_path=socket_path)
    wait_for(lambda: "A resolver connected" in (folder / "collector.log").read_text(), "Unbound's connection")
    return resolver


def collector_cpu(pid: int) -> float:
    """CPU seconds of the collector and its processes (the store's writer)."""
    return sum(cpu_seconds(process) for process in [pid, *children(pid)])


def count(database, numbered: bool = False) -> int:
    """The records in the SQLite store `database`; `numbered`: those numbered for a ClickHouse
    store (its counter there moves as each batch commits: models/clickhouse/numbers.py)."""
    sql = (
        "SELECT value FROM store_setting WHERE name = 'clickhouse_numbered_through'"
        if numbered
        else "SELECT COUNT(*) FROM record"
    )
    try:
        with sqlite3.connect(database) as conn:
            row = conn.execute(sql).fetchone()
            return int(row[0]) if row else 0
    except sqlite3.Error:
        return 0


def count_chdb(folder: Path) -> int:
    """The records in the chDB folder, counted in a process of its own (chDB opens one folder a
    process, and the collector has let it go)."""
    program = (
        "import sys; from chdb import session; "
        "print(session.Session(sys.argv[1]).query('SELECT count() FROM analytics.records', 'CSV').bytes().decode())"
    )
    done = subprocess.run([sys.executable, "-c", program, str(folder)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[0])


def settle(database, numbered: bool = False, quiet: float = 3.0) -> int:
    """The stored count once it has not grown for `quiet` seconds."""
    last, since = -1, time.monotonic()
    while True:
        now = count(database, numbered)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
        time.sleep(0.5)


def wait_for(condition, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
