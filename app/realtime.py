"""Server-sent events of newly ingested records, for /v2/activity-log/realtime.

Every stream polls the database for records with an id above the last one it examined, so a
record reaches every stream whichever worker process ingested it. Writers take turns and ids
are AUTOINCREMENT, so ids become visible in increasing order: a stream that has examined id N
has seen every committed record up to N. It tells the client N (an `id:` line without data)
when it moved on without an event, so a reconnect resumes from there.
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
# How often, at most, a stream tells its client how far it has read without an event to send.
POSITION_SECONDS = 1.0
# Seconds a client refused for its key's share of streams is told to wait.
RETRY_AFTER_SECONDS = 30
KEEPALIVE_SECONDS = 15.0
# How often a stream asks whether its key still lives: revoking a key ends its streams within this.
KEY_CHECK_SECONDS = 2.0

# Open streams of this process, one semaphore per configured limit.
_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


# Open streams of this process per key id (None: the operator key).
_per_key: dict[int | None, int] = {}


def _semaphore(limit: int) -> threading.BoundedSemaphore:
    with _slots_lock:
        return _slots.setdefault(limit, threading.BoundedSemaphore(limit))


def _take_key_slot(key_id: int | None, per_key: int) -> bool:
    with _slots_lock:
        if _per_key.get(key_id, 0) >= per_key:
            return False
        _per_key[key_id] = _per_key.get(key_id, 0) + 1
        return True


def _give_key_slot(key_id: int | None):
    with _slots_lock:
        _per_key[key_id] -= 1
        if not _per_key[key_id]:
            del _per_key[key_id]


def event_stream(filters, last_id: int | None, max_streams: int, per_key: int, backlog: int) -> Response:
    """The streaming response; a 429 when the key already has `per_key` streams open in this
    process, a 503 when this process already serves `max_streams`. A resume replays at most
    the newest `backlog` records."""
    key_id = g.principal.key_id
    if not _take_key_slot(key_id, per_key):
        raise ApiError(
            ErrorCode.TOO_MANY_STREAMS,
            f"This API key already has {per_key} realtime streams open (ANALYTICS_MAX_STREAMS_PER_KEY); "
            "close one or try again later.",
            {"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    slots = _semaphore(max_streams)
    if not slots.acquire(blocking=False):
        _give_key_slot(key_id)
        raise ApiError(ErrorCode.UNAVAILABLE, "Too many realtime streams; try again later.")
    metrics.stream_opened()

    def release():
        metrics.stream_closed()
        slots.release()
        _give_key_slot(key_id)

    try:
        skipped = None
        if last_id is None:
            last_id = models.committed_top()
        elif last_id < (oldest := models.committed_top() - backlog):
            skipped, last_id = (last_id, oldest), oldest
        peer = request.environ.get("gunicorn.socket")
        response = Response(_events(filters, last_id, peer, key_id, skipped), mimetype="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"  # let nginx pass events through at once
        # Runs when the server closes the response: on the client's disconnect too, even if
        # the generator never started.
        response.call_on_close(release)
    except BaseException:
        release()
        raise
    return response


def _events(filters, last_id: int, peer: socket.socket | None, key_id: int | None, skipped):
    yield ": connected\nretry: 1000\n\n"
    if skipped is not None:
        # Named, so EventSource's onmessage does not take it for a record; its id moves the
        # client's Last-Event-ID past the gap.
        after, upto = skipped
        data = json.dumps(
            {
                "afterId": after,
                "upToId": upto,
                "message": "Records up to this id were not replayed: a resume replays only the newest "
                "records (ANALYTICS_STREAM_BACKLOG).",
            },
            separators=(",", ":"),
        )
        yield f"event: skipped\nid: {upto}\ndata: {data}\n\n"
    told = last_id
    last_write = last_check = last_told = time.monotonic()
    with models.connection():
        while True:
            if time.monotonic() - last_check >= KEY_CHECK_SECONDS:
                last_check = time.monotonic()
                if not models.key_is_live(key_id):  # revoked meanwhile: the stream ends
                    yield "event: revoked\ndata: the API key of this stream was revoked\n\n"
                    return
            rows, examined = models.records_after(filters, last_id)
            for row, record in zip(rows, query_data(rows), strict=True):
                data = json.dumps(record, separators=(",", ":"))
                yield f"id: {row.id}\ndata: {data}\n\n"
                told = row.id
                last_write = time.monotonic()
            if examined != last_id:
                last_id = examined
                continue
            if told != last_id and time.monotonic() - last_told >= POSITION_SECONDS:
                yield f"id: {last_id}\n\n"  # no data: the client's Last-Event-ID moves, no event fires
                told, last_told = last_id, time.monotonic()
            if time.monotonic() - last_write >= KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
            if hung_up(peer):
                return
            time.sleep(POLL_SECONDS)
