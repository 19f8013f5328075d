"""The record catalogue: every field of a stored DNS query, declared once for both sides.

Each field says its API name (filter parameter `name[]`, group name, DataAvailability column),
its place in QueryData, its CSV header, its record column and how that column is stored, and
what the API may do with it. The store (models/) reads only the storage side (`sql`,
`storage`, `rollups`); the wire (schemas/) reads the rest. Nothing else lists record fields:
table columns, insert and select lists, CSV columns, filter parameters, group names and the
benchmark's baseline are all derived from FIELDS.

This module imports nothing of the project, so every layer can read it.
"""

from dataclasses import dataclass

# How a field is stored in the record table:
#   time      record.ts, epoch milliseconds, never NULL
#   endpoint  record.endpoint holds endpoint.id (the API value is the endpoint's name)
#   client    record.client holds client.id (the API value is the client id, under its endpoint)
#   term      an interned string: record.<sql> holds a term.id; NULL is ""
#   integer   the value itself (BIGINT); NULL is unknown
#   number    the value itself (double precision); NULL is unknown
#   boolean   0 or 1; NULL is unknown
TIME, ENDPOINT, CLIENT, TERM = "time", "endpoint", "client", "term"
INTEGER, NUMBER, BOOLEAN = "integer", "number", "boolean"

# Rollup periods a field can be counted by (see models/statistics/rollups.py).
DAY, HOUR, QUARTER = "day", "hour", "quarter"


@dataclass(frozen=True)
class Field:
    name: str  # the API name
    sql: str  # the record column
    storage: str
    path: tuple | None = None  # its place in QueryData; None: not a QueryData field of its own
    csv: str | None = None  # its CSV header; None: not in the export
    filterable: bool = False
    groupable: bool = False
    rollups: tuple = ()  # the periods its counts are rolled up by (groupable fields only)
    # Counted together with this field (an integer field of a few small values): one rollup
    # answers both, e.g. question with action for "top blocked domains".
    rollup_with: str | None = None
    # False: its rollups count over all endpoints, for fields with so many values that per
    # endpoint they would be nearly as big as the records (question).
    rollup_endpoints: bool = True
    required: bool = False  # on ingest
    # Not a record column: the value is a function of this record column's, kept by the store
    # per stored value (registrableDomain of question), so reads and statistics derive it.
    derived_from: str | None = None
    doc: str = ""  # its description in the OpenAPI document, where its name does not say enough

    @property
    def type(self) -> str:
        """Its type in DataAvailability's column list and in the wire schemas."""
        return {TIME: "datetime", INTEGER: "integer", NUMBER: "number", BOOLEAN: "boolean"}.get(self.storage, "string")


def _grouping(*rollups):
    return {"filterable": True, "groupable": True, "rollups": rollups}


# fmt: off
FIELDS = (
    Field("timestamp", "ts", TIME, ("timestamp",), "timestamp"),
    Field("endpointId", "endpoint", ENDPOINT, ("endpointId",), "endpointId", required=True, **_grouping(DAY)),
    Field("clientId", "client", CLIENT, ("clientId",), "clientId", required=True, **_grouping(DAY, HOUR)),
    Field("profileId", "profile", TERM, ("profileId",), "profileId", **_grouping(DAY)),
    Field("question", "question", TERM, ("question",), "question", required=True, **_grouping(DAY, HOUR),
          rollup_with="action", rollup_endpoints=False),
    Field("rrType", "rr_type", TERM, ("rrType",), "rrType", **_grouping(DAY)),
    Field("statusCode", "status", TERM, ("statusCode",), "statusCode", **_grouping(DAY)),
    Field("protocol", "protocol", TERM, ("protocol",), "protocol", **_grouping(DAY)),
    Field("action", "action", INTEGER, ("action",), "action", **_grouping(DAY, HOUR, QUARTER)),
    Field("trigger", "trigger_type", TERM, ("trigger",), "trigger", **_grouping(DAY)),
    Field("triggerValue", "trigger_value", TERM, ("triggerValue",), "triggerValue", **_grouping(DAY)),
    Field("spoofTarget", "spoof_target", TERM, ("spoofTarget",), "spoofTarget", **_grouping(DAY)),
    # What resolvers report of how they answered.
    Field("upstream", "upstream", TERM, ("upstream",), "upstream", **_grouping(DAY),
          doc="The server the resolver forwarded the query to (e.g. 9.9.9.9#53); '' if none or unknown."),
    Field("responseTimeMs", "response_time_ms", NUMBER, ("responseTimeMs",), "responseTimeMs",
          doc="How long the answer took, in milliseconds; null if unknown."),
    Field("cached", "cached", BOOLEAN, ("cached",), "cached", **_grouping(DAY),
          doc="Whether the answer came from the resolver's cache; null if unknown."),
    Field("dnssec", "dnssec", TERM, ("dnssec",), "dnssec", **_grouping(DAY),
          doc="The answer's DNSSEC status as the resolver reports it (secure, insecure, bogus, ...); '' if unknown."),
    Field("sourceIp", "src_ip", TERM, ("sourceIp",), "sourceIp"),
    Field("srcCountry", "src_country", TERM, ("sourceGeoip", "countryCode"), "sourceCountry", **_grouping(DAY)),
    Field("sourceCity", "src_city", TERM, ("sourceGeoip", "city"), "sourceCity"),
    Field("srcIsp", "src_isp", TERM, ("sourceGeoip", "isp"), "sourceIsp", **_grouping(DAY)),
    Field("srcAsn", "src_asn", INTEGER, ("sourceGeoip", "asn"), "sourceAsn", **_grouping(DAY)),
    # The destination's geoip is the first answer's: kept as columns for filters and groups,
    # returned inside `answers` rather than as fields of their own.
    Field("dstCountry", "dst_country", TERM, None, None, **_grouping(DAY)),
    Field("dstIsp", "dst_isp", TERM, None, None, **_grouping(DAY)),
    Field("dstAsn", "dst_asn", INTEGER, None, None, **_grouping(DAY)),
    Field("answers", "answers", TERM, ("answers",), "answers"),  # the compact JSON of the array
)
# Fields every record has, derived from its stored columns rather than stored with it: no
# column, no rollups of their own (the source column's answer for them).
DERIVED = (
    Field("registrableDomain", "registrable_domain", TERM, ("registrableDomain",), "registrableDomain",
          filterable=True, groupable=True, derived_from="question",
          doc="The question's registrable domain (eTLD+1, by the public suffix list the service ships); "
          "the question itself when it is a public suffix. Derived by the service: ignored on ingest."),
)
# fmt: on
# Every field a stored record is read with: QueryData, the CSV export, filters and groups.
READ_FIELDS = FIELDS + DERIVED
FIELDS_BY_NAME = {field.name: field for field in READ_FIELDS}
FIELDS_BY_SQL = {field.sql: field for field in READ_FIELDS}
FILTERABLE = tuple(field for field in READ_FIELDS if field.filterable)
GROUPABLE = tuple(field for field in READ_FIELDS if field.groupable)
# The CSV export's columns, in catalogue order, and the first characters that would make a text
# cell run as a formula in a spreadsheet (such a cell is written with a leading "'", and so is
# one starting with "'", so that reading strips exactly one). The export is written by
# schemas/csv_format.py, and by the ClickHouse store in ClickHouse (models/clickhouse/csv_export.py):
# the same bytes.
CSV_FIELDS = tuple(field for field in READ_FIELDS if field.csv)
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")
# Fields stored as JSON text (a list of answers: the export writes their addresses joined by ";").
JSON_FIELDS = ("answers",)
