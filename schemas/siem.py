"""The record shapes an output sends: the service's QueryData, or Control D's SIEM field names
(docs/outputs.md has the two side by side). Each record is one compact JSON object; `recordId`
(`record_id`) lets a receiver drop the repeats at-least-once delivery may bring."""

import dns.rcode
import orjson

from .records import query_data

SHAPES = ("queryData", "controlD")


def shaped(rows, shape: str) -> list[dict]:
    """The records of the store's rows (models.clients.activity.RecordRow) in `shape`."""
    records = query_data(rows)
    if shape == "controlD":
        return [control_d(row.id, record) for row, record in zip(rows, records, strict=True)]
    return [{**record, "recordId": row.id} for row, record in zip(rows, records, strict=True)]


def encode(records: list[dict]) -> list[bytes]:
    """One compact JSON object (UTF-8, no newline: orjson escapes them) per record."""
    return [orjson.dumps(record) for record in records]


def _rcode(text: str):
    try:
        return int(dns.rcode.from_text(text)) if text else None
    except (dns.rcode.UnknownRcode, ValueError):
        return None


def control_d(record_id: int, record: dict) -> dict:
    """A QueryData dict under Control D's SIEM names. Control D's `answers` is one object (every
    answer IP, the first answer's geography); fields it has no name for keep their QueryData
    names, so nothing of the record is lost."""
    answers = record["answers"]
    mapped = {
        "time": record["timestamp"],
        "query": record["question"],
        "query_type": record["rrType"],
        "src_ip": record["sourceIp"],
        "reply_code_id": _rcode(record["statusCode"]),
        "protocol": record["protocol"],
        "answers": {
            "ips": [ip for answer in answers for ip in answer.get("ips", [])],
            **({"geoip": answers[0]["geoip"]} if answers and answers[0].get("geoip") else {}),
        },
        "device": {"id": record["endpointId"]},
        "client": {"id": record["clientId"]},
        "record_id": record_id,
    }
    named = {"timestamp", "question", "rrType", "sourceIp", "protocol", "answers", "endpointId", "clientId"}
    mapped.update((name, value) for name, value in record.items() if name not in named)
    return mapped
