"""Failed authentications per client address: past the free ones a minute, each further
failure is a 429 with a Retry-After (the address comes from X-Forwarded-For behind the proxy).
The rate of a guessing loop is capped in front, by nginx's limit_req (deploy/nginx-site.conf)."""

import logging
import math
import threading
import time
from collections import defaultdict, deque

from flask import current_app, request

from app.errors import ApiError, ErrorCode

log = logging.getLogger(__name__)


def counted(failure: ApiError) -> ApiError:
    """A failed authentication, counted for its address: past the free ones, a 429."""
    wait = current_app.extensions["guards"].failed_auth.count(request.remote_addr or "")
    if not wait:
        return failure
    return ApiError(
        ErrorCode.TOO_MANY_FAILURES,
        f"Too many failed authentications from this address: retry in {wait} s.",
        headers={"Retry-After": str(wait)},
    )


class FailedAttempts:
    """Failed authentications per source address over the last minute. Past `free` of them,
    each further failure is a 429 with a Retry-After: a client that guesses is told so, and
    its guesses stop being checked against the keys. The key is always checked first, so a
    valid key is never refused."""

    def __init__(self, free: int = 10, window: float = 60.0):
        self.free, self.window = free, window
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


