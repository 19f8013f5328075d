"""Counting stored records into the statistics' rollups behind the requests that stored them
(see models/rollups.py): a thread in every worker, woken by each batch the worker stores and
every few seconds for what other processes stored. The ingest request answers as soon as its
records are committed; the counting runs beside the next request, in another worker."""

import logging
import threading

import models.database
import models.rollups

# Also counts, this often, what other processes stored and no worker was woken for.
IDLE_SECONDS = 5.0
# After a failed count (the database gone, a disk full): how long before trying again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)
_stored = threading.Event()


def wake():
    """A batch was stored: count it."""
    _stored.set()


def start_background(app) -> threading.Thread:
    """Start this process's counting thread (gunicorn.conf.py starts one in every worker)."""
    thread = threading.Thread(target=_loop, args=(app,), name="counting", daemon=True)
    thread.start()
    return thread


def _loop(app):
    while True:
        _stored.wait(IDLE_SECONDS)
        _stored.clear()
        try:
            with app.app_context(), models.database.connection():
                while models.rollups.catch_up_aside():
                    pass  # another batch may have come in while this one was counted
        except Exception:
            log.exception("counting the stored records into the rollups failed; retrying")
            _stored.wait(RETRY_SECONDS)
