"""Realtime streams a worker process serves: at most ANALYTICS_MAX_STREAMS_PER_KEY per key (then
a 429) and ANALYTICS_MAX_STREAMS in all (then a 503), since each holds a thread while open."""

import threading
from collections.abc import Callable

from app import metrics
from app.errors import ApiError, ErrorCode

# Seconds a client refused for its key's share of streams is told to wait.
RETRY_AFTER_SECONDS = 30


class Streams:
    """Open streams of this process, in all and per key id (None: the operator key)."""

    def __init__(self):
        self._open = 0
        self._per_key: dict[int | None, int] = {}
        self._lock = threading.Lock()

    def take(self, key_id: int | None, per_key: int, limit: int) -> Callable[[], None]:
        """A slot for one stream of `key_id`, or the ApiError refusing it; the slot goes back
        when the returned function is called (once)."""
        with self._lock:
            if self._per_key.get(key_id, 0) >= per_key:
                raise ApiError(
                    ErrorCode.TOO_MANY_STREAMS,
                    f"This API key already has {per_key} realtime streams open (ANALYTICS_MAX_STREAMS_PER_KEY); "
                    "close one or try again later.",
                    {"Retry-After": str(RETRY_AFTER_SECONDS)},
                )
            if self._open >= limit:
                raise ApiError(ErrorCode.UNAVAILABLE, "Too many realtime streams; try again later.")
            self._open += 1
            self._per_key[key_id] = self._per_key.get(key_id, 0) + 1
        metrics.stream_opened()
        held = [True]

        def give_back():
            with self._lock:
                if not held[0]:
                    return
                held[0] = False
                self._open -= 1
                self._per_key[key_id] -= 1
                if not self._per_key[key_id]:
                    del self._per_key[key_id]
            metrics.stream_closed()

        return give_back
