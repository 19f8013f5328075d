"""Real gunicorn on a loopback port, plain HTTP calls to it, and what /proc says about its workers."""

import http.client
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.servers import children, counting_arbiters, free_port  # noqa: E402 - the tests' view of gunicorn's processes

_TICK = os.sysconf("SC_CLK_TCK")


class Server:
    """`python -m gunicorn -w N -b 127.0.0.1:PORT wsgi:app` from the project root (or a copy of
    its code), as an operator runs it: gunicorn.conf.py applies; nothing expires meanwhile."""

    def __init__(
        self, database: str, api_key: str, workers: int, log_path: str, code_dir: str = ROOT, extra=(), env=None
    ):
        self.port = free_port()
        self.code_dir = code_dir
        self.api_key = api_key
        self.log_path = log_path
        self.env = {
            **os.environ,
            "ANALYTICS_DATABASE": database,
            "ANALYTICS_API_KEY": api_key,
            "ANALYTICS_RETENTION_DAYS": "0",
            **(env or {}),
        }
        self._log = open(log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{self.port}", *extra, "wsgi:app"],
            cwd=code_dir,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(workers)

    def _wait_ready(self, workers: int, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.log_path}")
            try:
                if self.call("GET", "/v2/openapi.json")[0] == 200 and len(self.workers()) >= workers:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn did not start; see {self.log_path}")

    def call(self, method: str, path: str, body=None, content_type="application/json", timeout=900):
        """(status, response bytes) of one request on a fresh connection (so that calls are
        spread over the workers, as independent clients' calls are)."""
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        headers = {"Authorization": self.api_key}
        if body is not None:
            headers["Content-Type"] = content_type
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def open(self, path: str, timeout=900):
        """A GET whose body the caller reads (streamed); close the connection after."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn.request("GET", path, headers={"Authorization": self.api_key})
        return conn, conn.getresponse()

    def workers(self) -> list[int]:
        """The web workers: the master's children but the counting process's arbiter (gunicorn's
        dirty arbiter, as the log names it)."""
        pool = set(counting_arbiters(Path(self.log_path).read_text(errors="replace")))
        return [pid for pid in children(self.process.pid) if pid not in pool]

    def processes(self) -> list[int]:
        """Every process of the service under its master: the web workers, and the counting
        process with its arbiter."""
        found, parents = [], [self.process.pid]
        while parents:
            parents = [pid for parent in parents for pid in children(parent)]
            found += parents
        return sorted(found)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (resident now) and VmHWM (peak resident since start or the last reset), in KiB."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0])
    return found


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux: clear_refs 5); False where not permitted."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores; /proc/stat)."""
    with open("/proc/stat") as stat:
        values = [int(value) for value in stat.readline().split()[1:9]]
    return (sum(values) - values[3] - values[4]) / _TICK  # minus idle and iowait


class OtherLoad:
    """How many cores processes other than the benchmark and its server kept busy during a
    phase: the figures mean little if the machine was shared."""

    def __init__(self, server=None):
        self.server = server
        self.started = time.perf_counter()
        self.busy = machine_busy_seconds()
        self.own = self._own()

    def _own(self) -> float:
        pids = [os.getpid()]
        if self.server is not None:
            pids += [self.server.process.pid, *self.server.processes()]
        # Children the benchmark has waited for (a loader of its own) are its work too.
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = children.ru_utime + children.ru_stime
        for pid in pids:
            try:
                total += cpu_seconds(pid)
            except OSError:
                pass
        return total

    def cores(self) -> float:
        wall = time.perf_counter() - self.started
        others = (machine_busy_seconds() - self.busy) - (self._own() - self.own)
        return max(others, 0.0) / wall if wall else 0.0
