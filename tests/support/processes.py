"""The processes the tests start: waited for until they are ready, and stopped, one way for
every server, program and feed."""

import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable


def started(process: subprocess.Popen, ready: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Whether `ready()` came true within `timeout` seconds while the process ran: False when it
    exited first (its `poll()` says so) or the time ran out, for the caller to say which."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(interval)
    return False


def listening(port: int, timeout: float = 1) -> bool:
    """Whether something accepts TCP connections on this loopback port."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        return True
    except OSError:
        return False


def stop(process: subprocess.Popen, sig: int = signal.SIGTERM, *, timeout: float = 15, group: bool = False) -> int:
    """`sig` (SIGTERM by default, as systemd stops a service), SIGKILL if it has not exited within
    `timeout`, then reaped; its exit status. With `group` both go to its whole session (it was
    started with start_new_session): what it started may outlive it (gunicorn's workers, a
    browser's renderers), so what is left of the session is SIGKILLed even when it exited."""
    for step, wait in ((sig, timeout), (signal.SIGKILL, None)):
        if not group and process.poll() is not None:
            break
        try:
            if group:
                os.killpg(process.pid, step)
            else:
                process.send_signal(step)
        except ProcessLookupError:  # the session is gone: nothing of it is left to stop
            break
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    return process.wait()


def user_exists(name: str) -> bool:
    """Whether this system has the user (a program a test starts as root runs as its own user)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
