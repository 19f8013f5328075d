"""GeoIP and ASN enrichment at ingest from the operator's own .mmdb files (ANALYTICS_GEOIP_DB,
ANALYTICS_ASN_DB), built here with a writer (nothing downloaded): only what the feed left empty
is filled, for the source and for each answer, on both engines; a replaced file is read again."""

import os
import time

import pytest

import schemas.geoip

from support.geoip_files import write_asn, write_city
from support.helpers import AUTH, ingest, record

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
