"""A read sees the store as of one instant: a freeze or a deletion that commits between its
statements (after it has picked the frozen blocks, before it reads the rows) changes nothing in
its answer, which is the one the records sent give. Pages, counts, the CSV export, first-seen;
a privacy rewrite for pages."""

import csv
import io
import threading

import pytest

import models.engine.database
import models.privacy.rewrites
import models.records.freezing
import models.records.thawing
from models.runtime.clock import now_ms

from support.helpers import AUTH, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"
# An hour frozen as the records arrive, then two hours kept as rows (a hot horizon of years),
# which the freeze between a read's statements packs into blocks.
FROZEN = [record("ep1", f"c{i % 2}", f"2024-05-01T10:{i:02d}:00Z", f"a{i}.example") for i in range(5)]
ROWS = [
    record("ep1", f"c{i % 2}", f"2024-05-01T{hour}:{i:02d}:00Z", f"{name}{i}.example")
    for hour, name in (("12", "b"), ("14", "c"))
    for i in range(4)
]
SENT = FROZEN + ROWS
NEWEST_FIRST = [r["question"] for r in sorted(SENT, key=lambda r: r["timestamp"], reverse=True)]

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


@pytest.fixture
def store(app, client, monkeypatch):
    ingest(client, *FROZEN)
    monkeypatch.setattr(models.records.freezing, "hot_hours", 10**6)
    ingest(client, *ROWS)
    return app


def between_statements(monkeypatch, app, action):
    """Run `action` (in a thread of its own, on a connection of its own, to its commit) right
    after the read picks its frozen blocks the first time, before it reads the rows."""
    original, done = models.records.thawing.each_run, []

    def each_run(*args, **kwargs):
        found = original(*args, **kwargs)
        first = next(found, None)  # runs are picked as they are read: the first one is now
        if not done:
            done.append(True)
            failed = []

            def run():
                try:
                    with app.app_context(), models.engine.database.connection():
                        action()
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    failed.append(exc)

            thread = threading.Thread(target=run)
            thread.start()
            thread.join(60)
            assert not failed, failed
        if first is not None:
            yield first
            yield from found

    # runs() gives each_run's runs as a list: patched here, both are.
    monkeypatch.setattr(models.records.thawing, "each_run", each_run)
    return done


def freeze(monkeypatch):
    def action():
        monkeypatch.setattr(models.records.freezing, "hot_hours", 48)
        with models.engine.database.write_transaction():
            assert models.records.freezing.freeze(now_ms()) == len(ROWS)

    return action


def delete(client):
    def action():
        response = client.delete("/v2/activity-log", json={"clientIds": ["c1"]}, headers=AUTH)
        assert response.status_code == 200, response.json
        assert response.json["deletedCount"] == sum(r["clientId"] == "c1" for r in SENT)

    return action


def rewrite(client):
    """A stricter privacy setting, and the rewrite of what is stored to it, to its end: the read
    answers as of its first statement, every name as sent (before the snapshot, this read
    answered every name as rewritten: one moment too, but a later one than it began in)."""

    def action():
        response = client.put("/v2/privacy/ep1", json={"question": "drop"}, headers=AUTH)
        assert response.status_code == 200, response.json
        assert models.privacy.rewrites.run(lambda: False) == len(SENT)

    return action


def changes(client, monkeypatch):
    return {"freeze": freeze(monkeypatch), "deletion": delete(client), "rewrite": rewrite(client)}


@pytest.mark.parametrize("change", ["freeze", "deletion", "rewrite"])
def test_a_page_sees_one_instant(store, client, monkeypatch, change):
    done = between_statements(monkeypatch, store, changes(client, monkeypatch)[change])
    response = client.get(f"/v2/activity-log?{WINDOW}&pageSize=100", headers=AUTH)
    assert done, "the change ran between the read's statements"
    assert response.status_code == 200, response.json
    assert [q["question"] for q in response.json["queries"]] == NEWEST_FIRST


@pytest.mark.parametrize("change", ["freeze", "deletion"])
def test_a_count_sees_one_instant(store, client, monkeypatch, change):
    done = between_statements(monkeypatch, store, changes(client, monkeypatch)[change])
    # A search: no rollup answers it, so it is counted from the blocks and the rows.
    response = client.get(f"/v2/statistic/count/clientId?{WINDOW}&searchQuestion=example", headers=AUTH)
    assert done, "the change ran between the read's statements"
    assert response.status_code == 200, response.json
    assert {c["value"]: c["count"] for c in response.json["counts"]} == {"c0": 7, "c1": 6}


def test_an_export_misses_nothing_a_freeze_moves_meanwhile(store, client, monkeypatch):
    done = between_statements(monkeypatch, store, freeze(monkeypatch))
    response = client.get(f"/v2/activity-log/csv?{WINDOW}", headers=AUTH)
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    assert done, "the freeze ran during the export"
    assert [row["question"] for row in rows] == NEWEST_FIRST, "each record once, in order"


def test_an_export_step_sees_one_instant_whatever_is_deleted_meanwhile(store, client, monkeypatch):
    # The deletion commits inside the export's first step, after its blocks are picked: that
    # step reads as before it (the frozen hour whole, with its c1 records); the steps after it,
    # the rows past, read after it (no c1 record).
    done = between_statements(monkeypatch, store, delete(client))
    response = client.get(f"/v2/activity-log/csv?{WINDOW}&sortOrder=asc", headers=AUTH)
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    assert done, "the deletion ran during the export"
    oldest_first = sorted(SENT, key=lambda r: r["timestamp"])
    kept = [r["question"] for r in oldest_first if r in FROZEN or r["clientId"] != "c1"]
    assert [row["question"] for row in rows] == kept


@pytest.mark.parametrize("change", ["freeze", "deletion"])
def test_first_seen_sees_one_instant(store, client, monkeypatch, change):
    done = between_statements(monkeypatch, store, changes(client, monkeypatch)[change])
    response = client.get(f"/v2/statistic/first-seen/question?{WINDOW}&clientId[]=c0&limit=100", headers=AUTH)
    assert done, "the change ran between the read's statements"
    assert response.status_code == 200, response.json
    newest_first = sorted(SENT, key=lambda r: r["timestamp"], reverse=True)
    assert [entry["value"] for entry in response.json["names"]] == [
        r["question"] for r in newest_first if r["clientId"] == "c0"
    ]
