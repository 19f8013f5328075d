"""The privacy job: records reaching an age step, and those stored before a setting was made
stricter, rewritten in batches (models/privacy/rewrites.py), then the strings left unused deleted
(models/privacy/unused_terms.py), by the worker holding the job's lease, every
ANALYTICS_PRIVACY_INTERVAL seconds, or by `flask --app wsgi privacy rewrite`."""

import logging
import time

import models.access.admin_actions
import models.engine.database
import models.privacy.rewrites
from models.runtime.clock import now_ms
from models.stores.bound import records

JOB = "privacy"
# A run stops starting batches after this long (the lease outlives it); the next run goes on.
RUN_SECONDS = 300

log = logging.getLogger(__name__)


def run_privacy(actor: dict, now: int | None = None, seconds: float = RUN_SECONDS) -> int:
    """Plan the age steps' work and work through every task for up to `seconds`; the records
    rewritten. Each task of a stricter setting that went through records is entered in the
    admin-action log (`privacy.rewrite`: the endpoint, what became coarser, how many records).
    Needs a connection."""
    now = now_ms() if now is None else now
    with models.engine.database.write_transaction():
        records().plan_ages(now)
    stop = time.monotonic() + seconds
    went_through = []  # records of the tasks finished: their client entries were made coarser too

    def finished(endpoint: str, kind: str, detail: dict, rewritten: int):
        went_through.append(rewritten)
        # Age steps are reached every run by busy endpoints: the log line below says those.
        if rewritten and kind == models.privacy.rewrites.STRICTER:
            metadata = {"result": {"endpointId": endpoint, "detail": detail, "rewritten": rewritten}}
            models.access.admin_actions.record_action("privacy.rewrite", actor, metadata, [endpoint], now_ms())

    deadline = lambda: time.monotonic() > stop  # noqa: E731
    # What the rewrites overwrite or free is zeroed in the file, not left in its free space.
    with models.engine.database.secure_deletes():
        rewritten = records().run_rewrites(deadline, finished)
        if rewritten:
            log.info("privacy: rewrote %d stored records to stricter settings", rewritten)
        # The strings the rewrites and clients marked not logged left unused.
        examined, deleted = records().clean_unused_terms(deadline)
    if deleted:
        log.info("privacy: deleted %d stored strings nothing refers to any more", deleted)
    if (rewritten or examined or any(went_through)) and not models.engine.database.erase_old_versions():
        log.warning(
            "privacy: the write-ahead log still holds what was rewritten or deleted: a reader kept it busy;"
            " SQLite overwrites it as it reuses it"
        )
    return rewritten
