"""Outputs through the API: create, list, read, pause, delete; bad settings refused with nothing
stored; the admin-action log; endpoint-limited admin keys; the record shapes. Delivery itself,
through real gunicorn and real receivers, is in test_output_delivery.py."""

import json

from schemas.siem import control_d

from support.helpers import AUTH, assert_error, create, ingest, record


def post(client, body, headers=AUTH):
    return client.post("/v2/output", json=body, headers=headers)


def outputs(client, headers=AUTH) -> list[dict]:
    response = client.get("/v2/output", headers=headers)
    assert response.status_code == 200, response.json
    return response.json["outputs"]


def test_an_output_is_created_listed_paused_and_deleted(client, tmp_path):
    ingest(client, record(question="one.example"), record(question="two.example"))
    response = post(
        client,
        {
            "kind": "http",
            "url": "https://splunk.example:8088/services/collector/raw",
            "headers": {"Authorization": "Splunk secret-token"},
            "tls": {"verify": False},
            "endpointIds": ["ep1"],
        },
    )
    assert response.status_code == 201, response.json
    made = response.json
    assert made["kind"] == "http" and made["name"] == "https://splunk.example:8088/services/collector/raw"
    assert made["endpointIds"] == ["ep1"] and made["shape"] == "queryData" and made["paused"] is False
    assert made["options"] == {
        "headers": {"Authorization": "<redacted>"},
        "tls": {"verify": False},
        "batchSize": 500,
        "timeoutSeconds": 10,
    }
    # From the oldest stored record on: both are waiting.
    assert (made["cursor"], made["backlog"], made["delivered"], made["skipped"]) == (0, 2, 0, 0)
    assert made["backlogLimit"] == 1_000_000 and made["lastError"] is None and made["failures"] == 0

    later = post(client, {"kind": "file", "url": f"file://{tmp_path}/out.jsonl", "start": "now", "name": "tail"})
    assert later.status_code == 201, later.json
    assert later.json["backlog"] == 0 and later.json["cursor"] > 0 and later.json["endpointIds"] is None
    assert later.json["options"] == {"batchSize": 500, "maxBytes": 100 << 20, "keep": 5}
    ingest(client, record(question="three.example"))
    assert [o["backlog"] for o in outputs(client)] == [3, 1]

    assert client.get(f"/v2/output/{made['id']}", headers=AUTH).json == {**made, "backlog": 3}
    paused = client.patch(f"/v2/output/{made['id']}", json={"paused": True}, headers=AUTH)
    assert paused.status_code == 200 and paused.json["paused"] is True
    deleted = client.delete(f"/v2/output/{made['id']}", headers=AUTH)
    assert deleted.status_code == 200 and deleted.json["id"] == made["id"]
    assert [o["name"] for o in outputs(client)] == ["tail"]
    assert_error(client.get(f"/v2/output/{made['id']}", headers=AUTH), 404, 40403)
    assert_error(client.delete(f"/v2/output/{made['id']}", headers=AUTH), 404, 40403)

    log = client.get("/v2/admin-action?startTime=-1h", headers=AUTH).json["actions"]
    assert [entry["action"] for entry in log] == ["output.delete", "output.pause", "output.create", "output.create"]
    created = log[-1]["metadata"]
    # The secret header is never kept, neither in the request's body nor in the result.
    assert "secret-token" not in json.dumps(log)
    assert created["body"]["headers"] == {"Authorization": "<redacted>"}
    assert created["result"]["id"] == made["id"]


