"""The ClickHouse record store measured (issue 45, item 5; docs/clickhouse.md's plan, step 8), on
chDB beside a SQLite ANALYTICS_DATABASE:

1. the benchmark's traffic loaded through the store's own batch path (no HTTP), in a process of
   its own (chDB lets one process have a folder): the service's decoding of a batch
   (schemas.record_batch) and `records().store_records`, each timed apart from making the batch;
2. the bytes a record, by table and by column, once OPTIMIZE ... FINAL has merged every part;
3. every read of bench/probes.read_probes through gunicorn `-w 1` on that folder, and the CSV
   export;
4. POST /v2/ingest into chDB with one worker, then into SQLite with one worker, the same traffic.

    .venv/bin/python bench/clickhouse.py --records 1000000 [--ingest-records 1000000] [--out FILE]

A kept run (`--keep --dir DIR`) can be read again by later code without loading it again (steps
2 and 3 only): `--dir DIR --records N --reads-only END_MS`, END_MS the minute its load began (its
traffic's end: the newest record is in the minute before it).
"""

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import loads  # noqa: E402
import probes  # noqa: E402
import report  # noqa: E402
from server import ROOT, OtherLoad, Server  # noqa: E402
from traffic import Traffic  # noqa: E402

sys.path.insert(0, ROOT)

