"""The two ways in for the same records: raw executemany into a file of the project's schema, and
POST /v2/ingest to gunicorn from parallel senders. Each generates its batches on the fly."""

import contextlib
import json
import os
import queue
import resource
import sqlite3
import threading
import time

from raw import RawLoader, create_schema
from server import cpu_seconds

# Give up on the HTTP load after this many failed batches (each is reported).
MAX_ERRORS = 20


class Progress:
    """A progress line every few seconds, so that a long run can be watched."""

    def __init__(self, label: str, total: int, every: float = 5.0):
        self.label, self.total, self.every = label, total, every
        self.start = self.last = time.perf_counter()

    def update(self, done: int, force: bool = False):
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.start
        rate = done / elapsed if elapsed else 0.0
        eta = (self.total - done) / rate if rate else 0.0
        print(
            f"  [{self.label}] {done:,} / {self.total:,} records  {rate:,.0f}/s  "
            f"elapsed {elapsed:,.0f} s  eta {eta:,.0f} s",
            flush=True,
        )


def checkpoint(path: str) -> int:
    """Checkpoint the WAL into the file and truncate it; the bytes of the file's pages in use
    after (pages freed by records packed into blocks are reused, and given back to the disk by
    the service's hourly housekeeping)."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        for _ in range(50):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                break
            time.sleep(0.2)
        pages, free, size = (
            conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_count", "freelist_count", "page_size")
        )
    finally:
        conn.close()
    return (pages - free) * size


def frozen_lag(path: str, hot_hours: int = 48, timeout: float = 600.0) -> float | None:
    """Seconds until the service has packed into blocks every record past the hot horizon
    (models/records/freezing.py); None: not within `timeout`."""
    started = time.perf_counter()
    with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
        while time.perf_counter() - started < timeout:
            horizon = (int(time.time() * 1000) // 3_600_000 - hot_hours) * 3_600_000
            if conn.execute("SELECT 1 FROM record WHERE ts < ? LIMIT 1", [horizon]).fetchone() is None:
                return time.perf_counter() - started
            time.sleep(0.5)
    return None


@contextlib.contextmanager
def largest_wal(path: str):
    """The largest size the write-ahead log of `path` reached during the block (sampled every
    50 ms), in the dict yielded, under "bytes"."""
    seen = {"bytes": 0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                seen["bytes"] = max(seen["bytes"], os.path.getsize(path + "-wal"))
            except OSError:
                pass
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield seen
    finally:
        stop.set()
        sampler.join()


def storage_breakdown(path: str) -> dict:
    """Bytes per table and index from SQLite's dbstat (biggest first; those under 1 % of the
    file summed as one), the free pages, and whether the planner has statistics (ANALYZE)."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size
        analyzed = conn.execute("SELECT COUNT(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'").fetchone()[0] > 0
    finally:
        conn.close()
    total = sum(size for _, size in rows) + free
    objects = [(name, size) for name, size in rows if size >= total / 100]
    small = [name for name, size in rows if size < total / 100]
    if small:
        objects.append((f"{len(small)} others (each under 1 %)", sum(size for _, size in rows if size < total / 100)))
    if free:
        objects.append(("(free pages)", free))
    return {"objects": objects, "page_size": page_size, "analyzed": analyzed}


def rollup_rows(path: str) -> dict:
    """The rollup table's bytes, and (meaning, rows) of every dim by the layout the database
    stores (models/statistics/rollups.py)."""
    conn = sqlite3.connect(path, timeout=60)
    try:
        layout = conn.execute("SELECT value FROM store_setting WHERE name = 'rollup_layout'").fetchone()
        counts = dict(conn.execute("SELECT dim, COUNT(*) FROM rollup GROUP BY dim").fetchall())
        size = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'rollup'").fetchone()[0] or 0
    except sqlite3.Error:
        return {"bytes": 0, "dims": []}
    finally:
        conn.close()
    meanings = dict(entry.split(":", 1) for entry in layout[0].split(";")) if layout else {}
    dims = [(meanings.get(str(dim), f"dim {dim}"), rows) for dim, rows in sorted(counts.items())]
    return {"bytes": size, "dims": dims}


