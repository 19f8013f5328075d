"""GET /v2/statistic/first-seen/{group}: names (questions, registrable domains) whose first
appearance on the endpoints (or for the clients) asked about falls in the window."""

import pytest

from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support.helpers import AUTH, COUNTING, assert_error, count_as, ingest, record
from support.stores import as_older_schema, is_postgres, run_sql


@pytest.fixture(params=COUNTING)
def app(request, app):
    """Each test with the records counted as they are stored, and with all of them waiting."""
    return count_as(app, request.param)


DAY = 86_400_000
WEEK = "startTime=2024-05-08T00:00:00Z&endTime=2024-05-14T23:59:59.999Z"


def seen(client, group="question", query=WEEK):
    response = client.get(f"/v2/statistic/first-seen/{group}?{query}", headers=AUTH)
    assert response.status_code == 200, response.json
    return [(item["value"], item["firstSeen"][:19], item["count"]) for item in response.json["names"]]


def history(client):
    ingest(
        client,
        record("e1", "a", "2024-05-01T10:00:00Z", "www.old.com"),
        record("e1", "a", "2024-05-09T10:00:00Z", "www.old.com"),  # old: asked the week before
        record("e1", "b", "2024-05-09T11:00:00Z", "mail.old.com", action=0),  # new name, old site
        record("e1", "a", "2024-05-10T12:00:00Z", "brand-new.net", action=0),
        record("e1", "b", "2024-05-12T08:00:00Z", "brand-new.net", action=1),
        record("e2", "c", "2024-05-11T09:00:00Z", "www.old.com"),  # old on e1, new on e2
        record("e2", "c", "2024-05-20T09:00:00Z", "later.org"),  # after the window
    )


def test_names_first_seen_in_the_window_newest_first(client):
    history(client)
    assert seen(client) == [("brand-new.net", "2024-05-10T12:00:00", 2), ("mail.old.com", "2024-05-09T11:00:00", 1)]
    assert seen(client, "registrableDomain") == [("brand-new.net", "2024-05-10T12:00:00", 2)], "old.com is old"
    # The other filters narrow the count, not what is new.
    assert seen(client, query=f"{WEEK}&action[]=0") == [
        ("brand-new.net", "2024-05-10T12:00:00", 1),
        ("mail.old.com", "2024-05-09T11:00:00", 1),
    ]
    assert seen(client, query=f"{WEEK}&limit=1") == [("brand-new.net", "2024-05-10T12:00:00", 2)]


def test_new_on_an_endpoint_or_for_a_client(client):
    history(client)
    assert seen(client, query=f"{WEEK}&endpointId=e2") == [("www.old.com", "2024-05-11T09:00:00", 1)]
    assert seen(client, "registrableDomain", f"{WEEK}&endpointId=e2") == [("old.com", "2024-05-11T09:00:00", 1)]
    # For a client, from its own records: b asked brand-new.net after a did.
    assert seen(client, query=f"{WEEK}&clientId[]=b") == [
        ("brand-new.net", "2024-05-12T08:00:00", 1),
        ("mail.old.com", "2024-05-09T11:00:00", 1),
    ]
    assert seen(client, query=f"{WEEK}&clientId[]=a") == [("brand-new.net", "2024-05-10T12:00:00", 1)]


def test_a_deletion_notes_again_what_is_left(client):
    history(client)
    # The records of e1 up to the 9th go: mail.old.com and www.old.com are first seen again later.
    response = client.delete("/v2/activity-log?endpointId=e1&endTime=2024-05-09T10:30:00Z&all=true", headers=AUTH)
    assert response.status_code == 200, response.json
    assert response.json["deletedCount"] == 2
    assert seen(client, query=f"{WEEK}&endpointId=e1") == [
        ("brand-new.net", "2024-05-10T12:00:00", 2),
        ("mail.old.com", "2024-05-09T11:00:00", 1),
    ]
    assert seen(client, "registrableDomain", f"{WEEK}&endpointId=e1") == [
        ("brand-new.net", "2024-05-10T12:00:00", 2),
        ("old.com", "2024-05-09T11:00:00", 1),
    ]
    assert client.delete("/v2/activity-log?all=true", headers=AUTH).status_code == 200
    assert seen(client) == []


def test_kept_past_the_records_horizon_until_the_statistics_horizon(app, client, runner):
    app.config.update(ANALYTICS_RETENTION_DAYS=30, ANALYTICS_STATISTICS_RETENTION_DAYS=60)
    today = now_ms() // DAY * DAY
    ingest(
        client,
        record(timestamp=format_ms(today - 50 * DAY), question="ancient.com"),
        record(timestamp=format_ms(today - 40 * DAY), question="older.com"),
        record(timestamp=format_ms(today - 35 * DAY), question="older.com"),
    )
    assert "Deleted 3 records" in runner.invoke(args=["retention"]).output
    window = f"startTime={format_ms(today - 45 * DAY)}&endTime=now"
    assert [name for name, _, _ in seen(client, query=window)] == ["older.com"], "the records are gone; it is not"
    ingest(client, record(timestamp=format_ms(now_ms() - 1000), question="older.com"))
    assert "older.com" not in [name for name, _, _ in seen(client, query="startTime=-1d")], "seen 40 days ago"
    # Past the statistics horizon a name is forgotten: asked again, it is new again.
    app.config.update(ANALYTICS_RETENTION_DAYS=1, ANALYTICS_STATISTICS_RETENTION_DAYS=1)
    runner.invoke(args=["retention"])
    ingest(client, record(timestamp=format_ms(now_ms() - 1000), question="ancient.com"))
    assert [name for name, _, _ in seen(client, query="startTime=-1h")] == ["ancient.com"]


def test_a_database_made_before_it_notes_its_records_at_start(app, make_app, client, database):
    history(client)
    as_older_schema(database, 11, "name_seen")
    restarted = make_app(**app.config).test_client()
    assert seen(restarted) == [("brand-new.net", "2024-05-10T12:00:00", 2), ("mail.old.com", "2024-05-09T11:00:00", 1)]


def record_indexes(database) -> set[str]:
    if is_postgres(database):
        sql = "SELECT indexname FROM pg_indexes WHERE tablename = 'record' AND schemaname = current_schema()"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'record'"
    return {row[0] for row in run_sql(database, sql)}


def test_an_older_databases_client_index_gains_the_question_at_start(app, make_app, client, database):
    # A client's names are read from its index alone; a database made before has the index
    # without them, replaced at start.
    history(client)
    run_sql(database, "DROP INDEX record_client_ts_question")
    run_sql(database, "CREATE INDEX record_client_ts ON record (client, ts)")
    restarted = make_app(**app.config).test_client()
    indexes = record_indexes(database)
    assert "record_client_ts_question" in indexes and "record_client_ts" not in indexes
    assert seen(restarted, query=f"{WEEK}&clientId[]=a") == seen(client, query=f"{WEEK}&clientId[]=a")


def test_only_names_are_groups(client):
    error = assert_error(client.get(f"/v2/statistic/first-seen/clientId?{WEEK}", headers=AUTH), 400, 40001)
    assert "question, registrableDomain" in error["message"]
