"""The dnstap collector: listens for resolvers' Frame Streams connections (Unix socket and/or
TCP), turns their messages into records and hands them to a sink in batches.

One asyncio loop reads every connection; the sink runs on one thread of its own, so a slow
sink never stops the reading. Records wait in memory (at most `max_pending`) while the sink
is slow or failing; past that, new ones are dropped and counted rather than making resolvers
wait: they would drop them anyway, since no resolver blocks on its dnstap output.
"""

import asyncio
import collections
import contextlib
import errno
import fcntl
import itertools
import os
import pwd
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable

from models.runtime.clock import now_ms
from models.runtime.process import quiet_garbage_collector

from .common import SkipRow
from .dnstap import Decoder
from .framestream import ProtocolError, data_frames
from .losses import REPORT_EVERY, Losses
from .sinks import Sink

RETRY_FIRST, RETRY_MAX = 0.5, 30.0  # seconds between deliveries to a failing sink
STOP_DEADLINE = 20.0  # seconds a stop may spend delivering what is left
# A stop reads on until the resolvers have sent nothing for DRAIN_QUIET seconds (at most
# DRAIN_MAX): what they flush just before it (BIND and Knot Resolver flush their dnstap output
# about once a second) is stored too, instead of being cut off with the connection.
DRAIN_QUIET = 1.5
DRAIN_MAX = 5.0
STATUS_EVERY = 300.0  # seconds between status lines while records flow
BACKLOG_BATCHES = 10  # a batch takes up to this many times --batch-size of the records waiting
# A batch that has not filled goes once the resolvers have sent nothing for BATCH_IDLE seconds
# (a query someone waits to see in the log), and at the latest BATCH_DELAY seconds after its
# oldest record (a trickle that never pauses). Resolvers send their dnstap in bursts (Unbound
# once a second or every 32 messages), so a pause means the burst is read whole; under load
# the stream never pauses and batches fill to --batch-size as before (BENCHMARKS.md, "Query
# to visible").
BATCH_IDLE = 0.05
BATCH_DELAY = 0.5


