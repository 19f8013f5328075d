"""Server-sent events of newly ingested records, for /v2/activity-log/realtime.

Every stream polls the database for records with an id above the last one it sent, so a
record reaches every stream whichever worker process ingested it. SQLite commits writers one
at a time and ids are AUTOINCREMENT, so ids become visible in increasing order: a stream that
has sent id N has seen every committed record up to N.
"""

import json
import socket
import threading
import time

from flask import Response, g, request

import models
from schemas.records import query_data

from . import metrics
from .errors import ApiError, ErrorCode
from .requests import hung_up

POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0
# How often a stream asks whether its key still lives: revoking a key ends its streams within this.
KEY_CHECK_SECONDS = 2.0

# Open streams of this process, one semaphore per configured limit.
_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


def _semaphore(limit: int) -> threading.BoundedSemaphore:
    with _slots_lock:
        return _slots.setdefault(limit, threading.BoundedSemaphore(limit))


def event_stream(filters, last_id: int | None, max_streams: int) -> Response:
    """The streaming response; a 503 when this process already serves `max_streams`."""
    slots = _semaphore(max_streams)
    if not slots.acquire(blocking=False):
        raise ApiError(ErrorCode.UNAVAILABLE, "Too many realtime streams; try again later.")
    metrics.stream_opened()

    def release():
        metrics.stream_closed()
        slots.release()

    try:
        if last_id is None:
            last_id = models.newest_id()
        peer = request.environ.get("gunicorn.socket")
        key_id = g.principal.key_id
        response = Response(_events(filters, last_id, peer, key_id), mimetype="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"  # let nginx pass events through at once
        # Runs when the server closes the response: on the client's disconnect too, even if
        # the generator never started.
        response.call_on_close(release)
    except BaseException:
        release()
        raise
    return response


def _events(filters, last_id: int, peer: socket.socket | None, key_id: int | None):
    yield ": connected\nretry: 1000\n\n"
    last_write = last_check = time.monotonic()
    with models.connection():
        while True:
            if time.monotonic() - last_check >= KEY_CHECK_SECONDS:
                last_check = time.monotonic()
                if not models.key_is_live(key_id):  # revoked meanwhile: the stream ends
                    yield "event: revoked\ndata: the API key of this stream was revoked\n\n"
                    return
            rows, newest = models.records_after(filters, last_id)
            for row, record in zip(rows, query_data(rows), strict=True):
                data = json.dumps(record, separators=(",", ":"))
                yield f"id: {row.id}\ndata: {data}\n\n"
                last_write = time.monotonic()
            if newest != last_id:
                last_id = newest
                continue
            if time.monotonic() - last_write >= KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            if hung_up(peer):
                return
            time.sleep(POLL_SECONDS)
