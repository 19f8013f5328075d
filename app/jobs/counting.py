"""Counting stored records into the statistics behind the requests that stored them (see
models/counting.py): a thread in every worker looks every few tens of milliseconds for
records not counted yet and counts them, unless its own worker is storing a batch at that
moment (and fewer than a fifth of ANALYTICS_COUNT_BEHIND wait: with every worker storing, it
counts all the same rather than leave them all to the request that passes the bound). So the
counting runs beside the next ingest request, in a worker that is not serving
it: in the same process the two would share one interpreter lock (and one core), and with one
sender that halved what the counting saved the request."""

import logging
import threading
import time
from contextlib import contextmanager

import models.counting
import models.database

POLL_SECONDS = 0.05
# After a failed count (the database gone, a disk full): how long before trying again.
RETRY_SECONDS = 5.0

log = logging.getLogger(__name__)
_lock = threading.Lock()
_storing = 0  # ingest requests this process is serving


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
    thread = threading.Thread(target=_loop, args=(app, workers > 1), name="counting", daemon=True)
    thread.start()
    return thread


def _loop(app, others: bool):
    """`others`: other workers count too, so a count this worker's own request would share the
    interpreter lock with is better left to them."""
    while True:
        time.sleep(POLL_SECONDS)
        try:
            with app.app_context(), models.database.connection():
                if not models.counting.waiting() or (_storing and not _urgent()):
                    continue
                # One worker counts at a time: the others' counts would all be thrown away.
                with models.database.counting_turn() as mine:
                    if not mine:
                        continue
                    # Yielding to a batch this worker reads would only keep the counting beside
                    # it longer (one interpreter lock): then it writes at once.
                    while models.counting.catch_up_aside(lambda: _storing > 0, _give_up(others)):
                        pass
                    # Here, beside the requests: past wal_autocheckpoint, one would do it.
                    models.database.checkpoint()
        except Exception:
            log.exception("counting the stored records into the rollups failed; retrying")
            time.sleep(RETRY_SECONDS)


def _urgent() -> bool:
    """Every worker storing (several senders): counted all the same once a fifth of the bound
    waits, rather than all at once in a request that passes the bound."""
    return models.counting.waiting() > models.counting.behind_limit // 5


def _give_up(others: bool):
    """When to give a count up, looked at again for each count: once a request comes to this
    worker (and another worker counts instead: beside the request, under one interpreter lock,
    the count held it up by a fifth, measured with one sender), unless nobody else counts or
    the records waiting are urgent."""
    if others and not _urgent():
        return lambda: _storing > 0
    return lambda: False
