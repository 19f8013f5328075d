"""`flask backup`: a consistent online copy while the service ingests, and its restore."""

import os
import sqlite3
import subprocess
import sys
import threading
import time

from support import stores
from support.helpers import API_KEY, AUTH, record
from support.servers import ROOT, Gunicorn


def test_backup_while_ingesting_and_restore(make_app, tmp_path):
    live = tmp_path / "live.db"
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(live), "ANALYTICS_API_KEY": API_KEY}, workers=2)
    stop = threading.Event()
    acknowledged = []

    def feed():
        batch = 0
        while not stop.is_set():
            records = [record("e1", f"c{i % 7}", question=f"b{batch}-{i}.com") for i in range(200)]
            if server.call("POST", "/v2/ingest", records, AUTH)[0] == 200:
                acknowledged.append(batch)
            batch += 1

    feeder = threading.Thread(target=feed)
    try:
        for _ in range(3):
            server.call("POST", "/v2/ingest", [record("e1", "seed", question=f"s{i}.com") for i in range(200)], AUTH)
        feeder.start()
        deadline = time.monotonic() + 20
        while len(acknowledged) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)  # backups start while batches are flowing
        app = make_app(ANALYTICS_DATABASE=str(live), INSTANCE_PATH=str(tmp_path))
        copies = []
        for n in range(3):
            destination = tmp_path / f"copy{n}.db"
            result = app.test_cli_runner().invoke(args=["backup", str(destination)])
            assert result.exit_code == 0, result.output
            copies.append(destination)
        again = app.test_cli_runner().invoke(args=["backup", str(copies[0])])
        assert again.exit_code != 0 and "--force" in again.output
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join()
        server.stop()
    assert acknowledged, "ingestion went on during the backups"

    for copy in copies:
        with sqlite3.connect(copy) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = stores.records_scalar(str(copy), "SELECT COUNT(*) FROM {records}")
        assert count % 200 == 0 and count >= 600, "whole batches only: a consistent snapshot"

    # Restore: serve the last copy as the database; its data reads back through the API.
    restored = make_app(ANALYTICS_DATABASE=str(copies[-1]), INSTANCE_PATH=str(tmp_path)).test_client()
    items = restored.get("/v2/client", headers=AUTH).json["items"]
    assert "seed" in items["e1"]["clients"]
    total = restored.get("/v2/data-availability", headers=AUTH).json["recordCount"]
    assert total == stores.records_scalar(str(copies[-1]), "SELECT COUNT(*) FROM {records}")


def test_backup_into_a_missing_folder_is_one_clear_line(tmp_path):
    env = {**os.environ, "ANALYTICS_DATABASE": str(tmp_path / "live.db"), "ANALYTICS_API_KEY": API_KEY}
    missing = tmp_path / "backups" / "analytics.db"
    done = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "wsgi", "backup", str(missing)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: the folder {missing.parent} does not exist; create it first (mkdir -p {missing.parent})"
    ]
    assert not missing.parent.exists()
