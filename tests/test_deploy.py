"""The files in deploy/ agree with the service: the settings they name exist, the Grafana
dashboard asks only for metrics the service exposes, the units run commands that exist."""

import json
import os
import re

import pytest

from models.runtime.config import DEFAULTS

from support.helpers import AUTH, ingest, record, samples
from support.servers import ROOT

DEPLOY = os.path.join(ROOT, "deploy")
# Read by gunicorn.conf.py rather than the app.
GUNICORN_SETTINGS = {"ANALYTICS_BIND", "ANALYTICS_WORKERS", "ANALYTICS_THREADS"}


def deploy_file(name: str) -> str:
    return open(os.path.join(DEPLOY, name), encoding="utf-8").read()


def test_settings_named_in_deploy_files_exist():
    named = set()
    for name in os.listdir(DEPLOY):
        named |= set(re.findall(r"ANALYTICS_[A-Z_]+", deploy_file(name)))
    assert named, "the files name the settings they rely on"
    from feeds.cli import import_pihole_command

    feed_settings = {param.envvar for param in import_pihole_command.params if param.envvar}
    known = set(DEFAULTS) | GUNICORN_SETTINGS | feed_settings
    assert named <= known, named - known
    gunicorn_conf = open(os.path.join(ROOT, "gunicorn.conf.py"), encoding="utf-8").read()
    assert all(setting in gunicorn_conf for setting in GUNICORN_SETTINGS)


def test_nginx_limits_match_the_service():
    site = deploy_file("nginx-site.conf")
    assert f"client_max_body_size {DEFAULTS['ANALYTICS_MAX_BODY_MB']}m;" in site


@pytest.mark.sqlite_only  # the WAL's size is SQLite's
def test_the_dashboard_asks_only_for_exposed_metrics(client):
    ingest(client, record("home", "c", action=0, statusCode="NOERROR"))
    exposed = {name for name, _ in samples(client.get("/metrics", headers=AUTH).get_data(as_text=True))}
    dashboard = json.loads(deploy_file("grafana-dashboard.json"))
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"dns_analytics_[a-z_]+", target["expr"])
    }
    assert len(asked) >= 10
    assert asked <= exposed, asked - exposed


@pytest.mark.sqlite_only
def test_units_run_commands_the_service_has(app):
    commands = set(app.cli.list_commands(None))
    service = deploy_file("dns-analytics.service")
    assert "ExecStart=/opt/dns-analytics/.venv/bin/gunicorn wsgi:app" in service
    assert "ExecStartPre=/opt/dns-analytics/.venv/bin/flask --app wsgi init" in service
    assert "init" in commands
    from feeds.cli import main as feed_program

    importer = deploy_file("dns-analytics-import@.service")
    kinds = {"pihole", "adguard"}
    assert "ExecStart=/opt/dns-analytics/.venv/bin/dns-analytics-feed import-%i ${SOURCE} --follow" in importer
    collector = deploy_file("dns-analytics-dnstap.service")
    assert "ExecStart=/opt/dns-analytics/.venv/bin/dns-analytics-feed collect-dnstap" in collector
    feed_commands = set(feed_program.commands)
    assert {f"import-{kind}" for kind in kinds} | {"collect-dnstap", "ingest"} <= feed_commands
    # Installs and units of earlier versions run them as flask commands: the same, still there.
    assert feed_commands <= commands
    for kind in kinds:  # the options the unit and its comments name
        for options in (
            {p.opts[0] for p in feed_program.commands[f"import-{kind}"].params},
            {p.opts[0] for p in app.cli.get_command(None, f"import-{kind}").params},
        ):
            assert {"--follow", "--endpoint", "--url", "--key", "--spool"} <= options
