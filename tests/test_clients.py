"""The Clients group, rule by rule (API.md, Clients)."""

from models.runtime.clock import now_ms
from schemas.datetimes import format_ms

from support import stores
from support.helpers import AUTH, assert_error, clients, ingest, record

T0 = "2024-05-01T12:00:00.000Z"
T1 = "2024-05-01T13:00:00.000Z"
T2 = "2024-05-01T14:00:00.000Z"
T3 = "2024-05-01T15:00:00.000Z"

EMPTY_ENTRY = {
    "alias": "",
    "host": "",
    "mac": "",
    "ip": "",
    "vendor": "",
    "os": {"type": "", "arch": "", "version": ""},
    "logged": True,
}


def two_endpoints(client):
    ingest(
        client,
        record("ep1", "a", T0),
        record("ep1", "a", T1),
        record("ep1", "b", T2),
        record("ep2", "a", T3),
        record("ep2", "c", T0),
    )


def test_scenario_ingest_list_alias_delete(client):
    """The story of one client: seen, listed, named, deleted, seen again."""
    ingest(client, record("home", "tv", T1, client={"host": "tv.lan", "mac": "aa:bb"}))
    entry = clients(client)["home"]["clients"]["tv"]
    assert entry["lastActivityTime"] == T1
    assert entry["host"] == "tv.lan"

    response = client.put("/v2/client/alias/home/tv", json={"alias": "Living room"}, headers=AUTH)
    assert response.status_code == 200
    assert response.json["alias"] == "Living room"

    response = client.delete("/v2/client", json={"endpointIds": ["home"]}, headers=AUTH)
    assert response.json == {
        "deletedCount": 1,
        "deletedClients": [{"endpointId": "home", "clientId": "tv"}],
    }
    assert clients(client) == {}

    ingest(client, record("home", "tv", T2))
    entry = clients(client)["home"]["clients"]["tv"]
    assert entry == {"lastActivityTime": T2, **EMPTY_ENTRY}, "a deleted client comes back fresh"


def test_no_filter_lists_every_endpoint_with_all_clients(client):
    two_endpoints(client)
    items = clients(client)
    assert set(items) == {"ep1", "ep2"}
    assert set(items["ep1"]["clients"]) == {"a", "b"}
    assert set(items["ep2"]["clients"]) == {"a", "c"}


def test_endpoint_only_lists_that_endpoint(client):
    two_endpoints(client)
    items = clients(client, "?endpointId=ep2")
    assert set(items) == {"ep2"}
    assert set(items["ep2"]["clients"]) == {"a", "c"}


def test_client_ids_only_list_them_under_every_endpoint(client):
    two_endpoints(client)
    items = clients(client, "?clientId[]=a&clientId[]=c")
    assert {e: set(v["clients"]) for e, v in items.items()} == {"ep1": {"a"}, "ep2": {"a", "c"}}


def test_bare_client_id_spelling_is_accepted(client):
    two_endpoints(client)
    items = clients(client, "?clientId=b&clientId[]=c")
    assert {e: set(v["clients"]) for e, v in items.items()} == {"ep1": {"b"}, "ep2": {"c"}}


def test_endpoint_and_client_ids_list_those_clients_of_that_endpoint(client):
    two_endpoints(client)
    items = clients(client, "?endpointId=ep1&clientId[]=a&clientId[]=c")
    assert {e: set(v["clients"]) for e, v in items.items()} == {"ep1": {"a"}}


def test_unknown_ids_are_simply_absent(client):
    two_endpoints(client)
    assert clients(client, "?endpointId=nope") == {}
    assert clients(client, "?clientId[]=nope") == {}
    assert set(clients(client, "?clientId[]=nope&clientId[]=b")["ep1"]["clients"]) == {"b"}


def test_client_last_activity_is_its_newest_record(client):
    ingest(client, record(timestamp=T2), record(timestamp=T0), record(timestamp=T1))
    assert clients(client)["ep1"]["clients"]["cl1"]["lastActivityTime"] == T2


def test_entry_keys_are_always_present_and_empty_when_unseen(client):
    ingest(client, record(timestamp=T0))
    assert clients(client)["ep1"]["clients"]["cl1"] == {"lastActivityTime": T0, **EMPTY_ENTRY}