def load_raw(traffic, path: str, code_dir: str) -> dict:
    """Insert every batch with RawLoader; the insert time (conversion + executemany + commit)
    is timed apart from the time spent generating the records."""
    layout = create_schema(path, code_dir)
    loader = RawLoader(path, layout)
    progress = Progress("raw executemany", traffic.records)
    generate = insert = 0.0
    done = 0
    try:
        for index in range(traffic.batches):
            t0 = time.perf_counter()
            records = traffic.batch(index)
            t1 = time.perf_counter()
            loader.store(records)
            t2 = time.perf_counter()
            generate += t1 - t0
            insert += t2 - t1
            done += len(records)
            progress.update(done)
        progress.update(done, force=True)
    finally:
        loader.close()
    return {
        "records": done,
        "insert_seconds": insert,
        "generate_seconds": generate,
        "rate": done / insert,
        "rate_with_generation": done / (insert + generate),
        "pragmas": layout["pragmas"],
        "term_columns": [f["sql"] for f in layout["fields"] if f["storage"] == "term"],
    }


def counted_lag(path: str, timeout: float = 600.0) -> float | None:
    """Seconds until the service has counted every stored record into its statistics (they are
    counted behind the ingest requests: see models/statistics/counting.py); None: not within `timeout`."""
    started = time.perf_counter()
    with contextlib.closing(sqlite3.connect(path, timeout=60)) as conn:
        while time.perf_counter() - started < timeout:
            newest = conn.execute("SELECT MAX(id) FROM record").fetchone()[0] or 0
            mark = conn.execute("SELECT value FROM store_setting WHERE name = 'rollups_counted_through'").fetchone()
            if mark is None or int(mark[0]) >= newest:  # no mark: an older version, counted as stored
                return time.perf_counter() - started
            time.sleep(0.05)
    return None


def load_http(traffic, server, senders: int, path: str | None = None) -> dict:
    """POST every batch (a JSON array) from `senders` threads, each on its own share of the
    batches, so that every gunicorn worker has a request to serve."""
    progress = Progress("HTTP ingest", traffic.records)
    lock = threading.Lock()
    state = {"done": 0, "generate": 0.0, "requests": []}
    errors: list[str] = []
    workers = server.processes()  # the counting process's CPU with the web workers'
    cpu_before = {pid: cpu_seconds(pid) for pid in workers}
    self_before = resource.getrusage(resource.RUSAGE_SELF)

    def generate(first: int, bodies: queue.Queue):
        for index in range(first, traffic.batches, senders):
            t0 = time.perf_counter()
            body = traffic.batch_json(index)
            with lock:
                state["generate"] += time.perf_counter() - t0
            bodies.put((index, body))
        bodies.put(None)

    def send(first: int):
        # The next batch is made while this one is in flight, as a feed has its records ready:
        # the raw baseline's rate does not count making them either.
        bodies = queue.Queue(maxsize=2)
        threading.Thread(target=generate, args=(first, bodies), daemon=True).start()
        while (item := bodies.get()) is not None:
            index, body = item
            if len(errors) >= MAX_ERRORS:
                return
            t1 = time.perf_counter()
            expected = min(traffic.batch_size, traffic.records - index * traffic.batch_size)
            try:
                status, data = server.call("POST", "/v2/ingest", body)
            except OSError as exc:
                status, data = None, repr(exc).encode()
            t2 = time.perf_counter()
            with lock:
                state["requests"].append(t2 - t1)
                accepted = _accepted(data) if status == 200 else None
                if accepted == expected:
                    state["done"] += accepted
                else:
                    errors.append(f"POST /v2/ingest (batch {index}): {status} {data[:500].decode(errors='replace')}")
                progress.update(state["done"])

    started = time.perf_counter()
    threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    progress.update(state["done"], force=True)
    # The service's CPU includes counting what it stored into the rollups.
    # Not waited for after failed requests (a server gone would be waited for 600 s).
    counted_after = counted_lag(path) if path and not errors else None
    if path and not errors and counted_after is None:
        errors.append("the service had not counted every stored record 600 s after the last batch")
    self_after = resource.getrusage(resource.RUSAGE_SELF)
    worker_cpu = {}
    for pid in workers:
        try:
            worker_cpu[pid] = cpu_seconds(pid) - cpu_before[pid]
        except OSError:
            errors.append(f"gunicorn process {pid} is gone after the load (restarted?)")
    requests = sorted(state["requests"])
    return {
        "records": state["done"],
        "seconds": seconds,
        "rate": state["done"] / seconds,
        "errors": errors,
        "worker_cpu": worker_cpu,
        "client_cpu": (self_after.ru_utime + self_after.ru_stime) - (self_before.ru_utime + self_before.ru_stime),
        "generate_seconds": state["generate"],
        "request_p50": requests[len(requests) // 2] if requests else None,
        "request_max": requests[-1] if requests else None,
        "counted_after": counted_after,
    }


def _accepted(data: bytes):
    try:
        return json.loads(data).get("accepted")
    except (ValueError, AttributeError):
        return None
