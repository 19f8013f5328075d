"""Debian's rsyslog for the syslog output's tests: an rsyslogd of the test's own (not the system
service), listening on free loopback ports over UDP, TCP and TLS, writing what each input
received into a file of its own (one line a message: the parsed header fields, then the
message text), so that a test reads back what a real syslog receiver made of the messages.
scripts/ensure-rsyslog installs it."""

import os
import shutil
import subprocess
import tempfile

from support import processes, servers
from support.receivers import make_certificate
from support.servers import free_port

UNAVAILABLE = None  # why rsyslog cannot run here, if it cannot
VERSION = None
BINARY = "/usr/sbin/rsyslogd"
TRANSPORTS = ("udp", "tcp", "tls")


class Unavailable(Exception):
    """rsyslogd cannot be started; the message says why."""


class Rsyslog:
    def __init__(self):
        servers.refuse_in_fast_lane("rsyslogd")
        self.folder = tempfile.mkdtemp(prefix="analytics-rsyslog-")
        self.ports = {transport: free_port() for transport in TRANSPORTS}
        try:
            self.certificate, self.key = make_certificate(self.folder)
        except RuntimeError as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise Unavailable(str(exc)) from None
        self.process = None
        try:
            self.start()
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def url(self, transport: str) -> str:
        return f"{transport}://127.0.0.1:{self.ports[transport]}"

    def received(self, transport: str) -> list[dict]:
        """What the input got, one dict per message: the fields rsyslog parsed out of it."""
        path = os.path.join(self.folder, f"{transport}.log")
        if not os.path.exists(path):
            return []
        found = []
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.endswith("\n"):
                    version, hostname, app_name, msgid, pri, msg = line[:-1].split("|", 5)
                    found.append(
                        {
                            "version": version,
                            "hostname": hostname,
                            "app": app_name,
                            "msgid": msgid,
                            "pri": pri,
                            "msg": msg.strip(),
                        }
                    )
        return found

    def _config(self) -> str:
        f = self.folder
        rules = "\n".join(
            f'ruleset(name="{t}") {{ action(type="omfile" file="{f}/{t}.log" template="fields") }}' for t in TRANSPORTS
        )
        p = self.ports
        return f"""
global(workDirectory="{f}" maxMessageSize="64k"
       defaultNetstreamDriverCAFile="{self.certificate}" defaultNetstreamDriverCertFile="{self.certificate}"
       defaultNetstreamDriverKeyFile="{self.key}")
module(load="imudp")
module(load="imtcp" maxSessions="200")
template(name="fields" type="string"
         string="%protocol-version%|%hostname%|%app-name%|%msgid%|%pri%|%msg%\\n")
{rules}
input(type="imudp" address="127.0.0.1" port="{p["udp"]}" ruleset="udp" rcvbufSize="8m")
input(type="imtcp" address="127.0.0.1" port="{p["tcp"]}" ruleset="tcp")
input(type="imtcp" address="127.0.0.1" port="{p["tls"]}" ruleset="tls"
      streamDriver.name="ossl" streamDriver.mode="1" streamDriver.authMode="anon")
"""

    def start(self):
        conf = os.path.join(self.folder, "rsyslog.conf")
        with open(conf, "w", encoding="utf-8") as out:
            out.write(self._config())
        if not os.access(BINARY, os.X_OK):
            raise Unavailable(
                "rsyslogd is not installed (scripts/ensure-rsyslog installs Debian's package when it may)"
            )
        self.process = subprocess.Popen(
            [BINARY, "-n", "-f", conf, "-i", os.path.join(self.folder, "rsyslogd.pid")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        if processes.started(self.process, lambda: all(processes.listening(self.ports[t]) for t in ("tcp", "tls")), 10):
            return
        if self.process.poll() is not None:
            raise Unavailable(f"rsyslogd did not start: {self.process.stdout.read().decode().strip()[-800:]}")
        self.stop()
        raise Unavailable("rsyslogd did not open its ports within 10 s")

    def stop(self):
        """rsyslogd stopped (its files stay until close()); start() brings it back on the same ports."""
        if self.process is not None and self.process.poll() is None:
            processes.stop(self.process, timeout=10)

    def close(self):
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


def probe():
    """Start rsyslogd once (conftest calls this at the session's start)."""
    global UNAVAILABLE, VERSION
    if UNAVAILABLE is not None or VERSION is not None:
        return
    try:
        Rsyslog().close()
        VERSION = " ".join(subprocess.run([BINARY, "-v"], capture_output=True, text=True).stdout.split()[:2])
    except (Unavailable, OSError) as exc:
        UNAVAILABLE = str(exc)


def banner() -> str:
    return f"rsyslog UNAVAILABLE - every syslog-output test SKIPPED: {UNAVAILABLE}"