def test_metadata_of_the_newest_record_wins_field_by_field(client):
    ingest(client, record(timestamp=T2, client={"host": "new-host", "os": {"type": "linux"}}))
    # Older records arrive later: their fields only fill what the newer ones left unknown.
    ingest(
        client,
        record(timestamp=T0, client={"host": "old-host", "mac": "m-old", "os": {"type": "win"}}),
        record(timestamp=T1, client={"mac": "m-mid", "vendor": "", "ip": "192.0.2.7"}),
    )
    ingest(client, record(timestamp=T3, client={"vendor": "Acme", "host": ""}))
    entry = clients(client)["ep1"]["clients"]["cl1"]
    assert entry["host"] == "new-host", "an empty field leaves the stored value alone"
    assert entry["mac"] == "m-mid"
    assert entry["ip"] == "192.0.2.7"
    assert entry["vendor"] == "Acme"
    assert entry["os"] == {"type": "linux", "arch": "", "version": ""}


def test_newest_record_of_a_batch_wins_whatever_its_place(client):
    ingest(
        client,
        record(timestamp=T2, client={"host": "newest", "mac": "m2"}),
        record(timestamp=T0, client={"host": "oldest", "mac": "m0"}),
        record(client_id="cl2", timestamp=T1, client={"host": "first", "mac": "a"}),
        record(client_id="cl2", timestamp=T1, client={"host": "second", "mac": "b"}),
        record(client_id="cl2", timestamp=T0, client={"host": "older", "mac": "c"}),
    )
    entries = clients(client)["ep1"]["clients"]
    assert (entries["cl1"]["host"], entries["cl1"]["mac"]) == ("newest", "m2")
    assert (entries["cl2"]["host"], entries["cl2"]["mac"]) == ("second", "b"), "a tie goes to the later record"


def test_endpoint_last_activity_counts_clients_filtered_out(client):
    two_endpoints(client)
    items = clients(client, "?endpointId=ep1&clientId[]=a")
    assert items["ep1"]["clients"]["a"]["lastActivityTime"] == T1
    assert items["ep1"]["lastActivityTime"] == T2, "b's record at T2 counts"


def test_client_last_activity_is_null_when_its_records_are_gone(client):
    two_endpoints(client)
    response = client.delete("/v2/activity-log?endpointId=ep1&clientId[]=b", headers=AUTH)
    assert response.json == {"deletedCount": 1}
    items = clients(client, "?endpointId=ep1")
    assert items["ep1"]["clients"]["b"]["lastActivityTime"] is None, "the entry stays, with null"
    assert items["ep1"]["clients"]["a"]["lastActivityTime"] == T1
    assert items["ep1"]["lastActivityTime"] == T2, "the endpoint does not move backwards"


def test_endpoint_last_activity_survives_deleting_all_records(client):
    two_endpoints(client)
    response = client.delete("/v2/activity-log?all=true", headers=AUTH)
    assert response.json == {"deletedCount": 5}
    items = clients(client)
    assert items["ep1"]["lastActivityTime"] == T2
    assert items["ep2"]["lastActivityTime"] == T3
    assert all(c["lastActivityTime"] is None for e in items.values() for c in e["clients"].values())


def test_endpoint_last_activity_survives_deleting_its_newest_client(client):
    two_endpoints(client)
    response = client.delete("/v2/client", json={"endpointIds": ["ep1"], "clientIds": ["b"]}, headers=AUTH)
    assert response.json["deletedClients"] == [{"endpointId": "ep1", "clientId": "b"}]
    items = clients(client, "?endpointId=ep1")
    assert set(items["ep1"]["clients"]) == {"a"}
    assert items["ep1"]["lastActivityTime"] == T2, "newer than every visible client"


