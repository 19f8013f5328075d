"""What is timed once the records are in: read latencies, the CSV export, deleting a client,
and retention of one day."""

import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

from server import cpu_seconds, memory_kib, reset_peak
from traffic import DAY_MS

SEARCH_MODES = ("includes", "startsWith", "endsWith", "excludes", "apex", "regex")
# The rare searches: a name asked by about RARE_SHARE of the records, each under RARE_LIMIT.
RARE_SHARE, RARE_LIMIT = 0.0002, 0.001
# RSS in the second half of an export may exceed the first half's peak by this much and still
# count as flat (allocator noise, buffers), in KiB.
FLAT_SLACK_KIB = 16 * 1024


@dataclass
class Probe:
    label: str
    path: str
    target_ms: float | None
    samples: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    @property
    def p50(self):
        return statistics.median(self.samples) * 1000 if self.samples else None

    @property
    def p99(self):
        """Nearest rank: with 30 calls, the slowest one."""
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return ordered[math.ceil(0.99 * len(ordered)) - 1] * 1000


def query(path: str, **params) -> str:
    pairs = []
    for name, value in params.items():
        for item in value if isinstance(value, list) else [value]:
            # a trailing "_" stands for "[]": clientId_ is clientId[]
            pairs.append((name[:-1] + "[]" if name.endswith("_") else name, item))
    return f"{path}?{urlencode(pairs)}" if pairs else path


