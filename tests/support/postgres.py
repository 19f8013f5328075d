"""A throwaway PostgreSQL server for the test session: initdb + pg_ctl into a temporary folder.

ANALYTICS_TEST_POSTGRES=postgresql://... uses a running server instead (each test gets a
schema of its own there, dropped afterwards).
"""

import glob
import os
import shutil
import subprocess
import tempfile
import uuid

from support import processes, servers
from support.servers import free_port


class Unavailable(Exception):
    """No PostgreSQL server could be had; the message says why."""


class Cluster:
    def __init__(self):
        self.url = None
        self.version = None
        self._folder = None
        self._bin = None
        self._as_user: list[str] = []

    def start(self):
        external = os.environ.get("ANALYTICS_TEST_POSTGRES")
        if external:
            self.url = external
        else:
            self._start_local()
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                self.version = conn.execute("SHOW server_version").fetchone()[0]
        except psycopg.Error as exc:
            raise Unavailable(f"cannot connect to {self.url}: {exc}") from exc
        return self

    def _start_local(self):
        self._bin = _find_bin()
        if os.geteuid() == 0:
            # initdb refuses to run as root: the server runs as the packages' own user.
            if shutil.which("runuser") is None or not processes.user_exists("postgres"):
                raise Unavailable("running as root and there is no 'postgres' user to run the server as")
            self._as_user = ["runuser", "-u", "postgres", "--"]
        self._folder = tempfile.mkdtemp(prefix="analytics-pg-")
        data = os.path.join(self._folder, "data")
        if self._as_user:
            shutil.chown(self._folder, "postgres")
        initdb = ("initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        try:
            # A locale collation, as most installations have, so that tests see what its text
            # ordering does; plain C where the server was built without ICU.
            self._run(*initdb, "--locale-provider=icu", "--icu-locale=en-US")
        except Unavailable:
            shutil.rmtree(data, ignore_errors=True)
            self._run(*initdb)
        port = free_port()
        # Durability settings off: the tests crash the service, never the database server.
        options = (
            f"-p {port} -c listen_addresses=127.0.0.1 -k {self._folder} -c max_connections=400"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run("pg_ctl", "-D", data, "-l", os.path.join(self._folder, "server.log"), "-w", "-o", options, "start")
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _run(self, program, *args):
        command = [*self._as_user, os.path.join(self._bin, program), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise Unavailable(f"{program} failed: {(done.stderr or done.stdout).strip()[-800:]}")

    def stop(self):
        if self._folder is None:
            return
        try:
            self._run("pg_ctl", "-D", os.path.join(self._folder, "data"), "-m", "immediate", "stop")
        except Unavailable:
            pass
        shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = None

    def new_database(self) -> str:
        """The URL of a new, empty schema: every connection through it sees only that schema."""
        import psycopg

        schema = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        separator = "&" if "?" in self.url else "?"
        return f"{self.url}{separator}options=-csearch_path%3D{schema}"


CLUSTER = Cluster()
UNAVAILABLE = None  # why the session's server could not be had, if it could not


def start_once():
    """Start the session's server (conftest calls this before any test module is imported)."""
    global UNAVAILABLE
    servers.refuse_in_fast_lane("PostgreSQL")
    if CLUSTER.url is None and UNAVAILABLE is None:
        try:
            CLUSTER.start()
        except Unavailable as exc:
            UNAVAILABLE = str(exc)


def banner() -> str:
    return f"PostgreSQL UNAVAILABLE - the API suite ran on SQLite only, every PostgreSQL test SKIPPED: {UNAVAILABLE}"


def _find_bin() -> str:
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(os.path.realpath(found))
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if candidates:
        return os.path.dirname(candidates[-1])
    raise Unavailable("the PostgreSQL server programs (initdb, pg_ctl) are not installed")
