"""Reads racing DELETE /v2/client (real gunicorn): every answer whole, no export cut, no stream
dies, while the same clients are deleted and ingested again in a loop."""

import csv
import io
import threading
import time

from support.helpers import API_KEY, AUTH, record
from support.servers import Gunicorn
from support.streams import StreamReader

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
CLIENTS = [f"c{i}" for i in range(6)]


def batch(round_number: int) -> list[dict]:
    return [
        record("home", client, question=f"r{round_number}-{i}.example.com", timestamp=f"2024-05-01T12:{i % 60:02d}:00Z")
        for i, client in enumerate(CLIENTS * 150)
    ]


def test_reads_racing_client_deletion_never_fail(tmp_path):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": str(tmp_path / "race.db"), "ANALYTICS_API_KEY": API_KEY})
    try:
        assert server.call("POST", "/v2/ingest", batch(0), AUTH)[0] == 200
        stream = StreamReader(server, "/v2/activity-log/realtime?endpointId=home", AUTH)
        assert stream.response.status == 200
        stop, errors, exports = threading.Event(), [], [0]

        def churn():
            round_number = 1
            while not stop.is_set():
                status, _ = server.call("DELETE", "/v2/client", {"endpointIds": ["home"]}, AUTH)
                if status != 200:
                    errors.append(("delete", status))
                status, _ = server.call("POST", "/v2/ingest", batch(round_number), AUTH)
                if status != 200:
                    errors.append(("ingest", status))
                round_number += 1

        def export():
            while not stop.is_set():
                status, body = server.fetch("GET", f"/v2/activity-log/csv?{WINDOW}", headers=AUTH)
                text = body.decode()
                rows = list(csv.reader(io.StringIO(text)))
                if status != 200 or not text.endswith("\r\n") or any(len(row) != len(rows[0]) for row in rows):
                    errors.append(("csv", status, text[-80:]))
                exports[0] += 1

        def page():
            while not stop.is_set():
                for number in range(3):
                    status, body = server.call(
                        "GET", f"/v2/activity-log?{WINDOW}&page={number}&pageSize=200", headers=AUTH
                    )
                    if status != 200 or not isinstance(body.get("queries"), list):
                        errors.append(("log", status, body))

        threads = [threading.Thread(target=work) for work in (churn, export, export, page, page)]
        for thread in threads:
            thread.start()
        time.sleep(20)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert exports[0] > 5
        # The stream lived through it: a record ingested now still arrives (after the backlog
        # of the churn it is still sending).
        assert server.call("POST", "/v2/ingest", [record("home", "late", question="after.example.com")], AUTH)[0] == 200
        deadline, seen = time.monotonic() + 20, []
        while time.monotonic() < deadline and "after.example.com" not in seen:
            seen += [event["data"]["question"] for event in stream.take(500, timeout=1)]
        assert "after.example.com" in seen
        stream.close()
    finally:
        server.stop()
