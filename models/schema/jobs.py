"""Leases for periodic jobs, so that of several processes one runs each job once a period."""

from models.engine.database import query, write_transaction


def claim(job: str, holder: str, now_ms: int, period_ms: int, lease_ms: int) -> bool:
    """Take the job if it is due (last run a period ago) and nobody else holds a live lease."""
    with write_transaction():
        query("INSERT INTO job_lease (name, expires, last_run) VALUES (?, 0, 0) ON CONFLICT (name) DO NOTHING", [job])
        return (
            query(
                "UPDATE job_lease SET holder = ?, expires = ? WHERE name = ? AND last_run <= ?"
                " AND (expires < ? OR holder = ?)",
                [holder, now_ms + lease_ms, job, now_ms - period_ms, now_ms, holder],
            ).rowcount
            == 1
        )


def finish(job: str, holder: str, now_ms: int):
    """Mark the job run and release the lease."""
    with write_transaction():
        query(
            "UPDATE job_lease SET last_run = ?, expires = 0, holder = NULL WHERE name = ? AND holder = ?",
            [now_ms, job, holder],
        )
