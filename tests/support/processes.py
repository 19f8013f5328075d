"""Stopping a process a test started: the one way every server, program and feed is stopped."""

import os
import signal
import subprocess


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
