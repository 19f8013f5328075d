"""Retention: records older than ANALYTICS_RETENTION_DAYS expire, deleted in batches by a
background job that one worker at a time runs (a lease in the database decides which), or
by `flask --app wsgi retention` for installations that prefer to schedule it themselves."""

import logging
import os
import random
import socket
import threading
import time

import click
from flask import current_app
from flask.cli import with_appcontext

import models
from models.clock import now_ms
from schemas.datetimes import format_ms
from schemas.records import count_older

from . import metrics

BATCH_KEY_DAYS = 7
DAY_MS = 86_400_000
RETENTION_BATCH = 10_000
JOB = "retention"
JOB_ACTOR = {"key_id": None, "key_name": "retention", "source_ip": ""}
CLI_ACTOR = {"key_id": None, "key_name": "cli", "source_ip": ""}

log = logging.getLogger(__name__)


def horizon_ms(now: int) -> int | None:
    """Records strictly older than this (ms) expire at the next run; None when retention is off."""
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    return now - days * DAY_MS if days > 0 else None


def past_horizon(records: list, now: int) -> int:
    """How many of `records` (as models.store_records takes them) are already past the horizon."""
    horizon = horizon_ms(now)
    return 0 if horizon is None else count_older(records, horizon)


def run_retention(actor: dict, now: int | None = None) -> int:
    """Delete the expired records; returns how many. Needs an app context and a connection.

    Client entries stay (their last activity reads null once all their records are gone) and
    endpoints keep their last activity (delete_records raises their lost marks). A run that
    deleted something is recorded in the admin-action log, kept up to date batch by batch.
    """
    # A feed re-sends a batch within minutes or, after an outage, days: a week covers both.
    models.forget_batch_keys((now_ms() if now is None else now) - BATCH_KEY_DAYS * DAY_MS)
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    now = now_ms() if now is None else now
    cutoff = horizon_ms(now)
    if cutoff is None:
        models.reclaim_space()  # still the hourly housekeeping: fresh planner statistics
        return 0
    entry = None

    def log_batch(deleted_so_far: int):
        nonlocal entry
        metadata = {
            "retentionDays": days,
            "expiredBefore": format_ms(cutoff),
            "result": {"deletedCount": deleted_so_far},
        }
        if entry is None and deleted_so_far:
            entry = models.record_action("retention.run", actor, metadata, None, now_ms())
        elif entry is not None:
            models.update_metadata(entry, metadata)

    deleted = models.delete_records(end_ms=cutoff - 1, batch_size=RETENTION_BATCH, after_batch=log_batch)
    models.reclaim_space()
    metrics.count_retention(deleted)
    # Where the operator looks first (gunicorn's log): records vanishing must say why.
    log.info(
        "retention: deleted %d records older than %s (ANALYTICS_RETENTION_DAYS=%d)", deleted, format_ms(cutoff), days
    )
    return deleted


@click.command("retention")
@with_appcontext
def retention_command():
    """Delete the records older than ANALYTICS_RETENTION_DAYS now."""
    with models.connection():
        deleted = run_retention(CLI_ACTOR)
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    click.echo(f"Deleted {deleted} records older than {days} days." if days > 0 else "Retention is off (0 days).")


def start_background(app):
    """Start the retention job in this process (gunicorn.conf.py calls it in every worker)."""
    thread = threading.Thread(target=_loop, args=(app,), name="retention", daemon=True)
    thread.start()
    return thread


def _loop(app):
    holder = f"{socket.gethostname()}:{os.getpid()}"
    interval = app.config["ANALYTICS_RETENTION_INTERVAL"]
    # Workers start together; spreading their first look avoids them all queueing at once.
    time.sleep(random.uniform(0, min(interval, 30)))
    while True:
        try:
            with app.app_context(), models.connection():
                if models.claim(JOB, holder, now_ms(), interval * 1000, lease_ms=max(interval, 600) * 1000):
                    try:
                        run_retention(JOB_ACTOR)
                    finally:
                        models.finish(JOB, holder, now_ms())
        except Exception:
            log.exception("retention run failed; retrying at the next interval")
        time.sleep(min(interval, 60))
