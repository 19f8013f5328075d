"""The gunicorn worker: gthread's, plus two things done in its event loop instead of a thread.

Reading a request's head. gthread hands a connection to a thread as soon as its first bytes
arrive, and the thread then reads the head itself, blocking: a client sending one header line
every few seconds held a thread for as long as it liked, and 70 of them stopped a server of
64 threads. Here the event loop reads the head (the request line and headers), without
blocking, until it is whole, and only then hands the connection to a thread; a head not
whole within ANALYTICS_HEADER_SECONDS (10) closes the connection, as nginx's
client_header_timeout does. (Bodies are still read by the thread: the reverse proxy in front
buffers them, see README "Slow senders and the front door".)

Holding an answer back. A refused authentication past the free ones is answered only after a
pause, so that a client guessing keys in a loop makes one guess per pause and connection
instead of thousands a second (which, even answered at once, queue in front of every valid
request). Sleeping in the request's thread would hand the attacker a thread per connection;
here the thread writes the answer into a buffer and moves on, and the event loop sends it when
the pause is over. The app asks for it through the request's socket
(`environ["gunicorn.socket"].hold_answer(seconds)`); under any other server that method is
absent and the answer goes at once.

gunicorn.conf.py loads this file by its path, not as part of the `app` package: importing that
package would load the whole application (and prometheus-client, before its multiprocess
folder is set) in gunicorn's master process.
"""

import errno
import heapq
import itertools
import os
import re
import selectors
import socket
import time
from concurrent import futures
from functools import partial

from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import TConn, ThreadWorker

# Held answers per worker: half its worker_connections (1,000), for a worker that reaches
# that stops accepting anyone. Past it an answer goes at once (and guessing loops on more
# connections than that run at full speed: a connection flood, for the proxy's limit_conn).
HELD_SHARE = 0.5
# After a last answer, a connection is closed once the client has closed its end too (or after
# this long), as gunicorn does (util.close_graceful: else unread request bytes make the kernel
# reset the connection and cut the answer), but waited for in the loop rather than blocking it
# (a client that never reads nor closes held the whole worker for 2 s per connection).
LINGER_SECONDS = 2.0
MAX_LINGERING = 256
MAX_DRAIN = 64 * 1024
# A held answer is a short error; a longer one (never expected) is not worth buffering.
MAX_HELD_BYTES = 64 * 1024
# How long a request's head may take to arrive, and how much of it the loop reads: past that
# the thread takes over, and gunicorn's own limits (a 1 MiB request line, 100 header fields of
# 8 KiB, see gunicorn.conf.py) refuse it.
HEAD_SECONDS = float(os.environ.get("ANALYTICS_HEADER_SECONDS", "10"))
MAX_HEAD = 2 * 1024 * 1024
# The empty line that ends a head (CRLF, or a bare LF, which gunicorn judges for itself).
_HEAD_END = re.compile(rb"\n\r?\n")


def _receive(sock) -> bytes | None:
    """What a non-blocking socket has: None if nothing yet, b"" once the peer closed (or the
    connection failed)."""
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


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

    def sendfile(self, *args, **kwargs):
        self._release_into_socket()  # what was buffered goes before the file
        return self._sock.sendfile(*args, **kwargs)

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


class Connection(TConn):
    """gthread's connection, whose graceful close lingers in the worker's loop."""

    def __init__(self, worker, *args):
        super().__init__(*args)
        self.worker = worker
        self.drained = 0

    def close(self, graceful=False):
        if graceful:
            self.worker.linger(self)
        else:
            super().close()


