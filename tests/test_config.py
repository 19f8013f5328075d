"""Configuration: environment over instance/config.py over defaults; database URLs."""

import os
import pathlib
import subprocess
import sys

import pytest

import models.runtime.config

from support.helpers import AUTH, ingest, record
from support.servers import ROOT


def test_environment_overrides_instance_config(make_app, tmp_path, monkeypatch):
    instance = tmp_path / "inst"
    instance.mkdir()
    (instance / "config.py").write_text("ANALYTICS_API_KEY = 'from-file'\nANALYTICS_MAX_BATCH = 7\n")
    config = {"INSTANCE_PATH": str(instance), "ANALYTICS_DATABASE": str(tmp_path / "a.db"), "ANALYTICS_API_KEY": None}
    monkeypatch.delenv("ANALYTICS_API_KEY", raising=False)
    app = make_app(**config)
    assert app.config["ANALYTICS_API_KEY"] == "from-file"
    assert app.config["ANALYTICS_MAX_BATCH"] == 7
    monkeypatch.setenv("ANALYTICS_API_KEY", "from-env")
    monkeypatch.setenv("ANALYTICS_MAX_BATCH", "9")
    app = make_app(**config)
    assert app.config["ANALYTICS_API_KEY"] == "from-env"
    assert app.config["ANALYTICS_MAX_BATCH"] == 9


def test_default_database_lives_in_the_instance_folder(make_app, tmp_path, monkeypatch):
    monkeypatch.delenv("ANALYTICS_DATABASE", raising=False)
    app = make_app(INSTANCE_PATH=str(tmp_path / "inst"), ANALYTICS_DATABASE=None)
    assert app.config["ANALYTICS_DATABASE"] == str(tmp_path / "inst" / "analytics.db")
    assert (tmp_path / "inst" / "analytics.db").exists()


def test_restart_on_the_same_database(make_app, tmp_path, database):
    target = f"sqlite:///{database}" if database.startswith("/") else database.replace("postgresql:", "postgres:")
    config = {"INSTANCE_PATH": str(tmp_path / "inst"), "ANALYTICS_DATABASE": target}
    ingest(make_app(**config).test_client(), record())
    again = make_app(**config).test_client()  # schema creation is idempotent
    assert again.get("/v2/client", headers=AUTH).json["items"]["ep1"]["clients"]["cl1"]
    ingest(again, record(question="again.example"))
    assert again.get("/v2/statistic/count?startTime=2000-01-01T00:00:00Z", headers=AUTH).json["count"] == 2


def test_other_database_engines_are_refused_clearly(make_app):
    import pytest

    with pytest.raises(RuntimeError, match="'mysql' is not supported"):
        make_app(ANALYTICS_DATABASE="mysql://u@localhost/x")


def test_an_output_lease_under_a_second_is_refused(make_app):
    import pytest

    with pytest.raises(RuntimeError, match="ANALYTICS_OUTPUT_LEASE_SECONDS must be at least 1, got 0"):
        make_app(ANALYTICS_DATABASE=None, ANALYTICS_OUTPUT_LEASE_SECONDS="0")


def test_the_instance_folder_is_the_projects_own_unless_told(make_app, database):
    """The service's and the feeds' instance/ is the one beside README.md, wherever the module
    that names it sits."""
    root = pathlib.Path(__file__).resolve().parent.parent
    assert make_app(INSTANCE_PATH=None).instance_path == str(root / "instance")
    assert models.runtime.config.read()["ANALYTICS_DATABASE"].startswith(str(root / "instance"))


def test_a_settings_file_its_reader_may_not_read_is_named(tmp_path):
    """The key file scripts/serve writes is its owner's alone: read by another user (the quick
    starts' collector runs as one), the settings name the file and what to do (a feed says it in
    one line: feeds/cli.py), not a traceback of the open."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to read as another user")
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "config.py").write_text('ANALYTICS_API_KEY = "secret"\n')
    os.chmod(instance / "config.py", 0o600)
    program = (
        "from models.runtime import config\n"
        "try:\n"
        f"    config.read({str(instance)!r})\n"
        "except RuntimeError as refusal:\n"
        "    print(refusal)\n"
    )
    ran = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.stdout.strip() == (
        f"cannot read {instance / 'config.py'} (Permission denied): it holds this installation's settings; "
        "run as a user who may read it, or give the settings as ANALYTICS_* environment variables"
    ), ran.stderr
