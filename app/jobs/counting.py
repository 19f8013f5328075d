"""Counting stored records into the statistics behind the requests that stored them (see
models/statistics/counting.py), in a process of its own: under gunicorn, its "dirty" pool of one process
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

import models.engine.database
from models.stores.bound import records

POLL_SECONDS = 0.05
# After a failed count (the database gone, a disk full): how long before trying again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)
_worker = None  # see stop_with


def count_behind(app):
    """A web worker's batches leave up to ANALYTICS_COUNT_BEHIND records waiting for the
    counting process (elsewhere none wait: every batch is counted as it is stored)."""
    app.extensions["records"].set_behind_limit(app.config["ANALYTICS_COUNT_BEHIND"])
    app.extensions["records"].configure(app.config)


def start_background(app) -> threading.Thread:
    """Start the counting thread of this process."""
    count_behind(app)
    thread = threading.Thread(target=_loop, args=(app,), name="counting", daemon=True)
    thread.start()
    return thread


def stop_with(worker):
    """End this process (gunicorn's dirty `worker`) once its parent is gone: an orphan would go
    on counting with what it was started with, beside the new counting process of a new
    arbiter; and once it was told to stop (SIGTERM: a reload, a stop) while it was starting,
    which gunicorn only notes, serving on."""
    global _worker
    _worker = worker


class CountingProcess(DirtyApp):
    """The counting process: the service's app, and its counting thread. It answers no calls."""

    def init(self):
        try:
            from wsgi import app  # the app the workers serve, configured the same way
        except Exception:
            # gunicorn starts a pool process that failed again at once: with settings it cannot
            # start on (a broken instance config after a reload), hundreds of tries a second.
            log.exception("the counting process cannot start; trying again in %.0f s", RETRY_SECONDS)
            time.sleep(RETRY_SECONDS)
            raise
        start_background(app)

    def __call__(self, action, *args, **kwargs):
        raise ValueError(f"Unknown action: {action}")


def _loop(app):
    # How often records past the hot horizon are looked for (and frozen: models/records/freezing.py).
    interval = app.config["ANALYTICS_FREEZE_INTERVAL"]
    looked = 0.0  # when freezing was last looked for

    def freeze_due() -> bool:
        return time.monotonic() - looked > interval

    while True:
        time.sleep(POLL_SECONDS)
        if _worker is not None and (os.getppid() != _worker.ppid or not _worker.alive):
            if _worker.alive:
                log.warning("the counting process's parent (pid %d) is gone: stopping", _worker.ppid)
            os._exit(0)  # the main thread is gunicorn's, serving nothing without its arbiter
        try:
            with app.app_context(), models.engine.database.connection():
                # Records cross the hot horizon as time passes, counted or not lately.
                if not records().waiting() and not freeze_due():
                    continue
                # One process counts at a time (several services on one PostgreSQL schema, a
                # restart's old and new pool): the others' counts would all be thrown away.
                with models.engine.database.counting_turn() as mine:
                    if not mine:
                        continue
                    counted = 0
                    while found := records().catch_up_aside():
                        counted += found
                        if freeze_due():
                            break  # under steady ingest each catch-up finds more: freezing waited for a pause
                    if freeze_due():  # what the counts let go of, past the hot horizon
                        looked = time.monotonic()
                        records().freeze_a_look(counted > 0)
        except Exception:
            log.exception("counting the stored records into the rollups failed; retrying")
            time.sleep(RETRY_SECONDS)
