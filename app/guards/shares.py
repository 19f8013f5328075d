"""Fair shares: a cap on the expensive requests one key has running at once in a worker
process, so that one key cannot take every thread from the others."""

import threading
from collections import Counter

from flask import current_app, g, request

from app.errors import ApiError, ErrorCode

# Operations whose cost grows with the records they read or delete: statistics, the activity
# log's pages, CSV export and deletion, client deletion, data availability. Cheap lookups (the
# client list, keys, tokens) and ingest (bounded by its batch) are not counted; realtime
# streams have their own cap.
EXPENSIVE_BLUEPRINTS = ("statistics", "data_availability")
EXPENSIVE = {
    "activity_log.list_records",
    "activity_log.export_csv",
    "activity_log.delete_records",
    "clients.delete_clients",
}
RETRY_AFTER_SECONDS = 2


def init_app(app):
    app.before_request(_take)
    app.after_request(_hand_over)
    app.teardown_request(_give_back)


def is_expensive(endpoint: str | None) -> bool:
    return endpoint is not None and (endpoint in EXPENSIVE or endpoint.split(".")[0] in EXPENSIVE_BLUEPRINTS)


class Shares:
    """Expensive requests running per key; the operator key counts as a key of its own."""

    def __init__(self):
        self._running = Counter()
        self._lock = threading.Lock()

    def take(self, holder, limit: int) -> "Share | None":
        with self._lock:
            if self._running[holder] >= limit:
                return None
            self._running[holder] += 1
        return Share(self, holder)

    def give_back(self, holder):
        with self._lock:
            self._running[holder] -= 1
            if not self._running[holder]:
                del self._running[holder]


class Share:
    """One running request's share, given back once, whichever way the request ends."""

    def __init__(self, shares: Shares, holder):
        self.shares, self.holder, self._held = shares, holder, True
        self._lock = threading.Lock()

    def give_back(self):
        with self._lock:
            held, self._held = self._held, False
        if held:
            self.shares.give_back(self.holder)


def _take():
    limit = current_app.config["ANALYTICS_MAX_EXPENSIVE_PER_KEY"]
    if limit <= 0 or "principal" not in g or not is_expensive(request.endpoint):
        return
    key_id = g.principal.key_id
    share = current_app.extensions["guards"].shares.take("operator" if key_id is None else key_id, limit)
    if share is None:
        raise ApiError(
            ErrorCode.TOO_MANY_REQUESTS,
            f"This API key already has {limit} expensive requests (statistics, activity-log reads, exports, "
            f"deletions) running (ANALYTICS_MAX_EXPENSIVE_PER_KEY): retry when one has finished.",
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    g.share = share


def _hand_over(response):
    # A streamed answer (the CSV export) is still running when the request's teardown comes:
    # its share goes back once its body has no more to give, before the server writes the end
    # of the body: the client may ask again as soon as it has read that end, well before the
    # server closes the response. A hang-up gives it back when the response is closed.
    share = g.pop("share", None)
    if share is not None:
        if response.is_streamed:
            response.response = _UntilExhausted(response.response, share.give_back)
            response.call_on_close(share.give_back)
        else:
            share.give_back()
    return response


class _UntilExhausted:
    """A response body that calls `done` when its last part has been taken."""

    def __init__(self, body, done):
        self._body, self._parts, self._done = body, iter(body), done

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._parts)
        except StopIteration:
            self._done()
            raise

    def close(self):
        # Closing the body ends the request's context (stream_with_context) and its reads.
        if hasattr(self._body, "close"):
            self._body.close()


def _give_back(exc):
    share = g.pop("share", None)
    if share is not None:
        share.give_back()