# What chDB writes to stderr when the process that had it exits.
_CHDB_EXIT = "Exception in global_context->shutdown(): The ShutdownTablesThreadPool is not initialized"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the store (1,000,000)")
    parser.add_argument(
        "--ingest-records", type=int, help="records POSTed to each engine (default: as --records, at most 1,000,000)"
    )
    parser.add_argument("--batch", type=int, default=5000, help="records a batch (5,000)")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per read (30)")
    parser.add_argument("--probe-budget", type=float, default=0, help="stop timing a read after this many seconds")
    parser.add_argument("--quick", action="store_true", help="smoke configuration: 3 calls per read, 1 warm-up")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", help="the working folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the stores")
    parser.add_argument("--out", help="also write the markdown to this file")
    parser.add_argument(
        "--reads-only",
        type=int,
        metavar="END_MS",
        help="time the reads and the export of the store a kept run left in --dir (its traffic ended at END_MS, "
        "the minute its load began): no load, no ingest",
    )
    parser.add_argument(
        "--load-only", nargs=4, metavar=("DATABASE", "FOLDER", "END_MS", "RECORDS"), help=argparse.SUPPRESS
    )
    parser.add_argument("--sizes-only", nargs=2, metavar=("DATABASE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.calls = min(args.calls, 3)
    args.warmup = 1 if args.quick else 3
    if args.ingest_records is None:
        args.ingest_records = min(args.records, 1_000_000)
    if args.reads_only is not None and not args.dir:
        parser.error("--reads-only reads the store a kept run left: give its --dir")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.load_only:
        database, folder, end_ms, records = args.load_only
        print(json.dumps(_load_here(Traffic(int(records), int(end_ms), args.batch, args.seed), database, folder)))
        return 0
    if args.sizes_only:
        print(json.dumps(_sizes_here(*args.sizes_only)))
        return 0
    workdir = args.dir or tempfile.mkdtemp(prefix="dns-clickhouse-bench-")
    os.makedirs(workdir, exist_ok=True)
    end_ms = args.reads_only or int(time.time() // 60 * 60_000)
    traffic = Traffic(args.records, end_ms, args.batch, args.seed)
    result = {"config": vars(args).copy(), "other_load": {}, "errors": [], "code": _code()}
    result["config"].pop("load_only")
    print(f"code: {result['code']}; working folder {workdir}", flush=True)

    database, folder = os.path.join(workdir, "served.db"), os.path.join(workdir, "clickhouse")
    if args.reads_only:
        print(f"the {args.records:,} records a kept run left in {folder}, weighed ...", flush=True)
        command = [sys.executable, __file__, "--sizes-only", database, folder]
    else:
        print(f"{args.records:,} records through the store's batch path into {folder} ...", flush=True)
        command = [sys.executable, __file__, "--batch", str(args.batch), "--seed", str(args.seed), "--load-only"]
        command += [database, folder, str(end_ms), str(args.records)]
    load = OtherLoad()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    result["other_load"]["weighing" if args.reads_only else "load through the store"] = load.cores()
    if done.returncode != 0:
        print(done.stdout[-3000:] + done.stderr[-5000:], flush=True)
        return 1
    result["load"] = json.loads(done.stdout.strip().splitlines()[-1])
    if not args.reads_only:
        print(f"  {_load_line(result['load'])}", flush=True)

    server = Server(
        database,
        secrets.token_urlsafe(24),
        1,
        os.path.join(workdir, "gunicorn-chdb.log"),
        env={"ANALYTICS_RECORD_STORE": f"chdb://{folder}"},
    )
    try:
        stored = probes.count_records(server, traffic)
        if stored != args.records:
            result["errors"].append(f"GET /v2/statistic/count says {stored}, expected {args.records:,}")
        _time_reads(args, traffic, server, result)
    finally:
        server.stop()
    result["errors"] += [f"gunicorn (chDB reads): {line}" for line in _log_findings(server.log_path)]

    result["ingest"] = {}
    ingest_traffic = Traffic(args.ingest_records, end_ms, args.batch, args.seed)
    for engine in ("chDB", "SQLite") if not args.reads_only else ():
        result["ingest"][engine] = _ingest(engine, ingest_traffic, workdir, result)

    result["machine"] = report.machine()
    markdown = render(result)
    print("\n" + markdown, flush=True)
    if args.out:
        with open(args.out, "w") as out:
            out.write(markdown)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if result["errors"] else 0


def _code() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "app", "models", "schemas"], cwd=ROOT, capture_output=True, text=True
    )
    return f"commit {head.stdout.strip()}" + (" with uncommitted changes" if dirty.stdout.strip() else "")


def _load_here(traffic, database: str, folder: str) -> dict:
    """In this process: every batch made as the JSON body a feed would send, decoded as
    POST /v2/ingest decodes it, stored as it stores it; then the parts merged and weighed."""
    import resource

    from app import create_app
    from models.engine import database as engine
    from models.stores import bound
    from schemas import record_batch

    app = create_app(
        {
            "ANALYTICS_DATABASE": database,
            "ANALYTICS_API_KEY": "bench-clickhouse",
            "ANALYTICS_RECORD_STORE": f"chdb://{folder}",
            "ANALYTICS_RETENTION_DAYS": 0,
        }
    )
    times = {"generate": 0.0, "decode": 0.0, "store": 0.0}
    progress = loads.Progress("store_records", traffic.records)
    done = 0
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    with app.app_context(), engine.connection():
        store = bound.records()
        for index in range(traffic.batches):
            t0 = time.perf_counter()
            body = traffic.batch_json(index)
            t1 = time.perf_counter()
            records = record_batch.records(record_batch.decode(body, False), int(time.time() * 1000))
            t2 = time.perf_counter()
            with engine.storing():
                done += store.store_records(records)
            t3 = time.perf_counter()
            times["generate"] += t1 - t0
            times["decode"] += t2 - t1
            times["store"] += t3 - t2
            progress.update(done)
        progress.update(done, force=True)
        after = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        sizes = _sizes(store.connection)
        sizes["optimize_seconds"] = time.perf_counter() - started
    return {
        "records": done,
        **{f"{name}_seconds": seconds for name, seconds in times.items()},
        "cpu_seconds": (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime),
        "sizes": sizes,
    }


def _sizes_here(database: str, folder: str) -> dict:
    """In this process: the kept store's sizes (`_sizes`), as a load reports them."""
    from app import create_app
    from models.engine import database as engine
    from models.stores import bound

    app = create_app(
        {
            "ANALYTICS_DATABASE": database,
            "ANALYTICS_API_KEY": "bench-clickhouse",
            "ANALYTICS_RECORD_STORE": f"chdb://{folder}",
        }
    )
    with app.app_context(), engine.connection():
        return {"records": None, "sizes": _sizes(bound.records().connection)}


def _sizes(connection) -> dict:
    """Bytes on disk by table once OPTIMIZE ... FINAL has merged each table's parts, and by
    column of the records (from a copy kept in wide parts: a small part is compact, one file
    for all its columns, and ClickHouse then keeps no column's size)."""
    db = connection.target.database
    tables = [
        name
        for (name,) in connection.rows(
            f"SELECT name FROM system.tables WHERE database = '{db}' AND engine LIKE '%MergeTree'"
        )
    ]
    for table in tables:
        connection.command(f"OPTIMIZE TABLE {db}.{table} FINAL")
    by_table = connection.rows(
        "SELECT table, sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes), "
        f"count() FROM system.parts WHERE database = '{db}' AND active GROUP BY table ORDER BY 3 DESC"
    )
    connection.command(f"CREATE TABLE {db}.bench_wide AS {db}.records")
    connection.command(
        f"ALTER TABLE {db}.bench_wide MODIFY SETTING min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"
    )
    connection.command(f"INSERT INTO {db}.bench_wide SELECT * FROM {db}.records")
    connection.command(f"OPTIMIZE TABLE {db}.bench_wide FINAL")
    by_column = connection.rows(
        "SELECT column, any(type), sum(column_data_compressed_bytes), sum(column_data_uncompressed_bytes) "
        f"FROM system.parts_columns WHERE database = '{db}' AND table = 'bench_wide' AND active "
        "GROUP BY column ORDER BY 3 DESC"
    )
    codecs = dict(
        connection.rows(
            f"SELECT name, compression_codec FROM system.columns WHERE database = '{db}' AND table = 'records'"
        )
    )
    connection.command(f"DROP TABLE {db}.bench_wide SYNC")
    return {
        "tables": [list(row) for row in by_table],
        "columns": [[*row, codecs.get(row[0], "")] for row in by_column],
    }


def _time_reads(args, traffic, server, result):
    print(
        f"read latency, gunicorn -w 1 on chDB: {args.calls} timed calls each after {args.warmup} warm-up ...",
        flush=True,
    )
    result["probes"] = []
    load = OtherLoad(server)
    for probe in probes.read_probes(traffic):
        probes.run_probe(server, probe, args.calls, args.warmup, args.probe_budget or None)
        result["errors"] += probe.errors
        result["probes"].append(probe)
        print(
            f"  {probe.label}: p50 {report._ms(probe.p50)} ms, p99 {report._ms(probe.p99)} ms "
            f"(target {probe.target_ms:g})",
            flush=True,
        )
    result["other_load"]["read latency"] = load.cores()
    print("CSV export ...", flush=True)
    load = OtherLoad(server)
    csv = result["csv"] = probes.csv_export(server, traffic)
    result["other_load"]["CSV export"] = load.cores()
    if csv["status"] != 200:
        result["errors"].append(f"GET /v2/activity-log/csv: status {csv['status']}")
    print(f"  {csv['rows']:,} rows at {csv['rate']:,.0f} rows/s", flush=True)


def _ingest(engine: str, traffic, workdir: str, result: dict) -> dict:
    """POST /v2/ingest from one sender to gunicorn -w 1 on a new store of `engine`."""
    database = os.path.join(workdir, f"ingest-{engine.lower()}.db")
    env = {"ANALYTICS_RECORD_STORE": f"chdb://{os.path.join(workdir, 'ingest-clickhouse')}"} if engine == "chDB" else {}
    log = os.path.join(workdir, f"gunicorn-ingest-{engine.lower()}.log")
    server = Server(database, secrets.token_urlsafe(24), 1, log, env=env)
    print(f"POST /v2/ingest, {traffic.records:,} records, gunicorn -w 1 on {engine} ...", flush=True)
    try:
        load = OtherLoad(server)
        # The SQL store counts its records into the rollups behind the requests: waited for.
        http = loads.load_http(traffic, server, 1, database if engine == "SQLite" else None)
        result["other_load"][f"HTTP ingest, {engine}"] = load.cores()
        stored = probes.count_records(server, traffic)
        if stored != traffic.records:
            http["errors"].append(f"{engine}: GET /v2/statistic/count says {stored}, expected {traffic.records:,}")
    finally:
        server.stop()
    result["errors"] += http["errors"] + [f"gunicorn ({engine} ingest): {line}" for line in _log_findings(log)]
    cpu = sum(http["worker_cpu"].values())
    print(
        f"  {http['rate']:,.0f} records/s; service CPU {cpu / max(1, http['records']) * 1e6:,.1f} us a record",
        flush=True,
    )
    return http


def _load_line(load: dict) -> str:
    n = load["records"]
    return (
        f"{n / load['store_seconds']:,.0f} records/s stored ({load['store_seconds']:,.1f} s); "
        f"{n / (load['decode_seconds'] + load['store_seconds']):,.0f}/s decoded and stored; "
        f"making the batches {n / load['generate_seconds']:,.0f}/s; all three {n / _all_seconds(load):,.0f}/s"
    )


def _all_seconds(load: dict) -> float:
    return load["generate_seconds"] + load["decode_seconds"] + load["store_seconds"]


def _log_findings(path: str) -> list[str]:
    """The gunicorn log's findings but chDB's own line as its process exits (every request has
    been answered by then; it says nothing of them)."""
    return [line for line in probes.gunicorn_log_findings(path) if _CHDB_EXIT not in line]


def render(result: dict) -> str:
    config, box, load = result["config"], result["machine"], result["load"]
    n = load["records"] or config["records"]
    others = ", ".join(f"{cores:.2f} cores during the {phase}" for phase, cores in result["other_load"].items())
    lines = [
        f"Run {box['date']}: **{n:,} records** (seed {config['seed']}, 30 days), batches of {config['batch']:,}, "
        f"{config['calls']} timed calls per read after {config['warmup']} warm-up; code: {result['code']}.",
        "",
        f"Machine: {box['cores']} cores ({box['cpu']}), {box['memory_gib']:.1f} GiB RAM, Linux {box['kernel']}, "
        f"Python {box['python']}, SQLite {box['sqlite']}.",
        "",
        f"Other processes on the machine kept busy, on average: {others}.",
        "",
        "| measurement | figure | target | verdict |",
        "|---|---|---|---|",
    ]
    if "store_seconds" in load:  # (a run of --reads-only loads nothing, and ingests nothing)
        decoded = load["decode_seconds"] + load["store_seconds"]
        lines.append(
            f"| load through the store's batch path (`store_records`, no HTTP) | "
            f"{n / load['store_seconds']:,.0f} records/s stored ({load['store_seconds']:,.1f} s); "
            f"{n / decoded:,.0f}/s with "
            f"decoding; {n / _all_seconds(load):,.0f}/s with making the batches too | - | - |"
        )
    ingest = result["ingest"]
    for engine, http in ingest.items():
        cpu = sum(http["worker_cpu"].values()) / max(1, http["records"]) * 1e6
        lines.append(
            f"| HTTP ingest, gunicorn -w 1, {engine}: POST /v2/ingest, {http['records']:,} records | "
            f"{http['rate']:,.0f} records/s ({cpu:,.0f} us of service CPU a record; POST p50 "
            f"{http['request_p50'] * 1000:,.0f} ms) | - | - |"
        )
    if ingest:
        chdb, sqlite = ingest["chDB"], ingest["SQLite"]
        ratio = chdb["rate"] / sqlite["rate"] if sqlite["rate"] else None
        lines.append(f"| HTTP ingest chDB / SQLite | {ratio:.2f} | >= 1.00 | {report._at_least(ratio, 1.0, '', 2)} |")
    csv = result["csv"]
    lines.append(
        f"| CSV export: GET /v2/activity-log/csv, {csv['rows']:,} rows ({csv['days']} d) | {csv['rate']:,.0f} rows/s "
        f"({csv['bytes'] / 2**20:,.0f} MiB in {csv['seconds']:,.1f} s) | >= 300,000 rows/s | "
        f"{report._at_least(csv['rate'], 300_000, ' rows/s')} |"
    )
    disk = sum(row[2] for row in load["sizes"]["tables"])
    lines.append(
        f"| bytes a record on disk, every table (after OPTIMIZE ... FINAL) | {disk / n:,.1f} B "
        f"({disk / 2**20:,.1f} MiB) | <= 25 B | {report._at_most(disk / n, 25, ' B', 1)} |"
    )
    lines += [
        "",
        "| read (gunicorn -w 1 on chDB) | p50 | p99 | calls | target p50 | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for probe in result["probes"]:
        lines.append(
            f"| {probe.label} | {report._ms(probe.p50)} | {report._ms(probe.p99)} | {len(probe.samples)} | "
            f"<= {probe.target_ms:g} | {report._at_most(probe.p50, probe.target_ms, ' ms')} |"
        )
    lines += [
        "",
        "| table | rows | parts | bytes on disk | a record | compressed | uncompressed |",
        "|---|---|---|---|---|---|---|",
    ]
    for table, rows, on_disk, compressed, uncompressed, parts in load["sizes"]["tables"]:
        lines.append(
            f"| `{table}` | {int(rows):,} | {int(parts)} | {int(on_disk):,} | {int(on_disk) / n:,.2f} | "
            f"{int(compressed):,} | {int(uncompressed):,} |"
        )
    lines += [
        "",
        "| column of `records` (wide parts) | type | codec | compressed B a record | uncompressed B a record |",
        "|---|---|---|---|---|",
    ]
    for column, kind, compressed, uncompressed, codec in load["sizes"]["columns"]:
        lines.append(
            f"| `{column}` | {kind} | {codec or '-'} | {int(compressed) / n:,.2f} | {int(uncompressed) / n:,.2f} |"
        )
    lines += [
        "",
        "Errors: " + ("; ".join(result["errors"]) if result["errors"] else "none: every request answered as expected."),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