def test_each_kind_takes_its_own_options_and_url(client, tmp_path):
    syslog = post(client, {"kind": "syslog", "url": "tls://logs.example:6514", "format": "rfc3164", "facility": 1})
    assert syslog.status_code == 201, syslog.json
    assert syslog.json["options"] == {
        "format": "rfc3164",
        "facility": 1,
        "appName": "dns-analytics",
        "timeoutSeconds": 10,
        "batchSize": 500,
    }
    refused = [
        ({"kind": "ftp", "url": "http://x.example"}, "kind"),
        ({"kind": "http", "url": "udp://x.example:514"}, "url"),
        ({"kind": "http", "url": "http://x.example:99999/"}, "url"),
        ({"kind": "syslog", "url": "http://x.example"}, "url"),
        ({"kind": "syslog", "url": "tcp://x.example:514/path"}, "url"),
        ({"kind": "file", "url": "relative/path.jsonl"}, "url"),
        ({"kind": "file", "url": f"file://{tmp_path}/missing/out.jsonl"}, "url"),
        ({"kind": "file", "url": f"file://{tmp_path}/out.jsonl", "headers": {"X-A": "b"}}, "headers"),
        ({"kind": "http", "url": "http://x.example", "format": "rfc5424"}, "format"),
        ({"kind": "http", "url": "http://x.example", "tls": {"verify": False}}, "tls"),
        ({"kind": "http", "url": "https://x.example", "tls": {"caCert": "not a certificate"}}, "caCert"),
        ({"kind": "http", "url": "https://x.example", "headers": {"Bad Name": "x"}}, "headers"),
        ({"kind": "http", "url": "https://x.example", "headers": {"Content-Type": "text/plain"}}, "headers"),
        ({"kind": "http", "url": "https://x.example", "headers": {"X-A": "a\r\nInjected: 1"}}, "headers"),
        ({"kind": "http", "url": "https://x.example", "batchSize": 0}, "batchSize"),
        ({"kind": "http", "url": "https://x.example", "shape": "cef"}, "shape"),
        ({"kind": "http", "url": "https://x.example", "endpointIds": []}, "endpointIds"),
    ]
    for body, field in refused:
        error = assert_error(post(client, body), 400)
        assert field in error["message"], (body, error)
    assert_error(post(client, {"url": "http://x.example"}), 400, 40003)
    # A name is unique (the URL by default).
    assert_error(post(client, {"kind": "syslog", "url": "tls://logs.example:6514"}), 409, 40901)
    assert [o["kind"] for o in outputs(client)] == ["syslog"]
    assert_error(client.patch("/v2/output/1", json={}, headers=AUTH), 400, 40001)
    assert_error(client.patch("/v2/output/999", json={"paused": True}, headers=AUTH), 404, 40403)


def test_outputs_need_the_admin_scope_and_stay_within_a_keys_endpoints(client, runner):
    reader = {"Authorization": create(runner, "--name", "reader", "--scope", "read", "--scope", "write")}
    limited = {"Authorization": create(runner, "--name", "ep1-admin", "--scope", "admin", "--endpoint", "ep1")}
    assert_error(client.get("/v2/output", headers=reader), 403, 40301)
    assert_error(post(client, {"kind": "http", "url": "http://x.example"}, reader), 403, 40301)

    everything = post(client, {"kind": "http", "url": "http://all.example"})
    other = post(client, {"kind": "http", "url": "http://ep2.example", "endpointIds": ["ep2"]})
    assert_error(post(client, {"kind": "http", "url": "http://y.example", "endpointIds": ["ep2"]}, limited), 403, 40302)
    # Without endpointIds, a limited key's output forwards its own endpoints only.
    own = post(client, {"kind": "http", "url": "http://ep1.example"}, limited)
    assert own.status_code == 201 and own.json["endpointIds"] == ["ep1"]
    assert [o["name"] for o in outputs(client, limited)] == ["http://ep1.example"]
    for hidden in (everything.json["id"], other.json["id"]):
        assert_error(client.get(f"/v2/output/{hidden}", headers=limited), 404, 40403)
        assert_error(client.delete(f"/v2/output/{hidden}", headers=limited), 404, 40403)
    assert len(outputs(client)) == 3


def test_a_password_in_the_url_is_not_shown(client):
    made = post(client, {"kind": "http", "url": "https://user:hunter2@logs.example/in"})
    assert made.status_code == 201
    assert made.json["url"] == "https://user:<redacted>@logs.example/in"
    assert "hunter2" not in json.dumps(outputs(client))


def test_control_d_names_keep_every_field_of_the_record():
    record_data = {
        "timestamp": "2024-05-01T12:00:00.000Z",
        "endpointId": "ep1",
        "clientId": "laptop",
        "profileId": "p1",
        "question": "example.com",
        "rrType": "A",
        "statusCode": "NXDOMAIN",
        "protocol": "doh",
        "action": 0,
        "sourceIp": "192.0.2.1",
        "answers": [
            {"ips": ["198.51.100.1"], "geoip": {"countryCode": "US", "city": "", "isp": "", "asn": 64500}},
            {"ips": ["198.51.100.2"], "geoip": {}},
        ],
        "upstream": "",
    }
    mapped = control_d(7, record_data)
    assert mapped["time"] == "2024-05-01T12:00:00.000Z" and mapped["query"] == "example.com"
    assert (mapped["query_type"], mapped["src_ip"], mapped["reply_code_id"]) == ("A", "192.0.2.1", 3)
    assert mapped["answers"] == {
        "ips": ["198.51.100.1", "198.51.100.2"],
        "geoip": {"countryCode": "US", "city": "", "isp": "", "asn": 64500},
    }
    assert mapped["device"] == {"id": "ep1"} and mapped["client"] == {"id": "laptop"} and mapped["record_id"] == 7
    # What Control D has no name for keeps its QueryData name.
    assert (mapped["profileId"], mapped["action"], mapped["statusCode"], mapped["upstream"]) == (
        "p1",
        0,
        "NXDOMAIN",
        "",
    )
    assert control_d(8, {**record_data, "statusCode": ""})["reply_code_id"] is None