def read_probes(traffic) -> list[Probe]:
    """The read operations with their targets (p50, ms, at 10M records on 2 cores)."""
    fmt = traffic.format_ms
    end = fmt(traffic.end_ms - 1)
    windows = {"24 h": fmt(traffic.end_ms - DAY_MS), "30 d": fmt(traffic.start_ms)}
    endpoint = biggest_endpoint(traffic)
    pair = [base["clientId"] for base, _ in traffic.clients if base["endpointId"] == endpoint][:2]
    apex = traffic.top_apex
    searches = {
        "includes": apex.split(".")[0][:4],
        "startsWith": "api.",
        "endsWith": "." + apex,
        "excludes": apex,
        "apex": apex,
        "regex": "^api\\." + apex.replace(".", "\\.") + "$",
    }
    log = {"endpointId": endpoint, "startTime": windows["30 d"], "endTime": end, "action_": 1}
    probes = [
        Probe("GET /v2/client (all)", "/v2/client", 50),
        Probe("GET /v2/client?endpointId (one endpoint)", query("/v2/client", endpointId=endpoint), 50),
        Probe("GET /v2/client?clientId[] (2 clients)", query("/v2/client", clientId_=pair), 50),
        Probe("activity-log page 0 (endpoint + 30 d + action)", query("/v2/activity-log", **log, page=0), 50),
        Probe("activity-log page 1,000 (same)", query("/v2/activity-log", **log, page=1000), 100),
    ]
    for mode in SEARCH_MODES:
        probes.append(
            Probe(
                f"activity-log searchQuestion {mode} '{searches[mode]}' (30 d)",
                query(
                    "/v2/activity-log",
                    startTime=windows["30 d"],
                    endTime=end,
                    searchQuestion=searches[mode],
                    searchQuestionMode=mode,
                ),
                50,
            )
        )
    # A search that matches little (issue 44): under 0.1 % of the records, so that the first
    # page is not filled from the newest hours and the whole window is looked through.
    rare = traffic.rare_apex(RARE_SHARE)
    rare_searches = {
        "includes": (rare, lambda name: rare in name),
        "startsWith": (rare, lambda name: name.startswith(rare)),
        "endsWith": ("." + rare, lambda name: name.endswith("." + rare)),
        "excludes": (".", lambda name: "." not in name),
        "apex": (rare, lambda name: name == rare or name.endswith("." + rare)),
        "regex": (f"(^|\\.){re.escape(rare)}$", lambda name: name == rare or name.endswith("." + rare)),
    }
    for mode in SEARCH_MODES:
        text, matches = rare_searches[mode]
        share = traffic.share(matches)
        assert share < RARE_LIMIT, f"the rare {mode} search matches {share:.3%} of the records"
        probes.append(
            Probe(
                f"activity-log searchQuestion {mode} '{text}', {share:.4%} of records (30 d)",
                query(
                    "/v2/activity-log",
                    startTime=windows["30 d"],
                    endTime=end,
                    searchQuestion=text,
                    searchQuestionMode=mode,
                ),
                100,
            )
        )
    for name, start in windows.items():
        target = 150 if name == "24 h" else 300
        for operation in (
            "count",
            "count/question",
            "count/clientId",
            "count/action",
            "timeseries",
            "timeseries/action",
        ):
            probes.append(
                Probe(
                    f"{operation} ({name})", query(f"/v2/statistic/{operation}", startTime=start, endTime=end), target
                )
            )
    # The top lists (issue 16): top blocked domains, and the top domains of one client (a median
    # one, and the busiest: 1 % of all records, read from the records through its index).
    by_weight = sorted(zip(traffic.client_weights, (base["clientId"] for base, _ in traffic.clients), strict=True))
    median, busiest = by_weight[len(by_weight) // 2][1], by_weight[-1][1]
    for name, start in windows.items():
        target = 150 if name == "24 h" else 300
        window = {"startTime": start, "endTime": end}
        probes += [
            Probe(
                f"count/question?action[]=0 ({name})",
                query("/v2/statistic/count/question", **window, action_=0),
                target,
            ),
            Probe(
                f"count/question?clientId[] (a median client, {name})",
                query("/v2/statistic/count/question", **window, clientId_=median),
                target,
            ),
            Probe(
                f"count/question?clientId[] (the busiest client, {name})",
                query("/v2/statistic/count/question", **window, clientId_=busiest),
                target,
            ),
        ]
    # Sites (issue 27): top registrable domains, counted from the question's rollups, and the
    # names first seen in a window (the first-seen table; a client's from its records).
    for name, start in windows.items():
        target = 150 if name == "24 h" else 300
        window = {"startTime": start, "endTime": end}
        probes += [
            Probe(
                f"count/registrableDomain ({name})", query("/v2/statistic/count/registrableDomain", **window), target
            ),
            Probe(
                f"count/registrableDomain?action[]=0 ({name})",
                query("/v2/statistic/count/registrableDomain", **window, action_=0),
                target,
            ),
            Probe(f"first-seen/question ({name})", query("/v2/statistic/first-seen/question", **window), target),
            Probe(
                f"first-seen/registrableDomain ({name})",
                query("/v2/statistic/first-seen/registrableDomain", **window),
                target,
            ),
            Probe(
                f"first-seen/question?clientId[] (the busiest client, {name})",
                query("/v2/statistic/first-seen/question", **window, clientId_=busiest),
                target,
            ),
        ]
    for group in ("question", "clientId"):
        probes.append(
            Probe(
                f"trend/{group} (24 h vs the 24 h before)",
                query(f"/v2/statistic/trend/{group}", startTime=windows["24 h"], endTime=end),
                150,
            )
        )
    # A year: past the records' horizon statistics answer from the daily rollups alone.
    year = {"startTime": fmt(traffic.end_ms - 365 * DAY_MS), "endTime": end}
    for operation in (
        "count",
        "count/question",
        "count/registrableDomain",
        "count/clientId",
        "timeseries",
        "timeseries/action",
    ):
        probes.append(Probe(f"{operation} (365 d)", query(f"/v2/statistic/{operation}", **year), 300))
    return probes


def biggest_endpoint(traffic) -> str:
    totals: dict[str, float] = {}
    for (base, _), weight in zip(traffic.clients, traffic.client_weights, strict=True):
        totals[base["endpointId"]] = totals.get(base["endpointId"], 0.0) + weight
    return max(totals, key=totals.get)


def run_probe(server, probe: Probe, calls: int, warmup: int, budget: float | None = None) -> Probe:
    """`warmup` untimed calls, then `calls` timed ones; with a `budget` (seconds, warm-up
    included) it stops early, but after at least one warm-up and three timed calls."""
    began = time.perf_counter()
    warmed = 0
    while len(probe.samples) < calls and len(probe.errors) < 3:
        started = time.perf_counter()
        status, body = server.call("GET", probe.path)
        elapsed = time.perf_counter() - started
        over = budget is not None and time.perf_counter() - began > budget
        if status != 200:
            probe.errors.append(f"GET {probe.path}: {status} {body[:300].decode(errors='replace')}")
        elif warmed < warmup and not (over and warmed):
            warmed += 1
        else:
            probe.samples.append(elapsed)
            if over and len(probe.samples) >= 3:
                break
    return probe


def csv_export(server, traffic) -> dict:
    """Stream GET /v2/activity-log/csv of about a million rows (the whole data set when
    smaller), sampling the workers' RSS every 20 ms; also VmHWM after resetting it."""
    days = max(1, min(30, round(30 * 1_000_000 / traffic.records)))
    start, end = traffic.end_ms - days * DAY_MS, traffic.end_ms - 1
    path = query("/v2/activity-log/csv", startTime=traffic.format_ms(start), endTime=traffic.format_ms(end))
    workers = server.workers()
    before = {pid: memory_kib(pid)["VmRSS"] for pid in workers}
    cpu_before = {pid: cpu_seconds(pid) for pid in workers}
    peak_reset = all(reset_peak(pid) for pid in workers)
    samples: dict[int, list[tuple[float, int]]] = {pid: [] for pid in workers}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            now = time.perf_counter()
            for pid in workers:
                try:
                    samples[pid].append((now, memory_kib(pid)["VmRSS"]))
                except OSError:
                    pass
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    lines = size = 0
    first_byte = None
    conn, response = server.open(path)
    try:
        status = response.status
        while chunk := response.read(1 << 16):
            if first_byte is None:
                first_byte = time.perf_counter() - started
            lines += chunk.count(b"\n")
            size += len(chunk)
    finally:
        conn.close()
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    # The worker that served the export is the one that burnt the CPU.
    pid = max(workers, key=lambda p: cpu_seconds(p) - cpu_before[p])
    series = samples[pid]
    middle = started + seconds / 2
    first_half = [rss for t, rss in series if t < middle] or [before[pid]]
    second_half = [rss for t, rss in series if t >= middle] or first_half
    peak = max(max(rss for _, rss in series) if series else 0, memory_kib(pid)["VmHWM"] if peak_reset else 0)
    rows = max(lines - 1, 0)
    return {
        "status": status,
        "days": days,
        "rows": rows,
        "bytes": size,
        "seconds": seconds,
        "rate": rows / seconds if seconds else 0.0,
        "first_byte": first_byte,
        "rss_before_kib": before[pid],
        "rss_peak_kib": peak,
        "flat": max(second_half) <= max(first_half) + FLAT_SLACK_KIB,
        "peak_from_hwm": peak_reset,
        "samples": len(series),
    }


def count_records(server, traffic, **filters) -> int | None:
    path = query(
        "/v2/statistic/count",
        startTime=traffic.format_ms(traffic.start_ms - DAY_MS),
        endTime=traffic.format_ms(traffic.end_ms + DAY_MS),
        **filters,
    )
    status, body = server.call("GET", path)
    return json.loads(body)["count"] if status == 200 else None


def delete_client(server, traffic, client: dict) -> dict:
    """DELETE /v2/client of one client (all its records, then its entry), timed."""
    records = count_records(server, traffic, endpointId_=client["endpointId"], clientId_=client["clientId"])
    body = {
        "endpointIds": [client["endpointId"]],
        "clientIds": [client["clientId"]],
        "endTime": int(time.time() * 1000),
    }
    started = time.perf_counter()
    status, answer = server.call("DELETE", "/v2/client", body)
    seconds = time.perf_counter() - started
    error = None
    if status != 200 or json.loads(answer).get("deletedCount") != 1:
        error = f"DELETE /v2/client {json.dumps(body)}: {status} {answer[:300].decode(errors='replace')}"
    return {"client": client["clientId"], "records": records, "seconds": seconds, "error": error}


def flask(server, env: dict, *args: str) -> subprocess.CompletedProcess:
    """`flask --app wsgi ARGS` beside the server's code, as an operator runs the commands."""
    command = [sys.executable, "-m", "flask", "--app", "wsgi", *args]
    return subprocess.run(command, cwd=server.code_dir, env=env, capture_output=True, text=True)


def has_retention_command(server) -> bool:
    help_text = flask(server, server.env, "--help").stdout
    return re.search(r"^\s+retention\b", help_text, re.MULTILINE) is not None


def planner_statistics(path: str) -> bool:
    conn = sqlite3.connect(path, timeout=60)
    try:
        return conn.execute("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'").fetchone()[0] > 0
    finally:
        conn.close()


def housekeeping(server) -> dict:
    """Bring the loaded database to the state a running deployment keeps it in: the hourly
    retention job ends with a sampled ANALYZE (models.engine.database.reclaim_space). Run that
    job's command with a retention longer than the data (it deletes nothing); fall back to a
    plain ANALYZE where that leaves no planner statistics, and say so."""
    path = server.env["ANALYTICS_DATABASE"]
    env = {**server.env, "ANALYTICS_RETENTION_DAYS": "3650"}
    steps, error = [], None
    started = time.perf_counter()
    if has_retention_command(server):
        done = flask(server, env, "retention")
        steps.append("flask --app wsgi retention with ANALYTICS_RETENTION_DAYS=3650 (deletes nothing; sampled ANALYZE)")
        if done.returncode != 0:
            error = f"flask --app wsgi retention: exit {done.returncode}: {(done.stdout + done.stderr)[-500:]}"
    analyzed = planner_statistics(path)
    if not analyzed:
        conn = sqlite3.connect(path, timeout=60)
        try:
            conn.execute("ANALYZE")
            conn.commit()
        finally:
            conn.close()
        steps.append("ANALYZE by the benchmark (the service's housekeeping left no planner statistics)")
    return {
        "method": "; ".join(steps),
        "seconds": time.perf_counter() - started,
        "by_service": analyzed,
        "error": error,
    }


def retention(server, traffic) -> dict:
    """Remove the oldest day of records: with `flask --app wsgi retention` where it exists
    (ANALYTICS_RETENTION_DAYS=29: the data spans 30 days ending at the start of the run), else
    with the API's equivalent, DELETE /v2/activity-log?all=true&endTime=<the first day's end>."""
    before = count_records(server, traffic)
    if has_retention_command(server):
        env = {**server.env, "ANALYTICS_RETENTION_DAYS": "29"}
        started = time.perf_counter()
        flask(server, env, "--help")
        startup = time.perf_counter() - started
        started = time.perf_counter()
        done = flask(server, env, "retention")
        seconds = time.perf_counter() - started
        method = "flask --app wsgi retention (ANALYTICS_RETENTION_DAYS=29)"
        output = (done.stdout + done.stderr)[-500:]
        error = None if done.returncode == 0 else f"{method}: exit {done.returncode}: {output}"
        note = f"includes ~{startup:.1f} s of app start-up (timed with `flask --help`)"
    else:
        end = traffic.format_ms(traffic.start_ms + DAY_MS - 1)
        path = query("/v2/activity-log", all="true", endTime=end)
        started = time.perf_counter()
        status, answer = server.call("DELETE", path)
        seconds = time.perf_counter() - started
        method = f"DELETE {path} (no retention command yet)"
        error = None if status == 200 else f"{method}: {status} {answer[:300].decode(errors='replace')}"
        note = "deletes in transactions of 10,000 records"
    after = count_records(server, traffic)
    deleted = before - after if before is not None and after is not None else None
    return {"method": method, "seconds": seconds, "deleted": deleted, "error": error, "note": note}


def gunicorn_log_findings(path: str) -> list[str]:
    """Lines of the gunicorn log that are not routine: errors, tracebacks, timeouts, non-2xx."""
    findings = []
    routine = re.compile(r'" (2\d\d) ')
    with open(path, errors="replace") as log:
        for line in log:
            if '"' in line and routine.search(line) or "[INFO]" in line:
                continue  # a successful request's access-log line, or routine start and stop
            if re.search(r"error|traceback|exception|locked|timeout|exiting|critical|\" [45]\d\d ", line, re.I):
                findings.append(line.rstrip()[:400])
    return findings


def file_bytes(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0
