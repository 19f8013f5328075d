"""The gunicorn worker: gthread's, plus answers held back without a thread.

A refused authentication past the free ones is answered only after a pause, so that a client
guessing keys in a loop makes one guess per pause and connection instead of thousands a second
(which, even answered at once, queue in front of every valid request). Sleeping in the request's
thread would hand the attacker a thread per connection; here the thread writes the answer into
a buffer and moves on, and the worker's event loop sends it when the pause is over. The app asks
for it through the request's socket (`environ["gunicorn.socket"].hold_answer(seconds)`); under
any other server that method is absent and the answer goes at once.

gunicorn.conf.py loads this file by its path, not as part of the `app` package: importing that
package would load the whole application (and prometheus-client, before its multiprocess
folder is set) in gunicorn's master process.
"""

import heapq
import itertools
import time
from concurrent import futures

from gunicorn.workers.gthread import ThreadWorker

# Held answers per worker. Past it an answer goes at once: held connections count against
# worker_connections (1,000), and a worker that reaches that stops accepting anyone.
MAX_HELD = 256
# A held answer is a short error; a longer one (never expected) is not worth buffering.
MAX_HELD_BYTES = 64 * 1024


class HoldingSocket:
    """The request's socket as the response sees it: writes go to a buffer once the app has
    asked for the answer to be held, and through to the socket otherwise."""

    def __init__(self, sock):
        self._sock = sock
        self.seconds = 0.0
        self.buffer = bytearray()

    def hold_answer(self, seconds: float):
        self.seconds = max(self.seconds, seconds)

    def sendall(self, data):
        if self.seconds and len(self.buffer) + len(data) <= MAX_HELD_BYTES:
            self.buffer += data
            return
        self._release_into_socket()
        self._sock.sendall(data)

    def send(self, data):
        self.sendall(data)
        return len(data)

    def _release_into_socket(self):
        # Too long to hold: what was buffered goes first, and nothing more is held.
        if self.buffer:
            self._sock.sendall(bytes(self.buffer))
            self.buffer.clear()
        self.seconds = 0.0

    def __getattr__(self, name):
        return getattr(self._sock, name)  # fileno, recv, sendfile ...: the socket's own


class Held:
    """An answer written but not yet sent: its bytes, when they go, and whether the connection
    stays open after them."""

    def __init__(self, data: bytes, due: float, keepalive: bool):
        self.data, self.due, self.keepalive = data, due, keepalive


class HoldingWorker(ThreadWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._held = []  # heap of (due, sequence, conn, Held)
        self._sequence = itertools.count()

    def handle_request(self, req, conn):
        """Runs in a request thread: serve the request through a HoldingSocket."""
        real = conn.sock
        conn.sock = holding = HoldingSocket(real)
        try:
            keepalive = super().handle_request(req, conn)
        finally:
            conn.sock = real
        if holding.seconds and holding.buffer:
            return Held(bytes(holding.buffer), time.monotonic() + holding.seconds, keepalive)
        return keepalive

    def _keepalive_after(self, conn, keepalive):
        # A held answer's connection is drained like any other before it may be kept alive.
        if isinstance(keepalive, Held):
            keepalive.keepalive = super()._keepalive_after(conn, keepalive.keepalive)
            return keepalive
        return super()._keepalive_after(conn, keepalive)

    def finish_request(self, conn, fs):
        """Runs in the event loop when a request thread is done: a held answer waits there."""
        held = None if fs.cancelled() or fs.exception() is not None else fs.result()
        if not isinstance(held, Held):
            return super().finish_request(conn, fs)
        if len(self._held) >= MAX_HELD or not self.alive:
            return self._send_held(conn, held)
        heapq.heappush(self._held, (held.due, next(self._sequence), conn, held))

    def wait_for_and_dispatch_events(self, timeout):
        if self._held:
            timeout = max(0.0, min(timeout, self._held[0][0] - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)
        now = time.monotonic()
        while self._held and (self._held[0][0] <= now or not self.alive):
            _, _, conn, held = heapq.heappop(self._held)
            self._send_held(conn, held)

    def _send_held(self, conn, held: Held):
        """Send without blocking the loop: a short answer fits the socket's buffer, and a
        connection that cannot take it whole at once is closed instead of waited for."""
        try:
            conn.sock.setblocking(False)
            sent = conn.sock.send(held.data)
            keepalive = held.keepalive and sent == len(held.data)
        except OSError:
            keepalive = False
        # gunicorn's own end of a request: keep the connection alive, or close and count it.
        done = futures.Future()
        done.set_result(keepalive)
        super().finish_request(conn, done)
