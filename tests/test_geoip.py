"""GeoIP and ASN enrichment at ingest from the operator's own .mmdb files (ANALYTICS_GEOIP_DB,
ANALYTICS_ASN_DB), built here with a writer (nothing downloaded): only what the feed left empty
is filled, for the source and for each answer, on both engines; a replaced file is read again;
a record is enriched (geography, privacy, registrable domain) the same whichever way it came in."""

import json
import os
import time
import urllib.request

import pytest

import schemas.geoip
from feeds.sinks import StoreProcess, _validate_and_store

from support.geoip_files import write_asn, write_city
from support.helpers import API_KEY, AUTH, ingest, record
from support.servers import Gunicorn

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"


@pytest.fixture
def enriched(make_app, tmp_path, database):
    city, asn = tmp_path / "city.mmdb", tmp_path / "asn.mmdb"
    write_city(city, {"192.0.2.0/24": ("DE", "Berlin"), "2001:db8::/32": ("NL", "Amsterdam")})
    write_asn(asn, {"192.0.2.0/24": (3320, "Deutsche Telekom AG"), "198.51.100.0/24": (13335, "Cloudflare, Inc.")})
    app = make_app(ANALYTICS_GEOIP_DB=str(city), ANALYTICS_ASN_DB=str(asn))
    client = app.test_client()
    client.files = (city, asn)
    yield client
    schemas.geoip.configure(None, None)


def logged(client, **filters) -> dict:
    query = "".join(f"&{name}={value}" for name, value in filters.items())
    response = client.get(f"/v2/activity-log?{WINDOW}{query}&pageSize=100", headers=AUTH)
    assert response.status_code == 200, response.json
    return {row["question"]: row for row in response.json["queries"]}


def test_empty_geography_is_filled_from_the_operators_databases(enriched):
    given = {"countryCode": "FR", "city": "", "isp": "", "asn": None}
    ingest(
        enriched,
        record(question="a.example", sourceIp="192.0.2.7", answers=[{"ips": ["198.51.100.1", "192.0.2.9"]}]),
        record(
            question="b.example", sourceIp="2001:db8::5", answers=[{"ips": ["2001:db8::1"]}, {"ips": ["192.0.2.1"]}]
        ),
        # What the feed says stays; only what it left empty is filled.
        record(question="c.example", sourceIp="192.0.2.8", sourceGeoip=given, answers=[{"ips": ["203.0.113.1"]}]),
        record(question="d.example", sourceIp="203.0.113.9"),  # in neither database
    )
    rows = logged(enriched)
    a, b, c, d = (rows[name] for name in ("a.example", "b.example", "c.example", "d.example"))
    assert a["sourceGeoip"] == {"countryCode": "DE", "city": "Berlin", "isp": "Deutsche Telekom AG", "asn": 3320}
    # The answer's geography comes from its first address.
    assert a["answers"] == [
        {
            "ips": ["198.51.100.1", "192.0.2.9"],
            "geoip": {"countryCode": "", "city": "", "isp": "Cloudflare, Inc.", "asn": 13335},
        }
    ]
    assert b["sourceGeoip"] == {"countryCode": "NL", "city": "Amsterdam", "isp": "", "asn": None}
    assert [answer["geoip"]["countryCode"] for answer in b["answers"]] == ["NL", "DE"]
    # The feed's place (FR) is kept whole, never paired with the database's city; the network
    # it left empty is filled.
    assert c["sourceGeoip"] == {"countryCode": "FR", "city": "", "isp": "Deutsche Telekom AG", "asn": 3320}
    assert c["answers"] == [{"ips": ["203.0.113.1"]}]
    assert d["sourceGeoip"] == {"countryCode": "", "city": "", "isp": "", "asn": None}
    # The filled fields are filterable and counted like any other.
    assert set(logged(enriched, **{"srcCountry[]": "DE"})) == {"a.example"}
    assert set(logged(enriched, **{"dstAsn[]": "13335"})) == {"a.example"}
    counts = enriched.get(f"/v2/statistic/count/srcCountry?{WINDOW}", headers=AUTH).json["counts"]
    assert {entry["value"]: entry["count"] for entry in counts if entry["value"]} == {"DE": 1, "NL": 1, "FR": 1}


def test_a_replaced_file_is_read_again(enriched, monkeypatch):
    city, _ = enriched.files
    ingest(enriched, record(question="before.example", sourceIp="192.0.2.7"))
    replacement = city.with_suffix(".new")
    write_city(replacement, {"192.0.2.0/24": ("AT", "Wien")})
    os.replace(replacement, city)  # as an updater replaces it
    monkeypatch.setattr(schemas.geoip, "RELOAD_SECONDS", 0.0)
    time.sleep(0.01)
    ingest(enriched, record(question="after.example", sourceIp="192.0.2.7"))
    rows = logged(enriched)
    assert rows["before.example"]["sourceGeoip"]["city"] == "Berlin"
    assert rows["after.example"]["sourceGeoip"]["city"] == "Wien"
    # A file replaced by something unreadable: the databases read before stay in use.
    city.write_bytes(b"not a database")
    ingest(enriched, record(question="broken.example", sourceIp="192.0.2.7"))
    assert logged(enriched)["broken.example"]["sourceGeoip"]["city"] == "Wien"


def test_a_setting_naming_an_unreadable_file_stops_the_start(make_app, tmp_path, database):
    (tmp_path / "bad.mmdb").write_bytes(b"nothing")
    with pytest.raises(RuntimeError, match="bad.mmdb: not a readable MaxMind database"):
        make_app(ANALYTICS_GEOIP_DB=str(tmp_path / "bad.mmdb"))
    schemas.geoip.configure(None, None)


