"""The service under real gunicorn with two workers on a fresh database file."""

import time

import pytest

from support import stores
from support.helpers import API_KEY, AUTH, record, wait_for
from support.servers import Gunicorn


@pytest.fixture
def server(tmp_path, database):
    server = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY}, workers=2)
    yield server
    server.stop()


# A second process opens the test's store: chDB lets one process open a folder (docs/testing.md, "Engines").
@pytest.mark.second_process
def test_two_workers_start_on_a_new_database_and_serve_ingest_get_delete(server, database):
    # Ready once one worker answers; the other may still be starting.
    wait_for(lambda: len(server.worker_pids()) == 2, 10, f"two workers: {server.log_path.read_text()}")

    for batch in range(20):  # enough requests that both workers take some
        status, body = server.call(
            "POST",
            "/v2/ingest",
            [record("home", f"c{i}", f"2024-05-01T12:{batch:02d}:{i:02d}Z") for i in range(10)],
            AUTH,
        )
        assert (status, body) == (200, {"accepted": 10, "pastRetention": 0})

    status, body = server.call("GET", "/v2/client?endpointId=home", headers=AUTH)
    assert status == 200
    home = body["items"]["home"]
    assert home["lastActivityTime"] == "2024-05-01T12:19:09.000Z"
    assert home["clients"]["c3"]["lastActivityTime"] == "2024-05-01T12:19:03.000Z"
    assert len(home["clients"]) == 10

    status, body = server.call("DELETE", "/v2/client", {"clientIds": ["c9"], "endTime": "2024-05-01T13:00:00Z"}, AUTH)
    assert (status, body["deletedClients"]) == (200, [{"endpointId": "home", "clientId": "c9"}])

    status, body = server.call("GET", "/v2/client", headers=AUTH)
    assert "c9" not in body["items"]["home"]["clients"]
    assert body["items"]["home"]["lastActivityTime"] == "2024-05-01T12:19:09.000Z"

    status, body = server.call("GET", "/v2/client")
    assert status == 401 and body["error"]["code"] == 40101

    assert stores.records_scalar(database, "SELECT COUNT(*) FROM {records}") == 180
    if not stores.is_postgres(database):
        assert stores.scalar(database, "PRAGMA journal_mode") == "wal"
        assert stores.scalar(database, "PRAGMA integrity_check") == "ok"


def test_the_master_loads_no_application_code(server):
    """gunicorn's master keeps out of the application (no preload): the workers and the counting
    process it starts after a reload (HUP) import the code as it is on disk. Seen from outside by
    the extension modules the application loads and gunicorn does not."""
    wait_for(lambda: server.counting_pid() is not None, 20, "the counting process")
    with open(f"/proc/{server.process.pid}/maps") as maps:
        loaded = maps.read()
    assert "orjson" not in loaded and "_sqlite3" not in loaded


def test_two_servers_side_by_side_share_no_control_socket(tmp_path):
    """gunicorn 25.1+ opens a control socket at one path per user ($XDG_RUNTIME_DIR/gunicorn.ctl):
    none by default, and one of its own where an instance asks for it."""
    run = tmp_path / "run"
    run.mkdir()
    base = {"ANALYTICS_API_KEY": API_KEY, "XDG_RUNTIME_DIR": str(run), "HOME": str(tmp_path)}
    first = Gunicorn(tmp_path, {**base, "ANALYTICS_DATABASE": str(tmp_path / "a.db")}, workers=1)
    own = tmp_path / "b.ctl"
    second = Gunicorn(
        tmp_path,
        {**base, "ANALYTICS_DATABASE": str(tmp_path / "b.db"), "ANALYTICS_CONTROL_SOCKET": str(own)},
        workers=1,
    )
    try:
        assert not (run / "gunicorn.ctl").exists() and not (tmp_path / ".gunicorn").exists()
        deadline = time.monotonic() + 10
        while not own.exists():
            assert time.monotonic() < deadline, "the asked-for control socket never appeared"
            time.sleep(0.1)
        assert first.call("GET", "/v2/client", headers=AUTH)[0] == 200
        assert second.call("GET", "/v2/client", headers=AUTH)[0] == 200
    finally:
        first.stop()
        second.stop()


def test_a_worker_that_cannot_boot_stops_the_service_with_the_reason_alone(tmp_path):
    """A store that cannot be opened (its folder is a file) fails every worker's boot; the
    log says why, and the exit hook adds no error of its own (it once did, for each worker)."""
    (tmp_path / "not-a-folder").write_text("")
    store = str(tmp_path / "not-a-folder" / "a.db")
    with pytest.raises(RuntimeError, match="Worker failed to boot") as failed:
        Gunicorn(tmp_path, {"ANALYTICS_DATABASE": store, "ANALYTICS_API_KEY": API_KEY})
    log = str(failed.value)
    assert "FileExistsError" in log, log  # os.makedirs of the store's folder
    assert "Exception during worker exit" not in log, log
