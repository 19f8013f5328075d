"""nginx for the tests: the committed deploy/nginx-site.conf, run on free loopback ports in front
of a test's gunicorn, so that the file operators copy is the file tested.

Only what a test machine must differ in is replaced (ports, the certificate, the upstream's
port); each replacement must find its text, so the site file and this harness stay in step.
"""

import os
import shutil
import subprocess
import tempfile

from support import processes, servers
from support.servers import ROOT, free_port

SITE = os.path.join(ROOT, "deploy", "nginx-site.conf")
UNAVAILABLE = None  # why nginx cannot run here, if it cannot


class Unavailable(Exception):
    """nginx cannot be started; the message says why."""


class Nginx:
    def __init__(self, upstream_port: int):
        servers.refuse_in_fast_lane("nginx")
        # A folder of its own under /tmp: when the tests run as root, nginx runs as nobody, who
        # may not enter pytest's temporary folders.
        self.folder = tempfile.mkdtemp(prefix="analytics-nginx-")
        self.upstream_port = upstream_port
        try:
            self.http_port, self.https_port = free_port(), free_port()
            certificate, key = self._certificate()
            site = render(
                open(SITE, encoding="utf-8").read(),
                {
                    "server 127.0.0.1:8000;": f"server 127.0.0.1:{upstream_port};",
                    "listen 80;": f"listen 127.0.0.1:{self.http_port};",
                    "listen 443 ssl http2;": f"listen 127.0.0.1:{self.https_port} ssl http2;",
                    "listen [::]:80;": "",
                    "listen [::]:443 ssl http2;": "",
                    "/etc/letsencrypt/live/analytics.example.org/fullchain.pem": certificate,
                    "/etc/letsencrypt/live/analytics.example.org/privkey.pem": key,
                },
            )
            self._start(site)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def _certificate(self) -> tuple[str, str]:
        certificate, key = os.path.join(self.folder, "cert.pem"), os.path.join(self.folder, "key.pem")
        done = subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
            + ["-keyout", key, "-out", certificate],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise Unavailable(f"openssl could not make a test certificate: {done.stderr.strip()[-400:]}")
        return certificate, key

    def _start(self, site: str):
        f = self.folder
        temp = " ".join(
            f"{kind}_temp_path {f}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        conf = os.path.join(f, "nginx.conf")
        with open(conf, "w", encoding="utf-8") as out:
            out.write(
                f"daemon off;\npid {f}/nginx.pid;\nerror_log {f}/error.log info;\nworker_processes 1;\n"
                f"events {{ worker_connections 256; }}\n"
                f"http {{\ninclude /etc/nginx/mime.types;\naccess_log {f}/access.log;\n{temp}\n{site}\n}}\n"
            )
        command = [_binary(), "-p", f, "-e", f"{f}/error.log", "-c", conf]
        if os.geteuid() == 0:
            # Unprivileged, as any user could run it: nginx's workers would drop to another user
            # otherwise, and its files are this user's.
            subprocess.run(["chown", "-R", "nobody", f], check=True)
            command = ["runuser", "-u", "nobody", "--", *command]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if processes.started(self.process, lambda: processes.listening(self.https_port), timeout=10):
            return
        if self.process.poll() is not None:
            raise Unavailable(f"nginx did not start: {self.process.stderr.read().decode().strip()[-800:]}")
        self.stop()
        raise Unavailable("nginx did not open its port within 10 s")

    def log(self) -> str:
        return open(os.path.join(self.folder, "error.log"), encoding="utf-8", errors="replace").read()

    def stop(self):
        processes.stop(self.process, timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def render(site: str, replacements: dict) -> str:
    for old, new in replacements.items():
        assert old in site, f"deploy/nginx-site.conf no longer holds {old!r}: update tests/support/nginx.py"
        site = site.replace(old, new)
    return site


def _binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        raise Unavailable("nginx is not installed (scripts/ensure-nginx installs Debian's package when it may)")
    return found


def probe_once():
    """Start nginx once on the committed site file (conftest calls this at the session's start)."""
    global UNAVAILABLE
    if UNAVAILABLE is not None:
        return
    try:
        Nginx(free_port()).stop()
    except Unavailable as exc:
        UNAVAILABLE = str(exc)


def banner() -> str:
    return f"nginx UNAVAILABLE - every reverse-proxy test SKIPPED: {UNAVAILABLE}"
