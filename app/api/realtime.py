"""Server-sent events of newly ingested records, for /v2/activity-log/realtime.

Every stream polls the database for records with an id above the last one it examined, so a
record reaches every stream whichever worker process ingested it. Writers take turns and ids
are AUTOINCREMENT, so ids become visible in increasing order: a stream that has examined id N
has seen every committed record up to N. It tells the client N (an `id:` line without data)
when it moved on without an event, so a reconnect resumes from there.
"""

import json
import socket
import time

from flask import Response, current_app, g, request

import models.access.keys
import models.engine.database
from app.audit import Read
from app.requests import hung_up
from models.stores.bound import records
from schemas.records import query_data

POLL_SECONDS = 0.25
# How often, at most, a stream tells its client how far it has read without an event to send.
POSITION_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0
# How often a stream asks whether its key still lives: revoking a key ends its streams within this.
KEY_CHECK_SECONDS = 2.0


def event_stream(filters, last_id: int | None, max_streams: int, per_key: int, backlog: int) -> Response:
    """The streaming response; a 429 when the key already has `per_key` streams open in this
    process, a 503 when this process already serves `max_streams`. A resume replays at most
    the newest `backlog` records."""
    key_id = g.principal.key_id
    release = current_app.extensions["guards"].streams.take(key_id, per_key, max_streams)
    try:
        skipped = None
        if last_id is None:
            last_id = records().committed_top()
        elif last_id < (oldest := records().committed_top() - backlog):
            skipped, last_id = (last_id, oldest), oldest
        peer = request.environ.get("gunicorn.socket")
        read = Read("activity-log/realtime", filters, stream=True)
        response = Response(
            read.counted(_events(filters, last_id, peer, key_id, skipped), _record_events), mimetype="text/event-stream"
        )
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"  # let nginx pass events through at once
        # Runs when the server closes the response: on the client's disconnect too, even if
        # the generator never started.
        response.call_on_close(release)
        response.call_on_close(read.close)
    except BaseException:
        release()
        raise
    return response


def _record_events(chunk: str) -> int:
    """1 for the event of a record (an id and its data), else 0."""
    return int(chunk.startswith("id: ") and "\ndata: " in chunk)


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
    with models.engine.database.connection():
        while True:
            if time.monotonic() - last_check >= KEY_CHECK_SECONDS:
                last_check = time.monotonic()
                if not models.access.keys.key_is_live(key_id):  # revoked meanwhile: the stream ends
                    yield "event: revoked\ndata: the API key of this stream was revoked\n\n"
                    return
            rows, examined = records().records_after(filters, last_id)
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
