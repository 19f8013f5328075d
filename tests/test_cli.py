"""The command-line tools: init (schema and first API key) and ingest (files or stdin)."""

import json
import os

from support.helpers import AUTH, clients, record


def test_ingest_ndjson_and_json_files(runner, client, tmp_path):
    ndjson = tmp_path / "a.ndjson"
    ndjson.write_text("\n".join(json.dumps(record(client_id=f"n{i}")) for i in range(7)) + "\n")
    array = tmp_path / "b.json"
    array.write_text(json.dumps([record(client_id="j1"), record(client_id="j2")]))
    wrapped = tmp_path / "c.json"
    wrapped.write_text(json.dumps({"records": [record(client_id="w1")]}))
    result = runner.invoke(args=["ingest", "--batch-size", "3", str(ndjson), str(array), str(wrapped)])
    assert result.exit_code == 0, result.output
    assert "Stored 10 records." in result.output
    assert set(clients(client)["ep1"]["clients"]) == {f"n{i}" for i in range(7)} | {"j1", "j2", "w1"}


def test_ingest_from_stdin(runner, client):
    lines = "".join(json.dumps(record(client_id=f"s{i}")) + "\n" for i in range(4))
    result = runner.invoke(args=["ingest"], input=lines)
    assert result.exit_code == 0, result.output
    assert "Stored 4 records." in result.output
    assert len(clients(client)["ep1"]["clients"]) == 4


def test_ingest_skips_a_bad_record_counts_it_and_resumes_after_what_it_stored(runner, client, tmp_path):
    """A file is read one way whichever the sink (here the local store; pushed with --url in
    test_feed_processes): a bad record is skipped and counted, and a re-run stores nothing twice."""
    path = tmp_path / "bad.ndjson"
    rows = [record(client_id=f"ok{i}") for i in range(4)] + [record(question="")] + [record(client_id="ok5")]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    result = runner.invoke(args=["ingest", "--batch-size", "2", str(path)])
    assert result.exit_code == 0, result.output
    assert "Stored 5 records. Skipped 1: 1 rejected (question)." in result.output
    assert set(clients(client)["ep1"]["clients"]) == {"ok0", "ok1", "ok2", "ok3", "ok5"}
    assert "Stored 0 records." in runner.invoke(args=["ingest", "--batch-size", "2", str(path)]).output
    with path.open("a") as more:
        more.write("\n" + json.dumps(record(client_id="ok6")))
    assert "Stored 1 records." in runner.invoke(args=["ingest", str(path)]).output
    assert len(clients(client)["ep1"]["clients"]) == 6


def test_ingest_rejects_what_is_not_json(runner, tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("hello\n")
    result = runner.invoke(args=["ingest", str(path)])
    assert result.exit_code != 0
    assert "not NDJSON nor a JSON array" in result.output


def test_init_generates_a_key_once_and_it_works(make_app, tmp_path, monkeypatch):
    monkeypatch.delenv("ANALYTICS_API_KEY", raising=False)
    config = {
        "INSTANCE_PATH": str(tmp_path / "inst"),
        "ANALYTICS_DATABASE": str(tmp_path / "x.db"),
        "ANALYTICS_API_KEY": None,  # none yet: init makes one
    }
    result = make_app(**config).test_cli_runner().invoke(args=["init"])
    assert result.exit_code == 0, result.output
    key = result.output.split("operator API key")[1].split("\n")[2].strip()
    assert len(key) >= 40
    assert oct(os.stat(tmp_path / "inst" / "config.py").st_mode & 0o777) == "0o600"

    app = make_app(**config)  # a restart reads the key from instance/config.py
    assert app.test_client().get("/v2/client", headers={"Authorization": key}).status_code == 200
    again = app.test_cli_runner().invoke(args=["init"])
    assert key not in again.output, "the secret is printed only when generated"
    assert "config.py" in again.output


def test_init_leaves_a_configured_key_alone(runner, app):
    result = runner.invoke(args=["init"])
    assert result.exit_code == 0
    assert not os.path.exists(os.path.join(app.instance_path, "config.py"))
    assert app.test_client().get("/v2/client", headers=AUTH).status_code == 200
