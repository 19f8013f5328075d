"""`flask --app wsgi alerts`: the alerts job run once now, and a test alert sent to a rule's
destinations (to check a webhook receiver or a notification URL before relying on it)."""

import os
import socket

import click
from flask.cli import with_appcontext

import models.delivery.alerts
import models.engine.database
import models.schema.jobs
from app.jobs import alerts as job
from app.jobs.alert_destinations import DeliveryError, send
from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

# The lease is held this long at most by a command run (a run stops starting work after a minute).
LEASE_MS = 600_000


@click.group("alerts")
def alerts():
    """Alert rules: run the job, send a test alert."""


@alerts.command("run")
@with_appcontext
def run_command():
    """Judge every rule and deliver what is due, now (unless a worker is running the job)."""
    holder = f"cli:{socket.gethostname()}:{os.getpid()}"
    with models.engine.database.connection():
        if not models.schema.jobs.claim(job.JOB, holder, now_ms(), 0, LEASE_MS):
            raise click.ClickException("A worker is running the alerts job now; try again in a minute.")
        try:
            fired = job.run_alerts()
        finally:
            models.schema.jobs.finish(job.JOB, holder, now_ms())
    click.echo(f"{fired} alerts fired.")


@alerts.command("test")
@click.argument("rule_id", type=int)
@with_appcontext
def test_command(rule_id):
    """Send a test alert to each destination of rule RULE_ID (signed with its secret); nothing
    enters the history."""
    with models.engine.database.connection():
        rule = models.delivery.alerts.get_rule(rule_id)
        if rule is None:
            raise click.ClickException(f"No alert rule {rule_id}.")
        secret = models.delivery.alerts.secret_of(rule_id)
    alert = {
        "id": 0,
        "ruleId": rule.id,
        "kind": rule.kind,
        "endpointId": rule.endpoints[0],
        "subject": "test",
        "message": f"A test alert of rule {rule.id} ({rule.kind}): this destination works.",
        "timestamp": format_ms(now_ms()),
        "detail": {"test": True},
    }
    failed = 0
    for url in rule.destinations:
        try:
            send(url, alert, f"DNS alert: test of rule {rule.id}", secret)
        except DeliveryError as error:
            failed += 1
            click.echo(f"failed     {url}: {error}")
        else:
            click.echo(f"delivered  {url}")
    if failed:
        raise click.ClickException(f"{failed} of {len(rule.destinations)} destinations failed.")
