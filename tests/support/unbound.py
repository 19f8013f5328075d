"""A real Unbound for the dnstap tests: Debian's, run unprivileged on a free loopback port with
a configuration the test writes, sending dnstap to the collector.

ANALYTICS_TEST_UNBOUND=/path/to/unbound uses another build instead.
"""

import os
import pwd
import shutil
import subprocess

import dns.message
import dns.query
import pytest

from support import processes, servers
from support.resolvers import refused
from support.servers import free_port

UNAVAILABLE = None  # why Unbound cannot be used, once known
VERSION = None
# Started as root, Unbound drops to its package's user, as installed resolvers do; the
# collector's socket must then let that user's group in (as deploy/'s unit does).
USER = "unbound" if os.geteuid() == 0 and processes.user_exists("unbound") else ""

# A local zone of a few names, a "blocked" name answered 0.0.0.0 / ::, and a zone whose every
# name is NXDOMAIN (an ad zone, as blocklists are served); nothing is forwarded anywhere.
ZONES = """
    local-zone: "home.test." static
    local-data: "a.home.test. A 192.0.2.1"
    local-data: "a.home.test. A 192.0.2.2"
    local-data: "b.home.test. AAAA 2001:db8::1"
    local-data: "c.home.test. TXT 'hello'"
    local-zone: "blocked.test." redirect
    local-data: "blocked.test. A 0.0.0.0"
    local-data: "blocked.test. AAAA ::"
    local-zone: "ads.test." always_nxdomain
    local-zone: "." refuse
"""


def let_connect(socket_path) -> None:
    """Give the socket to Unbound's group, as running the collector with that group would."""
    if USER:
        os.chown(socket_path, -1, pwd.getpwnam(USER).pw_gid)


def probe() -> None:
    """Find the binary and check that it was built with dnstap (at session start: cheap)."""
    global UNAVAILABLE, VERSION
    binary = _binary()
    if binary is None:
        UNAVAILABLE = "no unbound program found (scripts/ensure-unbound installs Debian's)"
        return
    try:
        out = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        UNAVAILABLE = f"{binary} -V failed: {exc}"
        return
    if "--enable-dnstap" not in out:
        UNAVAILABLE = f"{binary} was built without dnstap"
        return
    VERSION = out.splitlines()[0].removeprefix("Version ").strip()


def banner() -> str:
    return f"Unbound UNAVAILABLE - every dnstap collector test SKIPPED: {UNAVAILABLE}"


def _binary() -> str | None:
    chosen = os.environ.get("ANALYTICS_TEST_UNBOUND")
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    # /usr/sbin is not on every user's PATH.
    return shutil.which("unbound") or shutil.which("unbound", path="/usr/sbin")


class Unbound:
    """`unbound -d -c CONF` with dnstap to `socket_path` (or to `tcp` = (host, port))."""

    def __init__(self, folder, *, socket_path=None, tcp=None, log_queries=True, dnstap=None):
        """`dnstap`: the whole `dnstap:` section instead (docs/feeding.md's own lines)."""
        servers.refuse_in_fast_lane("Unbound")
        self.folder = folder
        self.port = free_port()
        if USER:
            folder.chmod(0o755)  # Unbound's user reads its configuration and reaches the socket
        self.conf = folder / "unbound.conf"
        self.log_path = folder / "unbound.log"
        if dnstap is None:
            if socket_path:
                target = f'dnstap-socket-path: "{socket_path}"'
            else:
                target = f"dnstap-ip: {tcp[0]}@{tcp[1]}\n    dnstap-tls: no"
            dnstap = f"""dnstap:
    dnstap-enable: yes
    {target}
    dnstap-log-client-query-messages: {"yes" if log_queries else "no"}
    dnstap-log-client-response-messages: yes
"""
        self.dnstap = dnstap
        self.conf.write_text(self._configuration(dnstap))
        self.process = None
        self.start()

    def _configuration(self, dnstap: str) -> str:
        return f"""server:
    interface: 127.0.0.1@{self.port}
    do-daemonize: no
    username: "{USER}"
    chroot: ""
    directory: "{self.folder}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 1
    do-ip6: no
    module-config: "iterator"
    num-threads: 1
{ZONES}
{dnstap}
remote-control:
    control-enable: no
"""

    def start(self):
        """Unbound with its configuration; not starting, a failure of its dnstap lines when it
        starts without them (`resolvers.refused`), else Unbound is unavailable here."""
        global UNAVAILABLE
        self.log = open(self.log_path, "ab")
        said = self.log_path.stat().st_size
        if self._launch(self.conf):
            return
        why = self._gone()
        output = self.log_path.read_bytes()[said:].decode(errors="replace")
        probe = self.folder / "unbound-without-dnstap.conf"
        probe.write_text(self._configuration(""))
        try:
            refused("Unbound", self.dnstap, why, output, lambda: self._starts_with(probe))
        finally:
            self.log.close()
        tried = self.log_path.read_bytes()[said:].decode(errors="replace")
        UNAVAILABLE = f"Unbound did not start, even without its dnstap lines ({why}): {tried[-800:]}"
        pytest.skip(banner())

    def _launch(self, conf) -> bool:
        """Whether `unbound -d -c CONF` started."""
        starts = self._starts()
        self.process = subprocess.Popen(
            [_binary(), "-d", "-c", str(conf)], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        # Not a probe query: it would be logged, and the tests count what is logged.
        return processes.started(self.process, lambda: self._starts() > starts, timeout=15)

    def _gone(self) -> str:
        """Why it did not start (it exited, or the time ran out), once stopped."""
        status = self.process.poll()
        processes.stop(self.process, timeout=10)
        return f"exit status {status}" if status is not None else "not started after 15 s"

    def _starts_with(self, conf) -> bool:
        """Whether it starts with CONF instead (stopped again at once)."""
        try:
            return self._launch(conf)
        finally:
            processes.stop(self.process, timeout=10)

    def _starts(self) -> int:
        return self.log_path.read_text().count("start of service") if self.log_path.exists() else 0

    def ask(self, name, rdtype, *, tcp=False, source="127.0.0.1", timeout=5.0) -> dns.message.Message:
        query = dns.message.make_query(name, rdtype)
        send = dns.query.tcp if tcp else dns.query.udp
        return send(query, "127.0.0.1", port=self.port, source=source, timeout=timeout)

    def stop(self):
        if self.process:
            processes.stop(self.process, timeout=10)
        self.log.close()