def test_outputs_from_the_command_line(client, runner, tmp_path):
    ingest(client, record(question="one.example"))
    made = runner.invoke(
        args=["output", "create", "--kind", "http", "--url", "http://siem.example/in", "--name", "siem"]
        + ["--header", "Authorization: Bearer s3cret", "--endpoint", "ep1", "--batch-size", "200"]
    )
    assert made.exit_code == 0, made.output
    assert "Created output 1 'siem' (http); 1 records to send." in made.output
    listed = runner.invoke(args=["output", "list"])
    assert "siem\thttp\thttp://siem.example/in\tep1\tdelivering\tcursor 0\tbacklog 1" in listed.output
    assert outputs(client)[0]["options"] == {
        "headers": {"Authorization": "<redacted>"},
        "batchSize": 200,
        "timeoutSeconds": 10,
    }

    for args, message in [
        (["--kind", "file", "--url", f"file://{tmp_path}/nowhere/x.jsonl"], "does not exist"),
        (["--kind", "file", "--url", f"file://{tmp_path}/x.jsonl", "--format", "rfc3164"], "format: not an option"),
        (["--kind", "http", "--url", "http://siem.example/in", "--name", "siem"], "exists already"),
        (["--kind", "http", "--url", "http://x.example", "--header", "no colon"], "is not 'Name: value'"),
    ]:
        refused = runner.invoke(args=["output", "create", *args])
        assert refused.exit_code != 0 and message in refused.output, refused.output

    assert runner.invoke(args=["output", "pause", "siem"]).exit_code == 0
    assert outputs(client)[0]["paused"] is True
    assert runner.invoke(args=["output", "resume", "1"]).exit_code == 0
    assert runner.invoke(args=["output", "delete", "siem"]).exit_code == 0
    assert runner.invoke(args=["output", "delete", "siem"]).exit_code != 0
    assert runner.invoke(args=["output", "list"]).output.strip() == "No outputs."
    log = client.get("/v2/admin-action?startTime=-1h", headers=AUTH).json["actions"]
    assert [(a["action"], a["keyName"]) for a in log] == [
        ("output.delete", "cli"),
        ("output.resume", "cli"),
        ("output.pause", "cli"),
        ("output.create", "cli"),
    ]
    assert "s3cret" not in json.dumps(log)


def test_an_id_past_any_integer_is_no_output(client):
    for method in ("get", "delete"):
        assert_error(getattr(client, method)(f"/v2/output/{1 << 70}", headers=AUTH), 404, 40403)


def test_an_output_is_changed_and_goes_on_from_its_cursor(client, tmp_path):
    ingest(client, record(question="one.example"), record(question="two.example"))
    made = post(client, {"kind": "http", "url": "http://old.example/in", "headers": {"X-Token": "old-secret"}}).json
    other = post(client, {"kind": "file", "url": f"file://{tmp_path}/x.jsonl", "name": "other"}).json

    changed = client.patch(
        f"/v2/output/{made['id']}",
        json={
            "url": "https://new.example/in",
            "headers": {"Authorization": "Bearer new-secret"},
            "tls": {"verify": False},
            "shape": "controlD",
            "endpointIds": ["ep1"],
            "name": "siem",
        },
        headers=AUTH,
    )
    assert changed.status_code == 200, changed.json
    assert (changed.json["url"], changed.json["name"], changed.json["shape"]) == (
        "https://new.example/in",
        "siem",
        "controlD",
    )
    assert changed.json["options"]["headers"] == {"Authorization": "<redacted>"}  # replaced, not merged
    assert changed.json["options"]["tls"] == {"verify": False} and changed.json["endpointIds"] == ["ep1"]
    assert (changed.json["id"], changed.json["cursor"], changed.json["backlog"]) == (made["id"], 0, 2)

    for body, status, code in [
        ({"format": "rfc3164"}, 400, 40001),  # not an option of an http output
        ({"url": "http://plain.example/"}, 400, 40001),  # its tls option needs https
        ({"url": "tcp://x.example:514"}, 400, 40001),
        ({"name": "other"}, 409, 40901),
        ({"batchSize": -1}, 400, 40001),
    ]:
        assert_error(client.patch(f"/v2/output/{made['id']}", json=body, headers=AUTH), status, code)
    # Dropping tls with the move to http:// is one change.
    plain = client.patch(f"/v2/output/{made['id']}", json={"url": "http://plain.example/", "tls": None}, headers=AUTH)
    assert plain.status_code == 200 and "tls" not in plain.json["options"]
    assert client.get(f"/v2/output/{other['id']}", headers=AUTH).json == other | {"backlog": 2}

    log = client.get("/v2/admin-action?startTime=-1h&action=output.change", headers=AUTH).json["actions"]
    assert len(log) == 2 and "new-secret" not in json.dumps(log)
    assert log[-1]["metadata"]["body"]["headers"] == {"Authorization": "<redacted>"}


