"""Counting stored records into the statistics behind the requests that stored them (see
models/counting.py): a thread in every worker looks every few tens of milliseconds for
records not counted yet and counts them, unless its own worker is storing a batch at that
moment (and fewer than a fifth of ANALYTICS_COUNT_BEHIND wait: with every worker storing, it
counts all the same rather than leave them all to the request that passes the bound). So the
counting runs beside the next ingest request, in a worker that is not serving
it: in the same process the two would share one interpreter lock (and one core), and with one
sender that halved what the counting saved the request."""

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager

import models.counting
import models.database
import models.jobs
from models.clock import now_ms

POLL_SECONDS = 0.05
JOB = "counting"
# A worker that dies counting holds the others back this long (ingestion's bound still holds).
LEASE_MS = 30_000
# After a failed count (the database gone, a disk full): how long before trying again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)
_lock = threading.Lock()
_storing = 0  # ingest requests this process is serving
_holder = f"{socket.gethostname()}:{os.getpid()}"


@contextmanager
def storing():
    """The block stores a batch: this process's counting thread leaves the counting to others."""
    global _storing
    with _lock:
        _storing += 1
    try:
        with models.database.storing():  # and the other workers' counting writes wait for it
            yield
    finally:
        with _lock:
            _storing -= 1


def start_background(app, workers: int) -> threading.Thread:
    """Start this process's counting thread (gunicorn.conf.py starts one in each of the
    `workers`); from then on, up to ANALYTICS_COUNT_BEHIND records may wait for it (elsewhere:
    none, every batch is counted as it is stored)."""
    models.counting.behind_limit = app.config["ANALYTICS_COUNT_BEHIND"]
    # With two workers at most one is idle while the other stores: taking turns would only add
    # two writes to every round.
    leased = workers > 2
    thread = threading.Thread(target=_loop, args=(app, leased), name="counting", daemon=True)
    thread.start()
    return thread


def _loop(app, leased: bool):
    while True:
        time.sleep(POLL_SECONDS)
        try:
            with app.app_context(), models.database.connection():
                # Every worker storing (several senders): counted here all the same once a fifth
                # of the bound waits, rather than all at once in a request that passes the bound.
                waiting = models.counting.waiting()
                urgent = waiting > models.counting.behind_limit // 5
                if not waiting or (_storing and not urgent):
                    continue
                # One worker counts at a time: the others' counts would all be thrown away.
                if leased and not models.jobs.claim(JOB, _holder, now_ms(), 0, LEASE_MS):
                    continue
                try:
                    # Yielding to a batch this worker reads would only keep the counting beside
                    # it longer (one interpreter lock): then it writes at once.
                    while models.counting.catch_up_aside(lambda: _storing > 0):
                        pass
                    # Here, beside the requests: past wal_autocheckpoint, one would do it.
                    models.database.checkpoint()
                finally:
                    if leased:
                        models.jobs.finish(JOB, _holder, now_ms())
        except Exception:
            log.exception("counting the stored records into the rollups failed; retrying")
            time.sleep(RETRY_SECONDS)
