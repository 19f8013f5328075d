"""The figures as markdown (the machine, each figure against its target) and BENCHMARKS.md."""

import os
import platform
import sqlite3
from datetime import UTC, datetime

START = "<!-- bench:start - written by bench/run.py; text outside these marks is kept -->"
END = "<!-- bench:end -->"
HEADER = """# Benchmarks

Figures from `bench/run.py` (see [docs/benchmarking.md](docs/benchmarking.md)); the targets are the ones for
10M records on a 2-core machine. Re-running the benchmark replaces the generated part below and
keeps the notes around it.

"""


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    except OSError:
        pass
    memory = 0
    try:
        with open("/proc/meminfo") as meminfo:
            memory = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "memory_gib": memory / 2**30,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _at_most(value, target, unit: str, digits: int = 0) -> str:
    if value is None:
        return "no figure"
    if value <= target:
        return "met"
    return f"**missed** by {value - target:,.{digits}f}{unit} ({value / target:.2f}x the target)"


def _at_least(value, target, unit: str, digits: int = 0) -> str:
    if value is None:
        return "no figure"
    if value >= target:
        return "met"
    return f"**missed** by {target - value:,.{digits}f}{unit} ({value / target:.0%} of the target)"


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render(result: dict) -> str:
    config, box, raw, http, csv = result["config"], result["machine"], result["raw"], result["http"], result["csv"]
    n = config["records"]
    ratio = http["rate"] / raw["rate"] if raw["rate"] else None
    # Issue 24's bounds, every index and rollup included: the fixed tables weigh more per record
    # in a smaller database.
    most_bytes = 100 if n >= 10_000_000 else 120
    lines = [
        f"Run {box['date']}: **{n:,} records** (seed {config['seed']}), batches of {config['batch']:,}, "
        f"{config['workers']} gunicorn workers (gthread), {config['senders']} sender threads, "
        f"{config['calls']} timed calls per read after {config['warmup']} warm-up"
        + (" (quick smoke configuration)" if config["quick"] else "")
        + ".",
        "",
        f"Machine: {box['cores']} cores ({box['cpu']}), {box['memory_gib']:.1f} GiB RAM, Linux {box['kernel']}, "
        f"Python {box['python']}, SQLite {box['sqlite']}.",
        "",
        f"Code measured (copied at the start of the run): {result['code']}.",
        "",
        "Other processes on the machine kept busy, on average: "
        + ", ".join(f"{cores:.2f} cores during the {phase}" for phase, cores in result["other_load"].items())
        + " (figures from a shared machine are only as good as it was quiet).",
        "",
        "### Throughput and size",
        "",
        "| measurement | figure | target | verdict |",
        "|---|---|---|---|",
        f"| HTTP ingest: POST /v2/ingest | {http['rate']:,.0f} records/s ({http['records']:,} in "
        f"{http['seconds']:,.0f} s) | - | - |",
        f"| raw sqlite3.executemany, same schema and indexes | {raw['rate']:,.0f} records/s "
        f"(conversion + insert; {raw['rate_with_generation']:,.0f}/s with generation) | - | - |",
        f"| HTTP ingest / raw executemany | {ratio:.2f} | >= 0.50 | {_at_least(ratio, 0.5, '', 2)} |",
        f"| CSV export: GET /v2/activity-log/csv, {csv['rows']:,} rows ({csv['days']} d) | "
        f"{csv['rate']:,.0f} rows/s ({csv['bytes'] / 2**20:,.0f} MiB in {csv['seconds']:,.1f} s) | "
        f">= 100,000 rows/s | {_at_least(csv['rate'], 100_000, ' rows/s')} |",
        f"| CSV export memory: serving worker's RSS | peak {csv['rss_peak_kib'] / 1024:,.0f} MiB "
        f"(before {csv['rss_before_kib'] / 1024:,.0f} MiB); {'flat' if csv['flat'] else 'GROWING'} | flat | "
        f"{'met' if csv['flat'] else '**missed**'} |",
        f"| database bytes per record (served database, after checkpoint) | {http['bytes'] / n:,.0f} B "
        f"({http['bytes'] / 2**20:,.0f} MiB) | <= {most_bytes} B | {_at_most(http['bytes'] / n, most_bytes, ' B')} |",
        f"| database bytes per record (raw load, same schema) | {raw['bytes'] / n:,.0f} B | - | - |",
        f"| largest write-ahead log during the HTTP load | {http.get('largest_wal', 0) / 2**20:,.0f} MiB | "
        f"<= 256 MiB | {_at_most(http.get('largest_wal', 0) / 2**20, 256, ' MiB')} |",
        "",
        "### Read latency (warm, one call at a time, milliseconds)",
        "",
        _statistics_note(result),
        "",
        "| operation | p50 | p99 | calls | target p50 | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for probe in result["probes"]:
        verdict = _at_most(probe.p50, probe.target_ms, " ms") if not probe.errors else f"**{len(probe.errors)} errors**"
        lines.append(
            f"| {probe.label} | {_ms(probe.p50)} | {_ms(probe.p99)} | {len(probe.samples)} | "
            f"<= {probe.target_ms:,.0f} | {verdict} |"
        )
    lines += ["", "### Deletion", "", "| operation | time | records | note |", "|---|---|---|---|"]
    for label, entries in (("a median client", result["deletes"]), ("the busiest client", result["heaviest"])):
        if entries:
            times = sorted(entry["seconds"] for entry in entries)
            records = ", ".join(f"{entry['records']:,}" for entry in entries if entry["records"] is not None)
            lines.append(
                f"| DELETE /v2/client of {label} | {times[len(times) // 2] * 1000:,.0f} ms"
                + (f" (median of {len(times)})" if len(times) > 1 else "")
                + f" | {records} | transactions of ANALYTICS_DELETE_BATCH records, then one for the entry |"
            )
    ret = result["retention"]
    deleted = "-" if ret["deleted"] is None else f"{ret['deleted']:,}"
    lines.append(f"| retention of one day: {ret['method']} | {ret['seconds']:,.1f} s | {deleted} | {ret['note']} |")
    cpu = http["worker_cpu"]
    cpu_total = sum(cpu.values())
    split = " / ".join(f"{seconds / cpu_total:.0%}" for seconds in cpu.values()) if cpu_total else "-"
    lines += [
        "",
        "### Ingest details",
        "",
        f"- Load generator alone: {result['generator_rate']:,.0f} records/s as JSON bodies; the benchmark "
        f"process used {http['client_cpu']:,.1f} s of CPU during the HTTP load "
        f"({http['client_cpu'] / http['seconds']:.0%} of one core) on the same cores as the server; each "
        "sender makes its next batch while the last one is in flight.",
        f"- The service's CPU during the HTTP load (gunicorn's workers, and its counting process "
        f"with the pool's arbiter where there is one): {cpu_total:,.1f} s (split {split}), "
        f"{cpu_total / max(http['records'], 1) * 1e6:,.0f} us of CPU per record; "
        f"{cpu_total / http['seconds'] / config['workers']:.0%} of {config['workers']} cores' wall time.",
        f"- POST of one {config['batch']:,}-record batch: p50 {_ms(_s_to_ms(http['request_p50']))} ms, "
        f"max {_ms(_s_to_ms(http['request_max']))} ms.",
        "- Every record counted into the rollups (behind the requests, by the service's counting process) "
        + (
            f"{http['counted_after']:,.1f} s after the last batch was acknowledged (the CPU above includes it)."
            if http.get("counted_after") is not None
            else "as it was stored."
        ),
        f"- Raw load: {raw['insert_seconds']:,.1f} s converting and inserting, {raw['generate_seconds']:,.1f} s "
        f"generating (not counted in its rate); term (interned) columns as the service's: "
        + ", ".join(raw["term_columns"])
        + "; pragmas as the service's: "
        + ", ".join(f"{k}={v}" for k, v in raw["pragmas"].items())
        + ".",
        "",
        "### Where the bytes are (served database, SQLite dbstat)",
        "",
        "| table or index | MiB | bytes per record |",
        "|---|---|---|",
    ]
    breakdown = result["breakdown"]
    for name, size in breakdown["objects"]:
        lines.append(f"| {name} | {size / 2**20:,.1f} | {size / n:,.1f} |")
    lines += ["", f"Page size {breakdown['page_size']:,} B."]
    rollups = (result.get("rollups") or {}).get("dims") or []
    if rollups:
        table = result["rollups"]["bytes"]
        total = sum(rows for _, rows in rollups)
        lines += [
            "",
            "### Rollups: rows per dim (columns/period in minutes; @all: over all endpoints)",
            "",
            "MiB is the rollup table's size shared out by rows (dbstat does not split a table by key).",
            "",
            "| dim | rows | rows per 1,000 records | MiB (share) |",
            "|---|---|---|---|",
        ]
        for meaning, rows in rollups:
            share = f"{table * rows / total / 2**20:,.1f}" if table and total else "-"
            lines.append(f"| {meaning} | {rows:,} | {rows * 1000 / n:,.1f} | {share} |")
    lines += ["", "### Errors seen during the run", ""]
    problems = result["errors"] + [f"gunicorn log: {line}" for line in result["log_findings"]]
    lines += [f"- {problem}" for problem in problems] or ["- none: every request answered as expected."]
    return "\n".join(lines) + "\n"


def _statistics_note(result: dict) -> str:
    upkeep = result["housekeeping"]
    if upkeep is None:
        state = "without housekeeping (--no-housekeeping)"
    else:
        state = f"after the housekeeping: {upkeep['method']}, {upkeep['seconds']:,.1f} s"
    present = "present" if result["analyzed"] else "absent"
    return f"Timed {state}; planner statistics (sqlite_stat1) {present} during the reads."


def _s_to_ms(value):
    return None if value is None else value * 1000


def write(path: str, markdown: str):
    """Replace the generated part of the file (or create it), keeping what is around it."""
    block = f"{START}\n{markdown}{END}\n"
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as existing:
            text = existing.read()
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    elif text:
        text = text.rstrip("\n") + "\n\n" + block
    else:
        text = HEADER + block
    with open(path, "w", encoding="utf-8") as output:
        output.write(text)
