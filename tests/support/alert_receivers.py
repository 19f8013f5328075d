"""Real receivers for what the service sends out: an HTTP server that keeps every POST (a
webhook's body and headers), and an SMTP server (aiosmtpd) that keeps every message."""

import email
import email.policy
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from aiosmtpd.controller import Controller

from support.servers import free_port, refuse_in_fast_lane


class HttpReceiver:
    """POSTs to any path answered 200 and kept as (headers, body); stop() and start() again
    on the same port make it unreachable for a while."""

    def __init__(self):
        refuse_in_fast_lane("an HTTP receiver")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.received = []
        self.server = None
        self.start()

    def start(self):
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append((self.headers, body))  # names compared case-insensitively
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class SmtpReceiver:
    """A real SMTP server on loopback; `messages` holds each one received, parsed."""

    def __init__(self):
        refuse_in_fast_lane("an SMTP server")
        self.messages = []
        messages = self.messages

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                messages.append(email.message_from_bytes(envelope.content, policy=email.policy.default))
                return "250 OK"

        self.port = free_port()
        self.url = f"mailto://127.0.0.1:{self.port}?from=alerts@example.com&to=ops@example.com"
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def texts(self) -> list[str]:
        return [message.get_body(("plain",)).get_content() for message in self.messages]

    def stop(self):
        self.controller.stop()
