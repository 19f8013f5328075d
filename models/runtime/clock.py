"""The clock: epoch milliseconds, the one time unit of the store, the wire and the feeds."""

import contextvars
import time

# "Now" as a request sees it: read once when the request starts, so that every relative or
# default time of one request (startTime=-24h, endTime=now, the default end of a window) is
# relative to the same instant.
_PINNED: contextvars.ContextVar[int | None] = contextvars.ContextVar("request_now_ms", default=None)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pin_request_now() -> None:
    """Read the clock for the request starting (see request_now_ms)."""
    _PINNED.set(now_ms())


def request_now_ms() -> int:
    """The time the current request started (outside a request: now)."""
    pinned = _PINNED.get()
    return now_ms() if pinned is None else pinned
