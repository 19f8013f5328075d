"""Benchmark: load synthetic traffic over HTTP and raw, time the API, write BENCHMARKS.md."""

import argparse
import json
import os
import secrets
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from contextlib import contextmanager

import codecopy
import loads
import probes
import report
from server import ROOT, OtherLoad, Server
from traffic import Traffic


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records to load (default 1,000,000)")
    parser.add_argument("--large", action="store_true", help="load 10,000,000 records")
    parser.add_argument("--batch", type=int, default=5000, help="records per POST and per raw transaction")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--senders", type=int, help="parallel ingest senders (default: one per worker)")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per read operation")
    parser.add_argument("--probe-budget", type=float, default=0, help="stop timing a read after this many seconds")
    parser.add_argument("--quick", action="store_true", help="smoke configuration: 3 calls per read, 1 warm-up")
    parser.add_argument(
        "--no-housekeeping",
        action="store_true",
        help="time the reads on the freshly loaded database, without the planner statistics (ANALYZE) "
        "that the service's hourly housekeeping gathers",
    )
    parser.add_argument("--commit", help="measure this commit's code (git archive) instead of the working tree")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"), help="markdown file to write")
    parser.add_argument("--dir", help="directory for the databases (default: a temporary one, removed after)")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the databases, and the gunicorn log (served-before-writes.db: as the reads saw it)",
    )
    args = parser.parse_args(argv)
    if args.large:
        args.records = 10_000_000
    if args.quick:
        args.calls = min(args.calls, 3)
    args.warmup = 1 if args.quick else 3
    args.senders = args.senders or args.workers
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    # A stop (kill PID) unwinds like an error, so that gunicorn is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    workdir = args.dir or tempfile.mkdtemp(prefix="dns-bench-")
    os.makedirs(workdir, exist_ok=True)
    # 30 days of records ending now, so that the default windows (endTime = now) see them.
    traffic = Traffic(args.records, int(time.time() // 60 * 60_000), args.batch, args.seed)
    print(f"{args.records:,} records in {traffic.batches:,} batches; databases in {workdir}", flush=True)
    code_dir = os.path.join(workdir, "code")
    result = {"config": _config(args), "code": codecopy.snapshot(code_dir, args.commit), "other_load": {}, "errors": []}
    print(f"code: {result['code']}", flush=True)
    result["generator_rate"] = _generator_rate(traffic, 2 if args.quick else 10)

    raw_path, http_path = os.path.join(workdir, "raw.db"), os.path.join(workdir, "served.db")
    _load_raw(args, traffic, raw_path, code_dir, result)
    server = Server(http_path, secrets.token_urlsafe(24), args.workers, os.path.join(workdir, "gunicorn.log"), code_dir)
    try:
        _load_http(args, traffic, server, http_path, result)
        _time_reads(args, traffic, server, http_path, result)
        if args.keep:  # as the reads saw it: the deletions take the clients they time away
            _copy_database(http_path, os.path.join(workdir, "served-before-writes.db"))
        _time_writes(args, traffic, server, result)
    finally:
        server.stop()
    result["machine"] = report.machine()
    result["log_findings"] = probes.gunicorn_log_findings(server.log_path)

    markdown = report.render(result)
    report.write(args.out, markdown)
    print("\n" + markdown, flush=True)
    failed = bool(result["errors"] or result["log_findings"])
    if not args.keep:
        _remove_database(http_path)
        shutil.rmtree(code_dir, ignore_errors=True)
        if not args.dir and not failed:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"wrote {args.out} in {time.perf_counter() - began:,.0f} s", flush=True)
    if failed:
        print(f"errors during the run: see above and the gunicorn log {server.log_path}", flush=True)
    return 1 if failed else 0


def _config(args) -> dict:
    names = ("records", "batch", "workers", "senders", "calls", "warmup", "seed", "quick")
    return {name: getattr(args, name) for name in names}


def _generator_rate(traffic, batches: int) -> float:
    """Records per second the load generator makes as JSON bodies (it shares the CPU with the
    server during the HTTP load). The bodies are put together from pre-encoded pieces, so check
    first that they are the very records the raw load stores."""
    assert json.loads(traffic.batch_json(0)) == traffic.batch(0), "batch_json and batch disagree"
    batches = min(traffic.batches, batches)
    started = time.perf_counter()
    for index in range(batches):
        traffic.batch_json(index)
    return min(traffic.records, batches * traffic.batch_size) / (time.perf_counter() - started)


@contextmanager
def _phase(result: dict, name: str, server=None):
    """Note how busy other processes kept the machine during a phase."""
    load = OtherLoad(server)
    yield
    result["other_load"][name] = load.cores()


def _load_raw(args, traffic, path: str, code_dir: str, result: dict):
    print("raw sqlite3.executemany into the project's schema ...", flush=True)
    with _phase(result, "raw load"):
        raw = loads.load_raw(traffic, path, code_dir)
    raw["bytes"] = loads.checkpoint(path)
    print(f"  raw: {raw['rate']:,.0f} records/s, {raw['bytes'] / args.records:,.0f} bytes/record", flush=True)
    if not args.keep:
        _remove_database(path)
    result["raw"] = raw


def _load_http(args, traffic, server, path: str, result: dict):
    print(f"POST /v2/ingest to gunicorn on port {server.port} from {args.senders} senders ...", flush=True)
    with _phase(result, "HTTP ingest", server), loads.largest_wal(path) as wal:
        http = loads.load_http(traffic, server, args.senders, path)
    http["largest_wal"] = wal["bytes"]
    result["errors"] += http["errors"]
    print(f"  HTTP: {http['rate']:,.0f} records/s = {http['rate'] / result['raw']['rate']:.2f} x raw", flush=True)
    # CPU varies less between runs than the rates on a shared machine: a change's effect shows here first.
    per_record = [seconds / max(1, http["records"]) * 1e6 for seconds in http["worker_cpu"].values()]
    print(
        f"  service CPU {sum(per_record):,.1f} us a record (by process: "
        + ", ".join(f"{us:.1f}" for us in sorted(per_record, reverse=True))
        + f"); POST p50 {http['request_p50'] * 1000:,.1f} ms",
        flush=True,
    )
    stored = probes.count_records(server, traffic)
    if stored != args.records:
        result["errors"].append(f"GET /v2/statistic/count over every record says {stored}, expected {args.records:,}")
    http["frozen_after"] = loads.frozen_lag(path)
    if http["frozen_after"] is None:
        result["errors"].append("the service had not frozen every record past the hot horizon 600 s after the load")
    else:
        print(f"  every record past the hot horizon frozen {http['frozen_after']:,.1f} s after the load", flush=True)
    http["bytes"] = loads.checkpoint(path)
    print(f"  {http['bytes'] / args.records:,.0f} bytes/record; storage breakdown (dbstat) ...", flush=True)
    result["http"] = http
    result["breakdown"] = loads.storage_breakdown(path)
    result["rollups"] = loads.rollup_rows(path)


def _time_reads(args, traffic, server, path: str, result: dict):
    result["housekeeping"] = None
    if not args.no_housekeeping:
        print("housekeeping (planner statistics) ...", flush=True)
        upkeep = result["housekeeping"] = probes.housekeeping(server)
        if upkeep["error"]:
            result["errors"].append(upkeep["error"])
        print(f"  {upkeep['seconds']:,.1f} s: {upkeep['method']}", flush=True)
    result["analyzed"] = probes.planner_statistics(path)
    print(f"read latency: {args.calls} timed calls each after {args.warmup} warm-up ...", flush=True)
    result["probes"] = []
    with _phase(result, "read latency", server):
        for probe in probes.read_probes(traffic):
            probes.run_probe(server, probe, args.calls, args.warmup, args.probe_budget or None)
            result["errors"] += probe.errors
            result["probes"].append(probe)
            print(f"  {probe.label}: p50 {_ms(probe.p50)} ms, p99 {_ms(probe.p99)} ms (target {probe.target_ms:g})")
    print("CSV export ...", flush=True)
    with _phase(result, "CSV export", server):
        csv = result["csv"] = probes.csv_export(server, traffic)
    if csv["status"] != 200:
        result["errors"].append(f"GET /v2/activity-log/csv: status {csv['status']}")
    print(f"  {csv['rows']:,} rows at {csv['rate']:,.0f} rows/s, peak RSS {csv['rss_peak_kib'] / 1024:,.0f} MiB")


def _time_writes(args, traffic, server, result: dict):
    """Deleting median clients and the busiest one, then retention of a day (they change the
    data, so they come last)."""
    print("DELETE /v2/client and retention ...", flush=True)
    by_weight = sorted(range(len(traffic.clients)), key=traffic.client_weights.__getitem__)
    middle = len(by_weight) // 2
    picks = by_weight[middle : middle + (1 if args.quick else 3)]
    result["deletes"] = [probes.delete_client(server, traffic, traffic.clients[i][0]) for i in picks]
    result["heaviest"] = [probes.delete_client(server, traffic, traffic.clients[by_weight[-1]][0])]
    result["errors"] += [entry["error"] for entry in result["deletes"] + result["heaviest"] if entry["error"]]
    retention = result["retention"] = probes.retention(server, traffic)
    if retention["error"]:
        result["errors"].append(retention["error"])
    print(f"  retention: {retention['seconds']:,.1f} s for {retention['deleted']} records ({retention['method']})")


def _copy_database(path: str, copy: str):
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)


def _remove_database(path: str):
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


if __name__ == "__main__":
    sys.exit(main())