class Collector:
    def __init__(
        self,
        decoder: Decoder,
        sink: Sink,
        *,
        batch_size: int = 500,
        batch_delay: float = BATCH_DELAY,
        batch_idle: float = BATCH_IDLE,
        max_pending: int = 100_000,
        log: Callable[[str], None] = print,
    ):
        self.decoder = decoder
        self.sink = sink
        self.batch_size = batch_size
        self.batch_delay = batch_delay
        self.batch_idle = batch_idle
        self.max_pending = max_pending
        self.log = log
        self.pending: collections.deque[dict] = collections.deque()  # wire records, not validated yet
        self._clock = (0.0, 0)  # (monotonic, ms) of the last reading of the clock
        self.counts = collections.Counter()
        self._first_pending = 0.0  # monotonic time the oldest pending record arrived
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()  # asked to stop: no new connections, the open ones drain
        self._read_all = asyncio.Event()  # every connection closed: deliver the rest and end
        self._last_frame = 0.0  # monotonic time of the newest frame from any resolver
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self.losses = Losses(decoder.endpoint, sink.report_losses, log)

    async def run(self, unix_path: str | None = None, tcp: tuple[str, int] | None = None, mode: int = 0o660) -> int:
        """Serve until SIGTERM/SIGINT, then deliver what is pending; the exit status."""
        # The cyclic collector's full passes over the records waiting in memory paused the
        # reading long enough for a busy resolver's buffer to overflow.
        quiet_garbage_collector()
        # The delivery's threads (pickling a batch for the store's process) hand the
        # interpreter back to the reading more often than every 5 ms.
        sys.setswitchinterval(0.001)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self._stop.set)
        servers, unix = [], None
        try:
            if unix_path:
                unix = OwnSocket(unix_path, mode)
                try:
                    servers.append(await asyncio.start_unix_server(self._serve, sock=unix.socket))
                except BaseException:
                    unix.socket.close()
                    raise
                self.log(f"Listening on {unix_path}")
                if warning := _only_root_connects(unix_path):
                    self.log(warning)
            if tcp:
                with _naming(f"{tcp[0]}:{tcp[1]}"):
                    servers.append(await asyncio.start_server(self._serve, host=tcp[0], port=tcp[1]))
                self.log(f"Listening on {tcp[0]}:{tcp[1]}")
            self.log(
                f"Storing batches of up to {self.batch_size} records (--batch-size), "
                f"{BACKLOG_BATCHES * self.batch_size} when records pile up behind the store"
            )
            deliveries = asyncio.create_task(self._deliver_loop())
            reports = asyncio.create_task(self._report_loop())
            await self._stop.wait()
        finally:
            # The path goes as the listening stops, not after the drain: a collector started
            # meanwhile (a restart) finds it free, and a resolver's reconnection reaches the new one.
            if unix is not None:
                unix.release()
            for server in servers:
                server.close()
        await self._drain()
        # Hanging up ends each connection's reading as an end of stream would.
        for writer in self._connections.values():
            writer.close()
        await asyncio.gather(*self._connections, return_exceptions=True)
        self._read_all.set()
        # A sink that hangs must not hold the stop forever either.
        await asyncio.wait({deliveries}, timeout=STOP_DEADLINE + 5)
        deliveries.cancel()
        reports.cancel()
        await asyncio.wait({_in_thread(self._report_losses)}, timeout=15)
        lost = len(self.pending)
        self.log(self.describe() + (f"; {lost} records NOT delivered (the sink failed or hung)" if lost else ""))
        return 1 if lost else 0

    async def _drain(self) -> None:
        """Read on while resolvers still send (see DRAIN_QUIET)."""
        deadline = time.monotonic() + DRAIN_MAX
        while self._connections:
            now = time.monotonic()
            left = min(DRAIN_QUIET - (now - self._last_frame), deadline - now)
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.1))

    async def _report_loop(self) -> None:
        while True:
            await asyncio.sleep(REPORT_EVERY)
            await _in_thread(self._report_losses)

    def _report_losses(self) -> None:
        """Log and report the losses seen here and by the decoder (see feeds/losses.py)."""
        self.losses.set("collector-queue", self.counts["dropped"])
        self.losses.set("resolver", self.decoder.dropped)
        self.losses.set("unanswered", self.decoder.unanswered)
        self.losses.flush()

    def describe(self) -> str:
        c = self.counts
        text = f"{c['delivered']} records delivered, {c['connections']} resolver connections"
        skipped = {name: count for name, count in sorted(c.items()) if name.startswith(("unreadable", "rejected"))}
        if skipped:
            text += "; skipped " + ", ".join(f"{count} {name}" for name, count in skipped.items())
        if c["dropped"]:
            text += f"; {c['dropped']} dropped while the sink was behind"
        if self.decoder.dropped:
            text += f"; {self.decoder.dropped} responses the resolver dropped"
        if self.decoder.unanswered:
            text += f"; {self.decoder.unanswered} queries never answered in the stream"
        return text

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections[task] = writer
        self.counts["connections"] += 1
        peer = writer.get_extra_info("peername")
        peer = f"from {peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "on the Unix socket"
        self.log(f"A resolver connected {peer}")
        try:
            async for payload in data_frames(reader, writer):
                self._last_frame = time.monotonic()
                self._take(payload)
        except ProtocolError as exc:
            self.log(f"Dropped a resolver's connection {peer}: {exc}")
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.pop(task, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _take(self, payload: bytes) -> None:
        try:
            record = self.decoder.record(payload)
        except SkipRow:
            self.counts["unreadable"] += 1
            return
        if record is None:
            return
        # Validated where the batch is stored (the sink: the local store's own process), one
        # by one, so that the reading here spends nothing on it; a response without a time of
        # its own is stamped with its arrival now.
        if "timestamp" not in record:
            record["timestamp"] = self._received_ms()
        if len(self.pending) >= self.max_pending:
            self.counts["dropped"] += 1
            if self.counts["dropped"] == 1:
                self.log(f"{self.max_pending} records wait for the sink: dropping new ones until it catches up")
            return
        if not self.pending:
            self._first_pending = time.monotonic()
            self._wake.set()  # the delivery loop now has a batch to time
        self.pending.append(record)
        if len(self.pending) >= self.batch_size:
            self._wake.set()

    def _received_ms(self) -> int:
        """The time of arrival, read from the clock at most every 10 ms (it stamps records
        without a timestamp of their own; a resolver's dnstap has one on every response)."""
        now = time.monotonic()
        if now - self._clock[0] > 0.01:
            self._clock = (now, now_ms())
        return self._clock[1]

    async def _deliver_loop(self) -> None:
        """Deliver a batch when it is full, when the resolvers have paused for `batch_idle`, or
        when its oldest record has waited `batch_delay`; once every connection is closed after
        a stop, deliver the rest within STOP_DEADLINE."""
        retry = RETRY_FIRST
        failing = False
        last_status = time.monotonic()
        deadline = None
        while True:
            if self._read_all.is_set():
                if not self.pending:
                    return
                deadline = deadline or time.monotonic() + STOP_DEADLINE
                if time.monotonic() > deadline:
                    return
            elif len(self.pending) < self.batch_size:
                due = self._due()
                if due is None or due > time.monotonic():
                    await self._wait(due, self._wake, self._read_all)
                    continue
            # What piled up behind a slow store goes in larger batches (a commit, and its sync
            # to disk, per batch): the store catches up instead of falling further behind.
            batch = list(itertools.islice(self.pending, BACKLOG_BATCHES * self.batch_size))
            try:
                rejected = await _in_thread(self.sink.deliver, batch)
            except Exception as exc:  # any failure of the sink: keep the batch and try again
                if not failing:
                    self.log(f"The sink failed ({exc.__class__.__name__}: {exc}); retrying, records are kept meanwhile")
                failing = True
                # Not woken by full batches: a failing sink is retried at its own pace.
                await self._wait(time.monotonic() + retry, *(() if self._read_all.is_set() else (self._read_all,)))
                retry = min(retry * 2, RETRY_MAX)
                continue
            for _ in batch:
                self.pending.popleft()
            self._first_pending = time.monotonic()
            for name, count in rejected.items():
                self.counts[f"rejected ({name})"] += count
            self.counts["delivered"] += len(batch) - sum(rejected.values())
            if failing:
                self.log("The sink works again")
            failing, retry = False, RETRY_FIRST
            if time.monotonic() - last_status > STATUS_EVERY:
                self.log(self.describe())
                last_status = time.monotonic()

    def _due(self) -> float | None:
        """When the records waiting go as a batch that has not filled (monotonic), None if none wait."""
        if not self.pending:
            return None
        # _last_frame, not the newest record's arrival: a query message that makes no record
        # (its response does) still says the stream is busy.
        return min(self._first_pending + self.batch_delay, self._last_frame + self.batch_idle)

    async def _wait(self, due: float | None, *events: asyncio.Event) -> None:
        """Wait until `due` (monotonic; None: no limit) or one of `events`."""
        self._wake.clear()
        waits = [asyncio.ensure_future(event.wait()) for event in events]
        timeout = None if due is None else max(due - time.monotonic(), 0)
        if not waits:
            await asyncio.sleep(timeout or 0)
            return
        _, undone = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for task in undone:
            task.cancel()


def _in_thread(function, *args) -> asyncio.Future:
    """Run `function` on a daemon thread of its own: unlike an executor's thread, one that
    never returns does not keep the process from exiting."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error):
        if not future.done():
            future.set_exception(error) if error else future.set_result(result)

    def work():
        try:
            outcome = (function(*args), None)
        except Exception as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=work, daemon=True, name="sink").start()
    return future


@contextlib.contextmanager
def _naming(address: str):
    """OSErrors that say which address they are about."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise OSError(f"{address} is in use: another collector (or another program) listens on it") from None
        raise OSError(f"{address}: {exc.strerror or exc}") from None


class OwnSocket:
    """A Unix socket this collector made at `path`. It removes the path only while the path is
    still that socket (the same device and inode as right after the bind): a collector started
    while this one stops may have put its own there.

    Collectors decide on a path, and bind or remove it, one at a time (a lock on its folder): a
    live socket is refused, a stale one (left by a collector that died) replaced. What the lock
    does not cover: a program that is not this collector (or an older version of it) making or
    removing the path meanwhile, which only the collector's own stop can tell (it then leaves
    the path alone)."""

    def __init__(self, path: str, mode: int):
        self.path = path
        with _folder_lock(path):
            self.socket = _bind_unix(path)
            try:
                os.chmod(path, mode)  # before listen(): no resolver connects before it may
                self._made = _identity(path)
                # Listening before the lock is let go: a socket bound but not listening refuses a
                # connection as a stale one does, and a collector starting then would replace it.
                self.socket.listen(socket.SOMAXCONN)
            except OSError:
                self.socket.close()
                raise

    def release(self) -> None:
        """Remove the path if it is still this socket."""
        with contextlib.suppress(OSError), _folder_lock(self.path):  # the folder went: so did the path
            if _identity(self.path) == self._made:
                os.unlink(self.path)


def _identity(path: str) -> tuple[int, int]:
    found = os.stat(path)
    return found.st_dev, found.st_ino


@contextlib.contextmanager
def _folder_lock(path: str):
    """Held while a collector decides on the socket at `path` and binds or removes it."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise OSError(
            f"{path}: its folder {folder} does not exist (make it, owned by the collector's user and open to the "
            "resolver's group; the systemd unit's RuntimeDirectory= makes it)"
        ) from None
    except PermissionError:
        raise OSError(_not_permitted(path, folder)) from None
    except OSError as exc:
        raise OSError(f"{path}: its folder {folder}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # which releases the lock


def _bind_unix(path: str) -> socket.socket:
    """A Unix socket bound to `path`, replacing a stale one there; not listening yet."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.bind(path)
        except PermissionError:
            raise OSError(_not_permitted(path, os.path.dirname(os.path.abspath(path)))) from None
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise OSError(f"{path}: {exc.strerror or exc}") from None
            _clear_stale_socket(path)
            with _naming(path):
                sock.bind(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _clear_stale_socket(path: str) -> None:
    """Remove a socket left by a collector that died (nothing listens: a connection is refused);
    refuse to take over a live one or a file that is not a socket."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise OSError(f"{path} exists and is not a socket")
    with socket.socket(socket.AF_UNIX) as probe:
        # A live listener whose backlog is full makes a connection wait, not fail.
        probe.settimeout(2)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)
            return
        except TimeoutError:
            pass
        except OSError as exc:
            raise OSError(f"{path}: cannot tell whether a collector listens on it ({exc.strerror or exc})") from None
    raise OSError(f"{path}: another collector is listening on it; this one did not start")


def _not_permitted(path: str, folder: str) -> str:
    """The error of a collector whose user may not make its socket in `folder`, with the fix."""
    user = _user_name(os.geteuid())
    return (
        f"{path}: permission denied: the collector runs as {user}, who may not make files in {folder}; "
        f"make the folder {user}'s and open to the resolver's group (install -d -m 0750 -o {user} -g GROUP "
        f"{folder}) or run the collector as the folder's owner"
    )


def _only_root_connects(path: str) -> str | None:
    """A warning when the socket lets only root in: resolvers run as users of their own (Debian's
    unbound, bind, knot-resolver, _dnsdist) and would be refused without a word from either side."""
    found = os.stat(path)
    if found.st_uid != 0 or found.st_gid != 0 or found.st_mode & 0o006:
        return None
    return (
        f"WARNING: only root may connect to {path} (root:root, mode {stat.S_IMODE(found.st_mode):o}); a resolver "
        "running as its own user is refused: give --socket-mode 666 with a folder only the resolver's group "
        "reaches, or run the collector with the resolver's group"
    )


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
