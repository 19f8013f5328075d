"""Delivery: every gunicorn worker runs a watcher thread (gunicorn.conf.py starts it) that looks
for outputs nobody delivers and takes the lease of each it can; for each output it holds, a
thread of its own sends the records after the output's cursor, in id order, batch by batch,
and moves the cursor once the receiver accepted a batch. A lease in the store (models.schema.jobs)
lets one process at a time deliver each output, across workers and hosts; a process that dies
holding one loses it when it expires (ANALYTICS_OUTPUT_LEASE_SECONDS), and another takes over
from the cursor.

Ingest never waits for an output: delivery only reads records already committed. A receiver
that fails is tried again with a growing pause (up to MAX_PAUSE_SECONDS); meanwhile records
wait in the store, up to ANALYTICS_OUTPUT_BACKLOG of them per output. Past that the output
skips ahead to its newest ANALYTICS_OUTPUT_BACKLOG records: the count is added to its
`skipped`, to dns_analytics_output_skipped_records_total, written to the log and to the
admin-action log.
"""

import logging
import os
import random
import socket
import threading
import time

import models.access.admin_actions
import models.delivery.outputs
import models.engine.database
import models.stores.bound
from app import metrics
from models.runtime.clock import now_ms
from schemas.siem import encode, shaped

from . import OutputError, make_sender

WATCH_SECONDS = 2.0
POLL_SECONDS = 0.5
BACKLOG_CHECK_SECONDS = 10
MAX_PAUSE_SECONDS = 60
JOB_ACTOR = {"key_id": None, "key_name": "output delivery", "source_ip": ""}

log = logging.getLogger(__name__)
_stopping = threading.Event()  # this process is exiting: take and keep no lease
_look_now = threading.Event()  # an output was created or resumed here: look before WATCH_SECONDS


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def start_background(app) -> threading.Thread:
    """Start this process's watcher (gunicorn.conf.py calls it in every worker)."""
    holder = _holder()
    thread = threading.Thread(target=_watch, args=(app, holder), name="outputs", daemon=True)
    thread.start()
    return thread


def stop(app):
    """Hand this process's outputs over as it exits (gunicorn.conf.py's worker_exit): another
    worker takes them over within seconds, from their cursors. A batch being sent right now may
    be sent again by the next one: at least once."""
    _stopping.set()
    try:
        with app.app_context(), models.engine.database.connection():
            models.delivery.outputs.release_all(_holder(), now_ms())
    except Exception:
        log.exception("outputs: could not hand over this process's outputs; their leases run out instead")


def look_now():
    """Have this process's watcher look for outputs to deliver at once (one was created or
    resumed here), rather than at its next look."""
    _look_now.set()


def _watch(app, holder: str):
    delivering: dict[int, threading.Thread] = {}
    lease_seconds = app.config["ANALYTICS_OUTPUT_LEASE_SECONDS"]
    _look_now.wait(random.uniform(0, WATCH_SECONDS))  # workers start together: spread their first look
    while not _stopping.is_set():
        _look_now.clear()
        try:
            with app.app_context(), models.engine.database.connection():
                delivering = {key: thread for key, thread in delivering.items() if thread.is_alive()}
                for output_id in models.delivery.outputs.waiting(now_ms()):
                    thread = delivering.get(output_id)
                    if thread is not None and thread.is_alive():
                        continue
                    if models.delivery.outputs.claim(output_id, holder, now_ms(), lease_seconds * 1000):
                        delivering[output_id] = thread = threading.Thread(
                            target=Delivery(app, output_id, holder).run, name=f"output-{output_id}", daemon=True
                        )
                        thread.start()
        except Exception:
            log.exception("outputs: looking for outputs to deliver failed; looking again shortly")
        _look_now.wait(WATCH_SECONDS)