class HoldingWorker(ThreadWorker):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._held = []  # heap of (due, sequence, conn, Held)
        self._max_held = int(self.cfg.worker_connections * HELD_SHARE)
        self._sequence = itertools.count()
        self._reading = {}  # connections whose head is being read: deadline, oldest first
        self._lingering = {}  # connections closing: deadline, oldest first

    def accept(self, listener):
        """Runs in the event loop: gthread's, with a Connection."""
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                return
            raise
        self.nr_conns += 1
        self.enqueue_req(Connection(self, self.cfg, sock, client, listener.getsockname()))

    def linger(self, conn):
        """Close `conn` gracefully without blocking the loop (see LINGER_SECONDS)."""
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            conn.sock.close()
            return
        if len(self._lingering) >= MAX_LINGERING:
            conn.sock.close()
            return
        conn.sock.setblocking(False)
        self._lingering[conn] = time.monotonic() + LINGER_SECONDS
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_lingering, conn))

    def _on_lingering(self, conn, sock):
        data = _receive(sock)
        if data is None:
            return
        conn.drained += len(data)
        if not data or conn.drained > MAX_DRAIN:
            self._closed(conn)

    def _closed(self, conn):
        del self._lingering[conn]
        self.poller.unregister(conn.sock)
        conn.sock.close()

    def enqueue_req(self, conn):
        """Runs in the event loop for every request: a thread gets it once its head is whole."""
        if not self._reads_head(conn):
            return super().enqueue_req(conn)
        conn.head = bytearray()
        conn.sock.setblocking(False)
        self._reading[conn] = time.monotonic() + HEAD_SECONDS
        self._read_head(conn, registered=False)

    def _reads_head(self, conn) -> bool:
        # TLS and HTTP/2 read their own first bytes in the thread; bytes gunicorn already holds
        # (a pipelined request) are read from its buffer, not the socket.
        if self.cfg.is_ssl or negotiation.prior_knowledge_allowed(self.cfg, conn.client):
            return False
        return conn.parser is None or not conn.parser.unreader.buf.getvalue()

    def _on_readable(self, conn, sock):
        self._read_head(conn, registered=True)

    def _read_head(self, conn, registered: bool):
        """Read what the socket has: a whole head goes to a thread, a closed connection is
        closed, and the loop waits for the rest of a head begun."""
        data = _receive(conn.sock)
        if data:
            start = max(0, len(conn.head) - 2)
            conn.head += data
            whole = _HEAD_END.search(conn.head, start) is not None or len(conn.head) >= MAX_HEAD
        if data is None or (data and not whole):
            if not registered:
                self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
            return
        if registered:
            self.poller.unregister(conn.sock)
        if not data:
            self._drop_reading(conn)
            return
        del self._reading[conn]
        super().enqueue_req(conn)

    def _drop_reading(self, conn):
        del self._reading[conn]
        self.nr_conns -= 1
        conn.close()

    def handle(self, conn):
        """Runs in a request thread: what the loop read of the request is read first."""
        head, conn.head = getattr(conn, "head", None), None
        if head:
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(bytes(head))
            conn.data_ready = True
        return super().handle(conn)

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
        if len(self._held) >= self._max_held or not self.alive:
            return self._send_held(conn, held)
        heapq.heappush(self._held, (held.due, next(self._sequence), conn, held))

    def wait_for_and_dispatch_events(self, timeout):
        now = time.monotonic()
        if self._held:
            timeout = min(timeout, self._held[0][0] - now)
        for waiting in (self._reading, self._lingering):
            if waiting:
                timeout = min(timeout, next(iter(waiting.values())) - now)
        super().wait_for_and_dispatch_events(max(0.0, timeout))
        now = time.monotonic()
        while self._held and (self._held[0][0] <= now or not self.alive):
            _, _, conn, held = heapq.heappop(self._held)
            self._send_held(conn, held)
        # Heads too slow to arrive; a stopping worker waits only for heads already begun.
        for conn, deadline in list(self._reading.items()):
            if deadline > now:
                if self.alive:
                    break  # oldest first: the others are younger
                if conn.head:
                    continue
            self.poller.unregister(conn.sock)
            self._drop_reading(conn)
        while self._lingering and next(iter(self._lingering.values())) <= now:
            self._closed(next(iter(self._lingering)))

    def _send_held(self, conn, held: Held):
        """Send without blocking the loop: a short answer fits the socket's buffer, and a
        connection that cannot take it whole at once is closed instead of waited for."""
        try:
            conn.sock.setblocking(False)
            sent = conn.sock.send(held.data)
            keepalive = held.keepalive and sent == len(held.data) and len(self.keepalived_conns) < self.max_keepalived
        except OSError:
            keepalive = False
        # gunicorn's own end of a request: keep the connection alive, or close and count it.
        done = futures.Future()
        done.set_result(keepalive)
        super().finish_request(conn, done)
