"""Writers of one SQLite file taking turns promptly, batches being stored first.

SQLite has one write lock per file, and a writer that finds it taken waits by sleeping and
trying again: 1, 2, 5, 10, 15, 20, 25 ms and on (its busy handler), so it wakes on average
several milliseconds after the lock came free. Here writers queue before they begin: the threads
of a process on a lock of their own, the processes on an advisory lock of a file beside the
database (`<database>-writers`, flock), looked at every fraction of a millisecond; SQLite's lock
is then nearly always free when BEGIN IMMEDIATE asks for it. A writer that does not queue (a
program of another kind) is waited for as before; one that holds its turn past the wait given
is not waited for any longer here: BEGIN IMMEDIATE and busy_timeout decide as they did.

Ingest requests that are reading or writing a batch say so (`storing`: a shared lock on
`<database>-storing`), and the counting process's writes, which can come at any moment, let them
go first (`yield_to_storing`), as a batch waiting for them was a sizeable share of its request's
time (the figures: BENCHMARKS.md, "Figures behind the code's comments"). A write begun just
after a batch's commit is done while the next batch is still being read; one begun while a
batch is being read would hold it back once it is ready to be written.
"""

import fcntl
import os
import threading
import time
from contextlib import contextmanager

# How often a process waiting looks again, at first and at most.
_FIRST_LOOK = 0.0002
_LAST_LOOK = 0.002
_owning = threading.Lock()


class WriteTurns:
    """The turns of the writers of the SQLite file at `path`. The files are opened for each turn
    and look, not kept open: a process (a test run) may open many databases."""

    def __init__(self, path: str):
        self.writers = f"{path}-writers"
        self.storing_path = f"{path}-storing"
        self.counting_path = f"{path}-counting"
        self._pid = None
        self._threads = None  # this process's writers queue here first
        self._counter = None
        self._storers = 0  # this process's batches being stored
        self._storing = None  # the open storing file while it has any

    @contextmanager
    def turn(self, seconds: float):
        """A block run in this writer's turn, waiting at most `seconds` for it (then run anyway)."""
        self._own()
        if not self._threads.acquire(timeout=seconds):
            yield
            return
        try:
            file = _open(self.writers)
            try:
                if file is not None:
                    _lock(file, time.monotonic() + seconds)
                yield  # the lock goes with the file's closing
            finally:
                if file is not None:
                    os.close(file)
        finally:
            self._threads.release()

    @contextmanager
    def storing(self):
        """A block that reads and writes a batch of records (see yield_to_storing)."""
        self._own()
        with self._counter:
            if self._storers == 0:
                self._storing = _open(self.storing_path)
                if self._storing is not None:
                    try:
                        fcntl.flock(self._storing, fcntl.LOCK_SH)  # only ever held exclusive for a look
                    except OSError:  # no locks on this file system: nothing yields to the batch
                        os.close(self._storing)
                        self._storing = None
            self._storers += 1
        try:
            yield
        finally:
            with self._counter:
                self._storers -= 1
                if self._storers == 0 and self._storing is not None:
                    os.close(self._storing)
                    self._storing = None

    @contextmanager
    def counting_turn(self):
        """Whether this process has the counting's turn (`<database>-counting`, flock) for the
        block: one process counts at a time, as every other's count of the same records would
        only be thrown away. The lock goes with the file, so a process that dies counting holds
        nobody back. Without locks on the file system every process counts (the surplus counts
        are thrown away: nothing is counted twice)."""
        file = _open(self.counting_path)
        try:
            yield file is None or _take(file) is not False
        finally:
            if file is not None:
                os.close(file)

    def yield_to_storing(self, seconds: float, stop):
        """Wait, at most `seconds` and while `stop()` is false, for a moment when a write begun
        now holds no batch back: none is being stored, or one is being written (a write queued
        now follows its commit)."""
        deadline = time.monotonic() + seconds
        pause = _FIRST_LOOK
        while _held(self.storing_path) and not _held(self.writers) and time.monotonic() < deadline and not stop():
            time.sleep(pause)
            pause = min(pause * 2, _LAST_LOOK)

    def _own(self):
        with _owning:
            if self._pid != os.getpid():  # gunicorn forks: a child starts with none held
                self._threads, self._counter = threading.Lock(), threading.Lock()
                self._storers, self._storing = 0, None
                self._pid = os.getpid()


def _open(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None  # a read-only directory: SQLite's own waiting only


def _take(file: int) -> bool | None:
    """Take the file's lock if nobody holds it: True taken, False held by another, None when
    the file system has no locks (ENOLCK)."""
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def _lock(file: int, deadline: float) -> bool:
    pause = _FIRST_LOOK
    while (taken := _take(file)) is False:
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _LAST_LOOK)
    return bool(taken)  # no locks on this file system: SQLite's own waiting only


def _held(path: str) -> bool:
    """Whether anyone (this process too) holds the file at `path` (a look: taken and given back)."""
    file = _open(path)
    if file is None:
        return False
    try:
        return _take(file) is False  # without locks on the file system nobody is seen holding it
    finally:
        os.close(file)