def test_delete_keeps_a_client_active_after_end_time(client):
    ingest(client, record("ep1", "a", T0), record("ep1", "a", T2), record("ep1", "b", T0))
    response = client.delete("/v2/client", json={"endpointIds": ["ep1"], "endTime": T1}, headers=AUTH)
    assert response.status_code == 200
    assert response.json == {
        "deletedCount": 1,
        "deletedClients": [{"endpointId": "ep1", "clientId": "b"}],
    }
    items = clients(client)
    assert set(items["ep1"]["clients"]) == {"a"}
    assert items["ep1"]["clients"]["a"]["lastActivityTime"] == T2
    # a's record up to endTime went; its newer one stayed.
    response = client.delete("/v2/activity-log?clientId[]=a", headers=AUTH)
    assert response.json == {"deletedCount": 1}


def test_listing_is_in_code_point_order_on_every_engine(client):
    # A locale collation (PostgreSQL's en_US, say) would put "a" before "B" and "x-1" after "X2".
    ingest(client, *[record(e, c) for e in ("a", "B") for c in ("x-1", "X2", "Ä")])
    items = clients(client)
    assert list(items) == ["B", "a"]
    assert all(list(item["clients"]) == ["X2", "x-1", "Ä"] for item in items.values())


def test_delete_with_end_time_equal_to_last_activity_deletes(client):
    ingest(client, record("ep1", "a", T1))
    response = client.delete("/v2/client", json={"endpointIds": ["ep1"], "endTime": T1}, headers=AUTH)
    assert response.json["deletedCount"] == 1, "endTime is inclusive"


def test_delete_selects_by_endpoint_and_client_ids(client):
    two_endpoints(client)
    response = client.delete("/v2/client", json={"clientIds": ["a"]}, headers=AUTH)
    assert response.json["deletedClients"] == [
        {"endpointId": "ep1", "clientId": "a"},
        {"endpointId": "ep2", "clientId": "a"},
    ], "sorted by endpoint then client"
    assert {e: set(v["clients"]) for e, v in clients(client).items()} == {"ep1": {"b"}, "ep2": {"c"}}


def test_delete_every_client_needs_end_time(client):
    two_endpoints(client)
    for body in ({}, {"endpointIds": [], "clientIds": []}):
        assert_error(client.delete("/v2/client", json=body, headers=AUTH), 400, 40006)
    assert_error(client.delete("/v2/client", headers=AUTH), 400, 40006)
    assert len(clients(client)) == 2, "nothing was deleted"

    response = client.delete("/v2/client", json={"endTime": T3}, headers=AUTH)
    assert response.json["deletedCount"] == 4
    assert clients(client) == {}


def test_delete_again_is_harmless(client):
    two_endpoints(client)
    body = {"endpointIds": ["ep2"]}
    assert client.delete("/v2/client", json=body, headers=AUTH).json["deletedCount"] == 2
    assert client.delete("/v2/client", json=body, headers=AUTH).json == {
        "deletedCount": 0,
        "deletedClients": [],
    }


def test_delete_end_time_defaults_to_now(client):
    # A minute ahead: clock skew, within ANALYTICS_FUTURE_TOLERANCE_SECONDS.
    ingest(client, record("ep1", "old", T0), record("ep1", "future", format_ms(now_ms() + 60_000)))
    response = client.delete("/v2/client", json={"endpointIds": ["ep1"]}, headers=AUTH)
    assert response.json["deletedClients"] == [{"endpointId": "ep1", "clientId": "old"}]


def test_delete_bad_input_changes_nothing(client):
    two_endpoints(client)
    for body in ({"endTime": "yesterday"}, {"endpointIds": "ep1"}, {"clientIds": [1]}):
        assert_error(client.delete("/v2/client", json=body, headers=AUTH), 400)
    assert len(clients(client)) == 2


