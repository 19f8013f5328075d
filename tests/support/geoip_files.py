"""GeoIP and ASN databases (.mmdb) written for the tests, as MaxMind's GeoLite2 files are laid out."""

from mmdb_writer import MMDBWriter
from netaddr import IPSet


def write_city(path, networks: dict):
    """A City database: {network: (country ISO code, English city name)}."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-City")
    for network, (country, city) in networks.items():
        writer.insert_network(IPSet([network]), {"country": {"iso_code": country}, "city": {"names": {"en": city}}})
    writer.to_db_file(str(path))


def write_asn(path, networks: dict):
    """An ASN database: {network: (AS number, organisation)}."""
    writer = MMDBWriter(ip_version=6, ipv4_compatible=True, database_type="GeoLite2-ASN")
    for network, (number, organisation) in networks.items():
        writer.insert_network(
            IPSet([network]),
            {"autonomous_system_number": number, "autonomous_system_organization": organisation},
        )
    writer.to_db_file(str(path))
