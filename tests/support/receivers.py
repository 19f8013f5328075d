"""Real receivers for the outputs' tests: an HTTP server that takes NDJSON POSTs (in this test
process, on a loopback port; it can refuse batches or go away and come back on the same port),
and files read back as JSON lines."""

import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from support import servers


def make_certificate(folder: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and localhost: (certificate, key) PEM paths."""
    certificate, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    done = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", certificate],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl could not make a test certificate: {done.stderr.strip()[-400:]}")
    return certificate, key


class HttpReceiver:
    """Collects the records POSTed to it, in the order accepted; `refusing` answers 503. With
    `tls`, it speaks HTTPS with a self-signed certificate (`certificate`, a PEM path)."""

    def __init__(self, port: int | None = None, delay: float = 0.0, tls: bool = False):
        servers.refuse_in_fast_lane("an HTTP receiver")
        self.port = port or servers.free_port()
        self.certificate = self.context = None
        if tls:
            self.certificate, key = make_certificate(tempfile.mkdtemp(prefix="analytics-receiver-"))
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(self.certificate, key)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/ingest"
        self.records: list[dict] = []
        self.requests: list[dict] = []  # the headers of every request
        self.refusing = False
        self.delay = delay
        self.lock = threading.Lock()
        self.connections = set()  # open keep-alive connections, cut on stop()
        self.server = None
        self.start()

    def start(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                receiver.connections.add(self.connection)

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                time.sleep(receiver.delay)
                with receiver.lock:
                    receiver.requests.append(dict(self.headers))
                    if receiver.refusing:
                        status = 503
                    else:
                        status = 200
                        receiver.records += [json.loads(line) for line in body.splitlines() if line]
                answer = b'{"ok":true}' if status == 200 else b"busy"
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        if self.context is not None:
            self.server.socket = self.context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        """Gone: connections refused until start()."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        for connection in list(self.connections):
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.connections.clear()

    def ids(self) -> list[int]:
        with self.lock:
            return [record["recordId"] for record in self.records]


def file_records(path) -> list[dict]:
    """The JSON lines of an output file and its rotated files, oldest first."""
    rotated = sorted(
        (
            int(name.rsplit(".", 1)[1])
            for name in os.listdir(os.path.dirname(path))
            if name.startswith(os.path.basename(path) + ".")
        ),
        reverse=True,
    )
    found = []
    for name in [f"{path}.{n}" for n in rotated] + [str(path)]:
        if os.path.exists(name):
            with open(name, "rb") as handle:
                found += [json.loads(line) for line in handle if line.strip()]
    return found


def first_arrivals(records: list[dict], key="recordId") -> list[dict]:
    """Each record once, where it first arrived (at-least-once delivery may repeat some)."""
    seen, first = set(), []
    for record in records:
        if record[key] not in seen:
            seen.add(record[key])
            first.append(record)
    return first