class Delivery:
    """One output's delivery in this process, for as long as it holds the output's lease."""

    def __init__(self, app, output_id: int, holder: str):
        self.app, self.output_id, self.holder = app, output_id, holder
        self.sender = None
        self.settings = None  # the (kind, url, options) the sender was made for
        self.renewed = 0.0  # the first step sets the lease to this output's own length
        self.lease_seconds = app.config["ANALYTICS_OUTPUT_LEASE_SECONDS"]
        # Renewed every third of its length (10 s by default), so that a renewal a step or a
        # slow database delays still comes long before the lease runs out.
        self.renew_seconds = self.lease_seconds / 3
        self.backlog_checked = 0.0
        self.pause = 1.0

    def run(self):
        try:
            with self.app.app_context():
                while self.step():
                    pass
        except Exception:
            log.exception("outputs: delivery of output %d stopped; another attempt follows", self.output_id)
        finally:
            if self.sender is not None:
                self.sender.close()
            try:
                with self.app.app_context(), models.engine.database.connection():
                    models.delivery.outputs.release(self.output_id, self.holder, now_ms())  # (ours only)
            except Exception:
                log.exception("outputs: could not release the lease of output %d", self.output_id)

    def step(self) -> bool:
        """Send the next batch, or wait for records; False once this process is to stop."""
        with models.engine.database.connection():
            output = models.delivery.outputs.get(self.output_id)
            if output is None or output.paused or not self._keep_lease(output):
                return False
            output = self._bound_backlog(output)
            rows, examined = models.stores.bound.records().pending(output, output.options.get("batchSize", 500))
        if rows:
            records = shaped(rows, output.shape)
            try:
                self._sender(output).send(records, encode(records))
            except OutputError as exc:
                self._failed(output, str(exc))
                return True
            metrics.count_output_delivered(output.name, len(rows))
            self.pause = 1.0
        if examined != output.cursor:
            with models.engine.database.connection():
                models.delivery.outputs.advance(output.id, output.cursor, examined, len(rows), now_ms())
        if not rows and examined == output.cursor:
            time.sleep(POLL_SECONDS)
        return True

    def _keep_lease(self, output) -> bool:
        if _stopping.is_set():
            return False
        if time.monotonic() - self.renewed < self.renew_seconds:
            return True
        self.renewed = time.monotonic()
        # Longer than a send can take (connect, then answer, each up to the timeout) after the
        # last renewal, so that the lease never runs out while this process is still sending.
        send_seconds = 2 * output.options.get("timeoutSeconds", 10)
        lease_ms = int(max(self.lease_seconds, send_seconds + self.renew_seconds) * 1000)
        return models.delivery.outputs.claim(self.output_id, self.holder, now_ms(), lease_ms)

    def _sender(self, output):
        settings = (output.kind, output.url, output.options)
        if self.sender is None or settings != self.settings:
            if self.sender is not None:
                self.sender.close()
            self.sender, self.settings = make_sender(output), settings
        return self.sender

    def _failed(self, output, error: str):
        with models.engine.database.connection():
            models.delivery.outputs.note_failure(output.id, error, now_ms())
        metrics.count_output_failure(output.name)
        if output.failures == 0:  # the first failure of a run of them; the rest are in GET /v2/output
            log.warning("output %d (%s) failing, records wait in the store: %s", output.id, output.name, error)
        # Paused in short naps, so that a pause or a deletion is seen soon, and the lease kept.
        until = time.monotonic() + self.pause * random.uniform(0.8, 1.2)
        self.pause = min(self.pause * 2, MAX_PAUSE_SECONDS)
        while time.monotonic() < until:
            time.sleep(min(1.0, max(0.0, until - time.monotonic())))
            with models.engine.database.connection():
                current = models.delivery.outputs.get(self.output_id)
                if current is None or current.paused or not self._keep_lease(current):
                    return
                self._bound_backlog(current)

    def _bound_backlog(self, output):
        """The output, its cursor moved past all but its newest records if too many wait."""
        if time.monotonic() - self.backlog_checked < BACKLOG_CHECK_SECONDS:
            return output
        self.backlog_checked = time.monotonic()
        limit = self.app.config["ANALYTICS_OUTPUT_BACKLOG"]
        if models.stores.bound.records().backlog(output, limit + 1) <= limit:
            return output
        point = models.stores.bound.records().skip_point(output, limit)
        if point is None:
            return output
        cursor, count = point
        with models.engine.database.write_transaction():
            if not models.delivery.outputs.skip(output, cursor, count):
                return models.delivery.outputs.get(output.id) or output
            metadata = {"output": {"id": output.id, "name": output.name}, "skipped": count, "cursor": cursor}
            models.access.admin_actions.record_action("output.skip", JOB_ACTOR, metadata, output.endpoints, now_ms())
        metrics.count_output_skipped(output.name, count)
        log.warning(
            "output %d (%s): %d records skipped, never sent: more than ANALYTICS_OUTPUT_BACKLOG=%d were waiting;"
            " delivering on from record id %d",
            output.id,
            output.name,
            count,
            limit,
            cursor,
        )
        return models.delivery.outputs.get(output.id) or output