def test_an_output_is_changed_from_the_command_line(client, runner, tmp_path):
    ingest(client, record(question="one.example"))
    made = post(client, {"kind": "http", "url": "http://old.example/in", "name": "siem", "headers": {"X-Token": "old"}})
    other = post(client, {"kind": "file", "url": f"file://{tmp_path}/x.jsonl", "name": "archive"}).json
    changed = runner.invoke(
        args=["output", "change", "siem", "--url", "https://new.example/in", "--header", "Authorization: Bearer n3w"]
        + ["--insecure", "--shape", "controlD", "--endpoint", "ep1", "--batch-size", "50", "--name", "siem2"]
    )
    assert changed.exit_code == 0, changed.output
    assert f"Changed output {made.json['id']} 'siem2'; it goes on from record 0." in changed.output
    shown = client.get(f"/v2/output/{made.json['id']}", headers=AUTH).json
    assert (shown["url"], shown["name"], shown["shape"], shown["endpointIds"]) == (
        "https://new.example/in",
        "siem2",
        "controlD",
        ["ep1"],
    )
    assert shown["options"] == {
        "headers": {"Authorization": "<redacted>"},
        "tls": {"verify": False},
        "batchSize": 50,
        "timeoutSeconds": 10,
    }
    assert (shown["cursor"], shown["backlog"]) == (0, 1)  # the cursor stayed

    # Back to every endpoint and plain http, by number; what is not named stays.
    assert runner.invoke(args=["output", "change", str(made.json["id"]), "--all-endpoints"]).exit_code == 0
    again = runner.invoke(args=["output", "change", "siem2", "--url", "http://plain.example/", "--no-tls"])
    assert again.exit_code == 0, again.output
    shown = client.get(f"/v2/output/{made.json['id']}", headers=AUTH).json
    assert shown["endpointIds"] is None and shown["url"] == "http://plain.example/" and "tls" not in shown["options"]
    assert shown["options"]["batchSize"] == 50 and shown["backlog"] == 1

    before = client.get(f"/v2/output/{made.json['id']}", headers=AUTH).json
    for args, message in [
        (["siem2", "--format", "rfc3164"], "format: not an option of a http output"),
        (["siem2", "--url", "tcp://x.example:514"], "url: an http output needs"),
        (["siem2", "--name", "archive"], "exists already"),
        (["siem2", "--batch-size", "0"], "batchSize:"),
        (["siem2"], "Name at least one setting"),
        (["siem2", "--all-endpoints", "--endpoint", "ep1"], "--all-endpoints goes without --endpoint"),
        (["nothing", "--keep", "1"], "no output named or numbered 'nothing'"),
        (["archive", "--header", "X: y"], "headers: not an option of a file output"),
        (["archive", "--url", f"file://{tmp_path}/nowhere/x.jsonl"], "does not exist"),
    ]:
        refused = runner.invoke(args=["output", "change", *args])
        assert refused.exit_code != 0 and message in refused.output, (args, refused.output)
    assert client.get(f"/v2/output/{made.json['id']}", headers=AUTH).json == before
    assert client.get(f"/v2/output/{other['id']}", headers=AUTH).json == other | {"backlog": 1}

    log = client.get("/v2/admin-action?startTime=-1h&action=output.change", headers=AUTH).json["actions"]
    assert [a["keyName"] for a in log] == ["cli"] * 3
    assert log[-1]["metadata"]["body"]["headers"] == {"Authorization": "<redacted>"}
    assert log[-1]["metadata"]["result"]["name"] == "siem2" and "n3w" not in json.dumps(log)
