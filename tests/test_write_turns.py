"""Writers of a SQLite store taking turns (models/engine/write_turns.py), between real processes: the
counting's writes let a batch being stored go first, and wait for its commit; a count made
aside while the mark moved is thrown away (models/statistics/counting.py)."""

import multiprocessing
import os
from types import SimpleNamespace

import pytest

from support.helpers import AUTH, ingest, record, wait_for

pytestmark = pytest.mark.sqlite_only


def _events(path):
    try:
        with open(path) as file:
            return file.read().split()
    except FileNotFoundError:
        return []


def _note(path, event):
    with open(path, "a") as file:
        file.write(event + "\n")


def _open(database):
    import models.engine.database
    import models.migrations.run

    models.engine.database.open_database(database)
    with models.engine.database.connection():
        models.migrations.run.create_schema()
    return models.engine.database


def _storer(database, log, write, commit):
    """A batch being stored: read (storing, no write yet), then written, then committed."""
    store = _open(database)
    with store.connection(), store.storing():
        _note(log, "storer-reading")
        write.wait(30)
        with store.write_transaction():
            store.query("INSERT INTO store_setting (name, value) VALUES ('storer', '1')")
            _note(log, "storer-writing")
            commit.wait(30)
            _note(log, "storer-committing")


def _counter(database, log, seconds):
    """A background writer: yields to the batch being stored, then writes."""
    store = _open(database)
    with store.connection():
        store.yield_to_storing(seconds=seconds)
        _note(log, "counter-yielded")
        with store.write_transaction():
            store.query("INSERT INTO store_setting (name, value) VALUES ('counter', '1')")
            _note(log, "counter-writing")


@pytest.fixture
def storing(tmp_path):
    """A process storing a batch, read (not written yet): its events' log, and how to start a
    background writer waiting at most some seconds, write the batch, and commit it."""
    database, log = str(tmp_path / "turns.db"), str(tmp_path / "events")
    _open(database)
    forked = multiprocessing.get_context("fork")
    write, commit = forked.Event(), forked.Event()
    processes = [forked.Process(target=_storer, args=(database, log, write, commit))]
    processes[0].start()

    def start(target, *args):
        processes.append(forked.Process(target=target, args=(database, log, *args)))
        processes[-1].start()
        return processes[-1]

    try:
        wait_for(lambda: "storer-reading" in _events(log), what="the batch being read")
        yield SimpleNamespace(
            database=database,
            log=log,
            counter=lambda seconds: start(_counter, seconds),
            start=start,
            write=write,
            commit=commit,
            storer=processes[0],
        )
    finally:
        write.set()
        commit.set()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    assert os.path.exists(database + "-writers") and os.path.exists(database + "-storing")


def test_a_background_write_waits_for_the_batch_being_read_and_follows_its_commit(storing):
    counter = storing.counter(30)
    # While the batch is being read, the background write does not begin.
    counter.join(1.0)
    assert _events(storing.log) == ["storer-reading"], "a background write began while a batch was being read"
    storing.write.set()
    # Once the batch is being written, the background write queues behind it (it stops
    # yielding when the storer has its turn, which may be before the storer notes it) ...
    wait_for(
        lambda: {"storer-writing", "counter-yielded"} <= set(_events(storing.log)), what="the background write to queue"
    )
    assert sorted(_events(storing.log)) == ["counter-yielded", "storer-reading", "storer-writing"]
    # ... and is written once the batch is committed.
    storing.commit.set()
    storing.storer.join(30)
    counter.join(30)
    assert _events(storing.log)[-2:] == ["storer-committing", "counter-writing"]
    assert storing.storer.exitcode == 0 and counter.exitcode == 0


def test_a_background_write_waits_no_longer_than_its_bound(storing):
    counter = storing.counter(0.2)
    counter.join(30)
    assert counter.exitcode == 0
    assert _events(storing.log) == ["storer-reading", "counter-yielded", "counter-writing"]


def _counting_aside(database, log):
    """The counting thread's count: read aside, then written (unless the mark moved)."""
    store = _open(database)
    import models.statistics.counting

    read = models.statistics.counting.yield_to_storing

    def noted(*args, **kwargs):  # the tail is read by now: say so, then wait as it would
        _note(log, "counter-read")
        return read(*args, **kwargs)

    models.statistics.counting.yield_to_storing = noted
    with store.connection():
        _note(log, f"counter-counted-{models.statistics.counting.catch_up_aside()}")


def test_a_count_made_aside_is_thrown_away_when_the_mark_moved_meanwhile(make_app, storing):
    import models.engine.database
    import models.statistics.counting

    models.statistics.counting.behind_limit = 10**9  # stored records wait to be counted
    app = make_app(ANALYTICS_DATABASE=storing.database)
    client = app.test_client()
    ingest(client, *[record(client_id=f"c{i % 7}", question=f"q{i}.example") for i in range(100)])
    counter = storing.start(_counting_aside)
    # It has read the 100 records and waits for the batch being read; meanwhile they are counted
    # here (as a deletion or a batch past the bound would count them first).
    wait_for(lambda: "counter-read" in _events(storing.log), what="the count aside to read its tail")
    with app.app_context(), models.engine.database.connection(), models.engine.database.write_transaction():
        assert models.statistics.counting.catch_up() == 100
    storing.write.set()
    storing.commit.set()
    counter.join(30)
    assert "counter-counted-0" in _events(storing.log), _events(storing.log)
    day = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-01T23:59:59.999Z"
    assert client.get(f"/v2/statistic/count?{day}", headers=AUTH).json["count"] == 100, "counted once"


def test_a_new_connection_opens_and_reads_while_another_process_writes(make_app, tmp_path):
    """Opening a connection asks nothing that waits for the write lock (auto_vacuum did: past
    the connect timeout it failed with "database is locked" while another process wrote)."""
    import sqlite3

    import models.engine.database

    database = str(tmp_path / "open.db")
    client = make_app(ANALYTICS_DATABASE=database).test_client()
    ingest(client, record())
    assert stores_auto_vacuum(database) == 2, "a new database still gets incremental auto_vacuum"
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO store_setting (name, value) VALUES ('held', '1')")
    try:
        models.engine.database.db.close_all()  # the next request opens a new connection
        day = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-01T23:59:59.999Z"
        response = client.get(f"/v2/activity-log?{day}", headers=AUTH)
        assert response.status_code == 200, response.json
        assert len(response.json["queries"]) == 1
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def stores_auto_vacuum(database):
    import sqlite3

    with sqlite3.connect(database) as conn:
        return conn.execute("PRAGMA auto_vacuum").fetchone()[0]