def _post(service, records: list, *, escaped: bool) -> None:
    """POST /v2/ingest with the records' text as UTF-8, which the fast path reads, or with
    \\u escapes of surrogate pairs, which it leaves to the reference validator."""
    body = json.dumps(records, ensure_ascii=escaped).encode()
    request = urllib.request.Request(
        service.base + "/v2/ingest", data=body, method="POST", headers={"Content-Type": "application/json", **AUTH}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.loads(response.read())["accepted"] == len(records)


def _way_in(endpoint: str) -> dict:
    return record(
        endpoint,
        "laptop",
        question="www.example.co.uk",
        sourceIp="2001:db8:1:2::5",
        upstream="9.9.9.9 \N{SLIGHTLY SMILING FACE}",
        triggerValue="||www.example.co.uk^",
        answers=[{"ips": ["192.0.2.7"]}],
    )


# A second process opens the test's store: chDB lets one process open a folder (docs/testing.md, "Engines").
@pytest.mark.second_process
@pytest.mark.system
def test_a_record_is_enriched_the_same_whichever_way_it_came_in(tmp_path, database, make_app):
    """The same record through POST /v2/ingest (the fast path and the reference validator), a
    feed into the local store, the dnstap collector's store process, and a feed pushing to the
    service (--url) from a host whose own databases say otherwise: each stored alike, its
    geography looked up once, by the store that keeps it, from the address as it came (the
    source's /64 has a city, its truncation's none), then the privacy settings applied."""
    city, asn = tmp_path / "city.mmdb", tmp_path / "asn.mmdb"
    write_city(city, {"2001:db8:1:2::/64": ("NL", "Amsterdam"), "192.0.2.0/24": ("DE", "Berlin")})
    write_asn(asn, {"2001:db8:1:2::/64": (1136, "KPN B.V."), "192.0.2.0/24": (3320, "Deutsche Telekom AG")})
    geography = {"ANALYTICS_GEOIP_DB": str(city), "ANALYTICS_ASN_DB": str(asn)}
    service = Gunicorn(tmp_path, {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY, **geography})
    try:
        privacy = {"clientIp": "truncate", "ipv6Prefix": 48, "question": "registrableDomain"}
        assert service.call("PUT", "/v2/privacy/_default", privacy, AUTH)[0] == 200
        _post(service, [_way_in("http-fast")], escaped=False)
        _post(service, [_way_in("http-reference")], escaped=True)
        local = tmp_path / "local.ndjson"
        local.write_text(json.dumps(_way_in("feed-local")) + "\n")
        result = make_app(**geography).test_cli_runner().invoke(args=["ingest", str(local)])
        assert result.exit_code == 0, result.output
        process = StoreProcess(database, "", 64 << 20, (str(city), str(asn)), 48, 300)
        try:
            assert not process.run(_validate_and_store, [_way_in("dnstap")])
        finally:
            process.close()
        # The pushing feed's host has databases of its own, which must play no part.
        other_city, other_asn = tmp_path / "other-city.mmdb", tmp_path / "other-asn.mmdb"
        write_city(other_city, {"2001:db8::/32": ("XX", "Elsewhere"), "192.0.2.0/24": ("XX", "Elsewhere")})
        write_asn(other_asn, {"2001:db8::/32": (64512, "Other"), "192.0.2.0/24": (64512, "Other")})
        feed_host = make_app(
            INSTANCE_PATH=str(tmp_path / "feed-host"),
            ANALYTICS_DATABASE=str(tmp_path / "feed-host.db"),
            ANALYTICS_GEOIP_DB=str(other_city),
            ANALYTICS_ASN_DB=str(other_asn),
        )
        pushed = tmp_path / "pushed.ndjson"
        pushed.write_text(json.dumps(_way_in("feed-remote")) + "\n")
        args = ["ingest", str(pushed), "--url", service.base, "--key", API_KEY, "--spool", str(tmp_path / "spool")]
        result = feed_host.test_cli_runner().invoke(args=args)
        assert result.exit_code == 0 and "Sent 1 records" in result.output, result.output
        body = service.call("GET", f"/v2/activity-log?{WINDOW}&pageSize=100", headers=AUTH)[1]
        rows = {row.pop("endpointId"): row for row in body["queries"]}
        domains = service.call("GET", f"/v2/statistic/count/registrableDomain?{WINDOW}", headers=AUTH)[1]
    finally:
        service.stop()
        schemas.geoip.configure(None, None)
    assert set(rows) == {"http-fast", "http-reference", "feed-local", "dnstap", "feed-remote"}
    expected = rows["http-fast"]
    assert expected["sourceIp"] == "2001:db8:1::"
    assert expected["sourceGeoip"] == {"countryCode": "NL", "city": "Amsterdam", "isp": "KPN B.V.", "asn": 1136}
    assert expected["question"] == "example.co.uk" and expected["triggerValue"] == ""
    assert expected["upstream"] == "9.9.9.9 \N{SLIGHTLY SMILING FACE}"
    berlin = {"countryCode": "DE", "city": "Berlin", "isp": "Deutsche Telekom AG", "asn": 3320}
    assert expected["answers"] == [{"ips": ["192.0.2.7"], "geoip": berlin}]
    assert {name: row for name, row in rows.items() if row != expected} == {}
    assert domains["counts"] == [{"value": "example.co.uk", "count": 5}]
