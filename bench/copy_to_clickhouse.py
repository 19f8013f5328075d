"""How long `flask --app wsgi copy-to-clickhouse` takes to move a SQLite store into chDB, and its
counts check (issue 45: "the copy command moves a 1M-record SQLite store into chDB with every
count equal").

The store is the benchmark's own traffic (bench/traffic.py: 30 days ending now) loaded by the
baseline loader (bench/raw.py), then counted and frozen as the service would (every record past
the hot horizon packed into blocks); the copy is the command as an operator runs it, in a process
of its own.

    .venv/bin/python bench/copy_to_clickhouse.py --records 1000000 [--dir DIR] [--keep]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import loads, report  # noqa: E402
from bench.traffic import Traffic  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the SQLite store (1,000,000)")
    parser.add_argument("--batch", type=int, default=500, help="records a batch of the generated traffic (500)")
    parser.add_argument("--seed", type=int, default=1, help="the traffic's seed (1)")
    parser.add_argument("--dir", help="the working folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the SQLite store and the chDB folder")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    workdir = args.dir or tempfile.mkdtemp(prefix="dns-copy-bench-")
    os.makedirs(workdir, exist_ok=True)
    store, folder = os.path.join(workdir, "store.db"), os.path.join(workdir, "clickhouse")
    traffic = Traffic(args.records, int(time.time() // 60 * 60_000), args.batch, args.seed)
    print(f"{args.records:,} records into {store} ...", flush=True)
    loaded = loads.load_raw(traffic, store, ROOT)
    print(f"  loaded at {loaded['rate']:,.0f} records/s; counting and freezing as the service does ...", flush=True)
    started = time.perf_counter()
    frozen, rows = _count_and_freeze(store)
    print(f"  {frozen:,} records frozen into blocks, {rows:,} left as rows ({time.perf_counter() - started:,.0f} s)")
    environment = {**os.environ, "ANALYTICS_DATABASE": store, "ANALYTICS_API_KEY": "bench-copy"}
    command = [os.path.join(os.path.dirname(sys.executable), "flask"), "--app", "wsgi", "copy-to-clickhouse"]
    started = time.perf_counter()
    done = subprocess.run([*command, f"chdb://{folder}"], cwd=ROOT, env=environment, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    print(done.stdout + done.stderr, flush=True)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)
    machine = report.machine()
    print(
        f"copy: {args.records:,} records in {seconds:,.1f} s ({args.records / seconds:,.0f} records/s, the command's "
        f"start and its counts check included); chDB folder {size / 1e6:,.1f} MB; exit status {done.returncode}\n"
        f"machine: {machine}; load average {os.getloadavg()[0]:.1f} (other processes share these cores)",
        flush=True,
    )
    if not args.keep and done.returncode == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    return done.returncode


def _count_and_freeze(store: str) -> tuple[int, int]:
    """Count the loaded records into the rollups and freeze those past the hot horizon, in a
    process of its own (the app's, on the store); (records frozen, records left as rows)."""
    script = (
        "from app import create_app\n"
        "from models.engine import database\n"
        "from models.statistics import counting\n"
        f"app = create_app({{'ANALYTICS_DATABASE': {store!r}, 'ANALYTICS_API_KEY': 'bench-copy'}})\n"
        "with app.app_context(), database.connection():\n"
        "    while counting.catch_up_aside():\n"
        "        pass\n"
        "    while counting.freeze_a_look(False):\n"
        "        pass\n"
        "    frozen = database.query('SELECT COALESCE(SUM(n), 0) FROM record_block').fetchone()[0]\n"
        "    rows = database.query('SELECT COUNT(*) FROM record').fetchone()[0]\n"
        "print(frozen, rows)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    frozen, rows = done.stdout.split()[-2:]
    return int(frozen), int(rows)


if __name__ == "__main__":
    sys.exit(main())
