"""The clock: epoch milliseconds, the one time unit of the store, the wire and the feeds."""

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
