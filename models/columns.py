"""The record columns the query operations know: one definition for filters, grouping and
the DataAvailability column list."""

from dataclasses import dataclass

# How a column is stored, which decides how a filter on it becomes SQL:
#   endpoint  record.endpoint holds endpoint.id (filter by endpoint name)
#   client    record.client holds client.id (filter by client_id, under any endpoint)
#   term      record.<sql> holds a term.id (filter by the term's string)
#   integer   record.<sql> holds the value itself
ENDPOINT, CLIENT, TERM, INTEGER = "endpoint", "client", "term", "integer"


@dataclass(frozen=True)
class Column:
    name: str  # the API name: filter parameter `name[]`, `{group}` value, QueryData field
    storage: str
    sql: str  # the record column
    filterable: bool = True
    groupable: bool = True

    @property
    def type(self) -> str:
        return "integer" if self.storage == INTEGER else "string"


COLUMNS = (
    Column("endpointId", ENDPOINT, "endpoint"),
    Column("clientId", CLIENT, "client"),
    Column("profileId", TERM, "profile"),
    Column("action", INTEGER, "action"),
    Column("trigger", TERM, "trigger_type"),
    Column("triggerValue", TERM, "trigger_value"),
    Column("spoofTarget", TERM, "spoof_target"),
    Column("question", TERM, "question"),
    Column("protocol", TERM, "protocol"),
    Column("statusCode", TERM, "status"),
    Column("rrType", TERM, "rr_type"),
    Column("srcCountry", TERM, "src_country"),
    Column("dstCountry", TERM, "dst_country"),
    Column("srcAsn", INTEGER, "src_asn"),
    Column("dstAsn", INTEGER, "dst_asn"),
    Column("srcIsp", TERM, "src_isp"),
    Column("dstIsp", TERM, "dst_isp"),
)
COLUMNS_BY_NAME = {column.name: column for column in COLUMNS}