def test_a_deletion_cut_short_leaves_a_consistent_store_and_a_retry_finishes_it(client, database):
    """The records go in transactions of their own, the entries in a last one (docs/api.md): a
    failure there (here: deleting an entry) leaves the records deleted so far gone, their
    counts and the endpoints' times with them, and every entry; the same request again finishes."""
    two_endpoints(client)
    stores.refuse_deletes(database, "client", "old.client_id = 'c'")
    response = client.delete("/v2/client", json={"endTime": T3}, headers=AUTH)
    assert_error(response, 500, 50001)
    items = clients(client)
    assert {e: set(v["clients"]) for e, v in items.items()} == {"ep1": {"a", "b"}, "ep2": {"a", "c"}}
    assert {e: v["lastActivityTime"] for e, v in items.items()} == {"ep1": T2, "ep2": T3}, "never back"
    assert all(c["lastActivityTime"] is None for v in items.values() for c in v["clients"].values())
    assert stores.records_scalar(database, "SELECT COUNT(*) FROM {records}") == 0
    response = client.get("/v2/statistic/count?startTime=2024-05-01T00:00:00Z", headers=AUTH)
    assert response.json["count"] == 0, "their counts went with them"

    stores.run_sql(database, "DROP TRIGGER refuse" + (" ON client" if stores.is_postgres(database) else ""))
    response = client.delete("/v2/client", json={"endTime": T3}, headers=AUTH)
    assert response.json["deletedCount"] == 4
    assert clients(client) == {}


def test_alias_set_replace_and_clear(client):
    ingest(client, record("ep1", "a", T0, client={"host": "h"}))
    for alias in ("x", "y" * 64, "Küche"):
        response = client.put("/v2/client/alias/ep1/a", json={"alias": alias}, headers=AUTH)
        assert response.status_code == 200
        assert response.json == {**EMPTY_ENTRY, "lastActivityTime": T0, "host": "h", "alias": alias}
    assert clients(client)["ep1"]["clients"]["a"]["alias"] == "Küche"

    response = client.delete("/v2/client/alias/ep1/a", headers=AUTH)
    assert response.status_code == 200
    assert response.json["alias"] == ""
    assert clients(client)["ep1"]["clients"]["a"]["alias"] == ""


def test_alias_accepts_a_bare_json_string(client):
    ingest(client, record("ep1", "a"))
    response = client.put("/v2/client/alias/ep1/a", json="Printer", headers=AUTH)
    assert response.status_code == 200
    assert response.json["alias"] == "Printer"


def test_alias_of_unknown_client_is_404(client):
    ingest(client, record("ep1", "a"))
    for path in ("/v2/client/alias/ep1/zz", "/v2/client/alias/ep2/a"):
        assert_error(client.put(path, json={"alias": "x"}, headers=AUTH), 404, 40402)
        assert_error(client.delete(path, headers=AUTH), 404, 40402)


def test_alias_bad_values_are_400_and_change_nothing(client):
    ingest(client, record("ep1", "a"))
    client.put("/v2/client/alias/ep1/a", json={"alias": "kept"}, headers=AUTH)
    for body in ({"alias": ""}, {"alias": "z" * 65}, {"alias": 5}, {"alias": None}, 7, [], ""):
        assert_error(client.put("/v2/client/alias/ep1/a", json=body, headers=AUTH), 400)
    assert_error(client.put("/v2/client/alias/ep1/a", json={}, headers=AUTH), 400, 40003)
    assert_error(
        client.put("/v2/client/alias/ep1/a", data="{", content_type="application/json", headers=AUTH),
        400,
        40004,
    )
    assert clients(client)["ep1"]["clients"]["a"]["alias"] == "kept"


def test_alias_survives_record_deletion_and_metadata_updates(client):
    ingest(client, record("ep1", "a", T0))
    client.put("/v2/client/alias/ep1/a", json={"alias": "kept"}, headers=AUTH)
    client.delete("/v2/activity-log?endpointId=ep1", headers=AUTH)
    ingest(client, record("ep1", "a", T1, client={"host": "h"}))
    entry = clients(client)["ep1"]["clients"]["a"]
    assert (entry["alias"], entry["host"], entry["lastActivityTime"]) == ("kept", "h", T1)


def test_an_alias_sent_without_a_json_content_type_is_logged_with_its_body(client):
    ingest(client, record("ep1", "a"))
    response = client.put("/v2/client/alias/ep1/a", data='{"alias": "Desk"}', headers=AUTH, content_type="text/plain")
    assert response.status_code == 200 and response.json["alias"] == "Desk"
    actions = client.get("/v2/admin-action?startTime=2000-01-01T00:00:00Z", headers=AUTH).json["actions"]
    assert actions[0]["action"] == "client.alias.set"
    assert actions[0]["metadata"]["body"] == {"alias": "Desk"}
