"""Reading records back as QueryData: pages of the activity log, export batches, the live tail."""

import json

from .clients import client_names
from .database import query
from .filters import Filters
from .ingestion import TERM_COLUMNS, newest_record_id
from .terms import term_values

# Raw rows carry ids only: strings come from term_values, names from client_names, each
# looked up once per batch rather than joined into every row.
_SELECT = (
    "SELECT r.id, r.ts, r.endpoint, r.client, "
    + ", ".join(f"r.{column}" for column in TERM_COLUMNS)
    + ", r.action, r.src_asn FROM record r"
)
_TERMS = slice(4, 4 + len(TERM_COLUMNS))
# The fields of a raw row (see iter_raw_batches), by position.
ROW_FIELDS = ("id", "ts", "endpoint", "client", *TERM_COLUMNS, "action", "src_asn")


def page_records(filters: Filters, page: int, page_size: int, descending: bool = True) -> list[dict]:
    """One page of the log, ordered by (ts, id), newest first unless ascending.

    Paged with OFFSET over the ordering index. (Remembering where earlier pages ended, to seek
    instead, gave wrong pages once records inside the window were deleted or arrived late.)
    """
    condition, params = filters.where()
    return decode(_fetch(condition, params, descending, None, page_size, page * page_size))


def iter_records(filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as QueryData, in the log's order (see iter_raw_batches)."""
    for rows in iter_raw_batches(filters, descending, batch_size):
        yield from decode(rows)


def iter_raw_batches(filters: Filters, descending: bool = True, batch_size: int = 5000):
    """Every matching record as raw rows (fields as in ROW_FIELDS; strings as term ids, see
    models.term_values), a list per batch. Each batch is one short keyset query, so memory
    stays flat and no read transaction holds back WAL checkpoints."""
    condition, params = filters.where()
    after = None
    while True:
        rows = _fetch(condition, params, descending, after, batch_size, 0)
        yield rows
        if len(rows) < batch_size:
            return
        after = (rows[-1][1], rows[-1][0])


def records_after(filters: Filters, last_id: int, limit: int = 500) -> list[tuple[int, dict]]:
    """(id, QueryData) of matching records with id > last_id, oldest id first."""
    # One statement, one snapshot: with ids looked up beforehand, a batch committed in between
    # could add a matching client (low id, missed) and records above it (seen), and the
    # stream would move past the missed record for good.
    condition, params = filters.where(inline=True)
    rows = query(
        f"{_SELECT} WHERE r.id > ? AND {condition} ORDER BY r.id LIMIT ?", [last_id, *params, limit]
    ).fetchall()
    return list(zip([row[0] for row in rows], decode(rows), strict=True))


def newest_id() -> int:
    """The highest record id ever assigned (ids are never reused)."""
    return newest_record_id()


def _fetch(condition, params, descending, after, limit, offset):
    order = "DESC" if descending else "ASC"
    seek, seek_params = "", []
    if after is not None:
        ts, ident = after
        # (ts, id) strictly beyond the previous row, written so the ts index bounds the scan.
        op = "<" if descending else ">"
        seek = f" AND r.ts {op}= ? AND (r.ts {op} ? OR r.id {op} ?)"
        seek_params = [ts, ts, ident]
    sql = f"{_SELECT} WHERE {condition}{seek} ORDER BY r.ts {order}, r.id {order} LIMIT ? OFFSET ?"
    return query(sql, [*params, *seek_params, limit, offset]).fetchall()


def decode(rows) -> list[dict]:
    """QueryData dicts (wire field names) from rows of _SELECT."""
    terms = term_values(term for row in rows for term in row[_TERMS] if term is not None)
    names = client_names({row[3] for row in rows})
    answer_lists = {}  # one parsed list per distinct answer set of the batch (shared, read-only)
    records = []
    for row in rows:
        (
            profile,
            question,
            rr_type,
            status,
            protocol,
            trigger,
            trigger_value,
            spoof_target,
            src_country,
            src_city,
            src_isp,
            _dst_country,
            _dst_isp,
            src_ip,
            answers,
        ) = (terms.get(term, "") if term is not None else "" for term in row[_TERMS])
        action, src_asn = row[4 + len(TERM_COLUMNS) :]
        if answers and answers not in answer_lists:
            answer_lists[answers] = json.loads(answers)
        records.append(
            {
                "timestamp": row[1],
                "endpointId": names[row[3]][0],
                "clientId": names[row[3]][1],
                "profileId": profile,
                "question": question,
                "rrType": rr_type,
                "statusCode": status,
                "protocol": protocol,
                "action": action,
                "trigger": trigger or None,
                "triggerValue": trigger_value,
                "spoofTarget": spoof_target,
                "sourceIp": src_ip or None,
                "sourceGeoip": {"countryCode": src_country, "city": src_city, "isp": src_isp, "asn": src_asn},
                "answers": answer_lists[answers] if answers else [],
            }
        )
    return records
