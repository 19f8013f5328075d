"""Real gunicorn for the tests that are about processes: start, call, stop."""

import glob
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import pytest

from support import processes, stores

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # two folders up


FAST_ONLY = "ANALYTICS_TEST_FAST_ONLY"  # set by conftest when system tests are deselected


def refuse_in_fast_lane(what: str) -> None:
    """A fast run (-m "not system") starts no real server: a test that tries lacks its mark."""
    if os.environ.get(FAST_ONLY):
        raise RuntimeError(f"{what} started in a run without system tests: mark the test `system` (tests/conftest.py)")


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not reaped yet, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def niceness(pid: int, thread: int | str | None = None) -> int | None:
    """The nice value of a process, or of one of its threads (None: gone)."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        with open(path) as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[16])
    except OSError:
        return None


def thread_name(pid: int, thread: int | str) -> str | None:
    """The name a thread of a process gave itself (None: gone)."""
    try:
        with open(f"/proc/{pid}/task/{thread}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return None


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (bench/ uses it too)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def counting_arbiters(log_text: str) -> list[int]:
    """The counting process's arbiters (gunicorn's dirty arbiter) a gunicorn log names, oldest
    first: a web worker is any other child of the master."""
    return [int(pid) for pid in re.findall(r"Spawned dirty arbiter \(pid: (\d+)\)", log_text)]


def free_port() -> int:
    """A port free now, below the kernel's range for outgoing connections' own ports: between
    this check and the server binding it, no connection the tests open (to PostgreSQL, to a
    server) can take it, as one could a port the kernel handed out (bind to port 0)."""
    low = _lowest_ephemeral_port()
    while True:
        port = random.randrange(max(1024, low - 12_000), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _lowest_ephemeral_port() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


class Gunicorn:
    """`gunicorn -w N wsgi:app` from the project root, as an operator runs it."""

    def __init__(self, tmp_path, env: dict, workers: int = 2):
        refuse_in_fast_lane("gunicorn")
        if env.get("ANALYTICS_DATABASE") in stores.RECORD_STORES:
            # Its records are in this process's chDB folder, which gunicorn could not open.
            pytest.skip("gunicorn on the clickhouse engine: chDB lets one process open a folder (docs/testing.md)")
        # Retention off unless a test asks for it: the tests' records are dated 2024.
        self.env = {**os.environ, "ANALYTICS_RETENTION_DAYS": "0", **env}
        # A port found free can be taken before gunicorn binds it (another process's outgoing
        # connection): then another port. A restart (start()) keeps the port it has.
        for attempt in range(3):
            self.port = free_port()
            self.base = f"http://127.0.0.1:{self.port}"
            self.log_path = tmp_path / f"gunicorn-{self.port}.log"
            self.log = open(self.log_path, "ab")
            self.command = [
                sys.executable,
                "-m",
                "gunicorn",
                "-w",
                str(workers),
                "-b",
                f"127.0.0.1:{self.port}",
                "wsgi:app",
            ]
            try:
                self.start()
                return
            except RuntimeError:
                processes.stop(self.process, signal.SIGKILL)
                self.log.close()
                if attempt == 2 or "Connection in use" not in self.log_path.read_text():
                    raise

    def start(self):
        # A session of its own, so that kill_all reaches the master and every worker at once.
        self.process = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.wait_ready()

    def kill_all(self):
        """SIGKILL the master and all its workers, as a power cut would stop them."""
        processes.stop(self.process, signal.SIGKILL, group=True)
        # What gunicorn would have removed at a stop: its counting pool's pid file (named by
        # proc_name, gunicorn.conf.py).
        for left in glob.glob(
            os.path.join(tempfile.gettempdir(), f"gunicorn-dirty-dns-analytics-{self.process.pid}-*.pid")
        ):
            os.remove(left)

    def wait_ready(self, timeout=30):
        if processes.started(self.process, self._answers, timeout, interval=0.1):
            return
        if self.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited:\n{self.log_path.read_text()}")
        raise RuntimeError(f"gunicorn did not start:\n{self.log_path.read_text()}")

    def _answers(self) -> bool:
        try:
            self.call("GET", "/v2/openapi.json")
            return True
        except OSError:
            return False

    def worker_pids(self) -> list[int]:
        """The web workers: the master's children but the counting process's arbiter."""
        return [pid for pid in children(self.process.pid) if pid != self.counting_arbiter_pid()]

    def counting_arbiter_pid(self) -> int | None:
        """The arbiter of the counting process (gunicorn's dirty arbiter), as the log names it."""
        spawned = counting_arbiters(self.log_path.read_text())
        return spawned[-1] if spawned else None

    def counting_pid(self) -> int | None:
        """The counting process (the dirty arbiter's one worker), None while there is none."""
        arbiter = self.counting_arbiter_pid()
        found = children(arbiter) if arbiter else []
        return found[0] if found else None

    def call(self, method, path, body=None, headers=None, timeout=30):
        """(status, parsed JSON body) of one request."""
        status, raw = self.fetch(method, path, body, headers, timeout)
        return status, json.loads(raw or b"null")

    def fetch(self, method, path, body=None, headers=None, timeout=30) -> tuple[int, bytes]:
        """(status, raw body) of one request."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def create_key(self, *args) -> str:
        """`flask keys create ARGS` on this server's database; the new key's secret."""
        result = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "keys", "create", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip().splitlines()[-1]

    def stop(self):
        if not self.log.closed:
            processes.stop(self.process)
        self.log.close()
