"""Counting stored records into the statistics behind the requests that stored them (see
models/counting.py), in a process of its own: under gunicorn, its "dirty" pool of one process
(gunicorn.conf.py), which gunicorn starts, restarts when it dies and stops with the service.
A thread there looks every few tens of milliseconds for records not counted yet and counts
them. The web workers only store: counting beside a request in the same process shared the
request's interpreter lock, and with one sender that cost the request a fifth of its speed,
then (with the counting in the worker that was not storing) a few percent still, as the next
batch often came to the worker counting the last."""

import logging
import os
import threading
import time

from gunicorn.dirty import DirtyApp

import models.counting
import models.database

POLL_SECONDS = 0.05
# After a failed count (the database gone, a disk full): how long before trying again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)
_parent = None  # see stop_with


def count_behind(app):
    """A web worker's batches leave up to ANALYTICS_COUNT_BEHIND records waiting for the
    counting process (elsewhere none wait: every batch is counted as it is stored)."""
    models.counting.behind_limit = app.config["ANALYTICS_COUNT_BEHIND"]


def start_background(app) -> threading.Thread:
    """Start the counting thread of this process."""
    count_behind(app)
    thread = threading.Thread(target=_loop, args=(app,), name="counting", daemon=True)
    thread.start()
    return thread


def stop_with(parent: int):
    """End this process once its parent (pid) is gone: an orphan would go on counting with
    what it was started with, beside the new counting process of a new arbiter."""
    global _parent
    _parent = parent


class CountingProcess(DirtyApp):
    """The counting process: the service's app, and its counting thread. It answers no calls."""

    def init(self):
        from wsgi import app  # the app the workers serve, configured the same way

        start_background(app)

    def __call__(self, action, *args, **kwargs):
        raise ValueError(f"Unknown action: {action}")


def _loop(app):
    while True:
        time.sleep(POLL_SECONDS)
        if _parent is not None and os.getppid() != _parent:
            log.warning("the counting process's parent (pid %d) is gone: stopping", _parent)
            os._exit(0)  # the main thread is gunicorn's, serving nothing without its arbiter
        try:
            with app.app_context(), models.database.connection():
                if not models.counting.waiting():
                    continue
                # One process counts at a time (several services on one PostgreSQL schema, a
                # restart's old and new pool): the others' counts would all be thrown away.
                with models.database.counting_turn() as mine:
                    if not mine:
                        continue
                    while models.counting.catch_up_aside():
                        pass
                    # Here, beside the requests: past wal_autocheckpoint, one would do it.
                    models.database.checkpoint()
        except Exception:
            log.exception("counting the stored records into the rollups failed; retrying")
            time.sleep(RETRY_SECONDS)
