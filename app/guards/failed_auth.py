"""Failed authentications per client address: past the free ones a minute, each further
failure is a 429 with a Retry-After, its answer held back without holding a thread."""

import logging
import math
import threading
import time
from collections import defaultdict, deque

from flask import current_app, request

from app.errors import ApiError, ErrorCode
from app.requests import hold_answer

log = logging.getLogger(__name__)


def counted(failure: ApiError) -> ApiError:
    """A failed authentication, counted for its address: past the free ones, a 429 whose
    answer is held back (app/worker.py) rather than given at once."""
    attempts = current_app.extensions["guards"].failed_auth
    wait = attempts.count(request.remote_addr or "")
    if not wait:
        return failure
    hold_answer(attempts.hold)
    return ApiError(
        ErrorCode.TOO_MANY_FAILURES,
        f"Too many failed authentications from this address: retry in {wait} s.",
        headers={"Retry-After": str(wait)},
    )


class FailedAttempts:
    """Failed authentications per source address over the last minute. Past `free` of them,
    each further failure is a 429 with a Retry-After, answered after `hold` seconds. The pause
    holds no thread (a sleeping thread is a thread an attacker holds, and enough of them
    starve everyone); it makes a client that guesses in a loop guess once per pause and
    connection, where answers given at once let a few hundred connections queue thousands of
    refusals a second in front of every valid request. The key is always checked first, so a
    valid key is never delayed or refused."""

    def __init__(self, free: int = 10, window: float = 60.0, hold: float = 1.0):
        self.free, self.window, self.hold = free, window, hold
        self._seen: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()

    def count(self, address: str) -> int:
        """Count one failure; the seconds to wait before trying again, or 0 within the free ones."""
        now = time.monotonic()
        with self._lock:
            seen = self._seen[address]
            while seen and now - seen[0] > self.window:
                seen.popleft()
            if len(seen) < self.free + 1000:  # enough to know the address is over; bounded memory
                seen.append(now)
            failures = len(seen)
            wait = math.ceil(self.window - (now - seen[0])) if failures > self.free else 0
            if len(self._seen) > 10_000:  # forget idle addresses rather than grow forever
                for stale in [a for a, s in self._seen.items() if not s or now - s[-1] > self.window]:
                    del self._seen[stale]
        if failures == self.free + 1:  # once per address and minute, not once per failure
            log.warning("more than %d failed authentications in a minute from %s", self.free, address)
        return max(wait, 1) if failures > self.free else 0


