"""Retention: records older than ANALYTICS_RETENTION_DAYS expire, and statistics older than
ANALYTICS_STATISTICS_RETENTION_DAYS, deleted in batches by a background job that one worker at
a time runs (a lease in the database decides which), or by `flask --app wsgi retention`
(app/commands/retention.py) for installations that prefer to schedule it themselves."""

import logging
import os
import random
import socket
import threading
import time

from flask import current_app

import models.access.access_log
import models.access.admin_actions
import models.engine.database
import models.ingest.ingestion
import models.runtime.config
import models.schema.jobs
import models.stores.bound
from app import metrics
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms
from schemas.records import count_older

BATCH_KEY_DAYS = 7
DAY_MS = 86_400_000
JOB = "retention"
JOB_ACTOR = {"key_id": None, "key_name": "retention", "source_ip": ""}
CLI_ACTOR = {"key_id": None, "key_name": "cli", "source_ip": ""}

log = logging.getLogger(__name__)


def horizon_ms(now: int) -> int | None:
    """Records strictly older than this (ms) expire at the next run; None when retention is off."""
    return models.runtime.config.horizon_ms(current_app.config, now)


def statistics_days() -> int:
    """How many days statistics are kept (0: forever): never fewer than the records."""
    return models.runtime.config.statistics_days(current_app.config)


def statistics_horizon_ms(now: int) -> int | None:
    """Statistics of periods that ended before this (ms) expire at the next run; None: never."""
    days = statistics_days()
    return now - days * DAY_MS if days > 0 else None


def past_horizon(records: list, now: int) -> int:
    """How many of `records` (as models.ingest.ingestion.store_records takes them) are already past the horizon."""
    horizon = horizon_ms(now)
    return 0 if horizon is None else count_older(records, horizon)


def run_retention(actor: dict, now: int | None = None) -> int:
    """Delete the expired records, and the statistics past their own horizon; returns how many
    records. Needs an app context and a connection.

    Client entries stay (their last activity reads null once all their records are gone) and
    endpoints keep their last activity (delete_records raises their lost marks). Statistics
    keep counting expired records until the statistics horizon. A run that deleted something
    is recorded in the admin-action log, kept up to date batch by batch.
    """
    now = now_ms() if now is None else now
    # A feed re-sends a batch within minutes or, after an outage, days: a week covers both.
    models.ingest.ingestion.forget_batch_keys(now - BATCH_KEY_DAYS * DAY_MS)
    if access_days := current_app.config["ANALYTICS_ACCESS_LOG_RETENTION_DAYS"]:
        models.access.access_log.expire(now - access_days * DAY_MS)
    days = current_app.config["ANALYTICS_RETENTION_DAYS"]
    cutoff, statistics_cutoff = horizon_ms(now), statistics_horizon_ms(now)
    if cutoff is None:
        models.engine.database.reclaim_space()  # still the hourly housekeeping: fresh planner statistics
        return 0
    entry = None
    metadata = {
        "retentionDays": days,
        "expiredBefore": format_ms(cutoff),
        "statisticsRetentionDays": statistics_days(),
        "statisticsExpiredBefore": format_ms(statistics_cutoff) if statistics_cutoff is not None else None,
    }

    def log_batch(deleted_so_far: int, statistics: int = 0):
        nonlocal entry
        result = {**metadata, "result": {"deletedCount": deleted_so_far, "expiredStatisticRows": statistics}}
        if entry is None and (deleted_so_far or statistics):
            entry = models.access.admin_actions.record_action("retention.run", actor, result, None, now_ms())
        elif entry is not None:
            models.access.admin_actions.update_metadata(entry, result)

    deleted = models.stores.bound.records().delete_records(
        end_ms=cutoff - 1,
        batch_size=current_app.config["ANALYTICS_DELETE_BATCH"],
        after_batch=log_batch,
        expire=True,
    )
    expired_statistics = 0
    if statistics_cutoff is not None:
        expired_statistics = models.stores.bound.records().expire_statistics(statistics_cutoff)
        if expired_statistics:
            with models.engine.database.write_transaction():
                log_batch(deleted, expired_statistics)
    models.engine.database.reclaim_space()
    metrics.count_retention(deleted)
    # Where the operator looks first (gunicorn's log): records vanishing must say why.
    log.info(
        "retention: deleted %d records older than %s (ANALYTICS_RETENTION_DAYS=%d); their statistics stay %s",
        deleted,
        format_ms(cutoff),
        days,
        f"until {statistics_days()} days (ANALYTICS_STATISTICS_RETENTION_DAYS)" if statistics_cutoff else "forever",
    )
    if expired_statistics:
        log.info("retention: statistics of periods that ended before %s expired", format_ms(statistics_cutoff))
    return deleted


def start_background(app):
    """Start the periodic jobs in this process (gunicorn.conf.py calls it in every worker): the
    retention job, the privacy job (app/jobs/privacy.py) and the alerts job (app/jobs/alerts.py)."""
    from app.jobs import alerts, privacy

    jobs = (
        (JOB, "ANALYTICS_RETENTION_INTERVAL", run_retention),
        (privacy.JOB, "ANALYTICS_PRIVACY_INTERVAL", privacy.run_privacy),
        (alerts.JOB, "ANALYTICS_ALERT_INTERVAL", alerts.run_alerts),
    )
    threads = [threading.Thread(target=_loop, args=(app, *job), name=job[0], daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    return threads[0]


def _loop(app, job: str, interval_setting: str, run):
    holder = f"{socket.gethostname()}:{os.getpid()}"
    interval = app.config[interval_setting]
    # Workers start together; spreading their first look avoids them all queueing at once.
    time.sleep(random.uniform(0, min(interval, 30)))
    while True:
        try:
            with app.app_context(), models.engine.database.connection():
                if models.schema.jobs.claim(job, holder, now_ms(), interval * 1000, lease_ms=max(interval, 600) * 1000):
                    try:
                        run({**JOB_ACTOR, "key_name": job})
                    finally:
                        models.schema.jobs.finish(job, holder, now_ms())
        except Exception:
            log.exception("%s run failed; retrying at the next interval", job)
        time.sleep(min(interval, 60))
