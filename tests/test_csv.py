"""GET /v2/activity-log/csv: streamed RFC 4180 CSV that the importer reads back."""

import csv
import io

import pytest

import models.clients.activity
import models.engine.database
import models.records.freezing
from models.records.filters import Filters

from support import stores
from support.helpers import AUTH, assert_error, ingest, record

WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"


def export(client, query=""):
    response = client.get(f"/v2/activity-log/csv?{WINDOW}&{query}", headers=AUTH)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return response


def rows(response):
    return list(csv.reader(io.StringIO(response.get_data(as_text=True), newline="")))


def test_header_disposition_and_row_count(client):
    ingest(
        client,
        *[
            record(client_id=f"c{i % 3}", question=f"q{i}.com", timestamp=f"2024-05-01T10:00:{i:02d}Z")
            for i in range(30)
        ],
    )
    response = export(client, "clientId[]=c1")
    assert response.mimetype == "text/csv"
    assert response.headers["Content-Disposition"].startswith('attachment; filename="activity-log_')
    table = rows(response)
    assert table[0][:5] == ["timestamp", "endpointId", "clientId", "profileId", "question"]
    assert table[0][-6:] == ["sourceCountry", "sourceCity", "sourceIsp", "sourceAsn", "answers", "registrableDomain"]
    log = client.get(f"/v2/activity-log?{WINDOW}&clientId[]=c1&pageSize=500", headers=AUTH).json["queries"]
    assert len(table) - 1 == len(log) == 10
    assert [r[4] for r in table[1:]] == [q["question"] for q in log], "same order as the log"


def test_rfc4180_quoting_and_numbers(client):
    ingest(
        client,
        record(
            triggerValue='rule, "quoted"\nsecond line',
            action=-1,
            sourceGeoip={"asn": 64500},
            answers=[{"ips": ["192.0.2.1", "192.0.2.2"]}, {"ips": ["2001:db8::1"]}],
        ),
    )
    text = export(client).get_data(as_text=True)
    assert '"rule, ""quoted""\nsecond line"' in text
    row = dict(zip(*rows(export(client)), strict=True))
    assert row["action"] == "-1", "numbers are written as numbers, not escaped"
    assert row["sourceAsn"] == "64500"
    assert row["answers"] == "192.0.2.1;192.0.2.2;2001:db8::1"
    assert row["timestamp"] == "2024-05-01T12:00:00.000Z"


def test_formula_cells_are_neutralised(client):
    dangerous = {
        "profileId": "=cmd|' /C calc'!A0",
        "triggerValue": "+1+1",
        "spoofTarget": "@SUM(A1)",
        "statusCode": "-2",
        "rrType": "\tA",
        "clientId": "'quoted",
    }
    ingest(client, record(**dangerous))
    row = dict(zip(*rows(export(client)), strict=True))
    for name, value in dangerous.items():
        assert row[name] == "'" + value, name


def test_export_imports_back_identically(client, make_app, tmp_path, new_database):
    ingest(
        client,
        *[
            record(
                client_id=f"c{i % 4}",
                question=f"q{i}.example",
                timestamp=f"2024-05-01T10:{i:02d}:00.123Z",
                profileId="=danger" if i % 5 == 0 else "p",
                action=i % 4 - 1,
                trigger="filter",
                triggerValue='a,"b"',
                sourceIp="192.0.2.5",
                rrType="A",
                statusCode="NOERROR",
                protocol="dot",
                sourceGeoip={"countryCode": "DE", "city": "Köln", "isp": "-isp", "asn": 3320},
                answers=[{"ips": ["192.0.2.9", "2001:db8::9"]}],
            )
            for i in range(50)
        ],
    )
    first = export(client, "sortOrder=asc").get_data()
    path = tmp_path / "export.csv"
    path.write_bytes(first)

    other = make_app(ANALYTICS_DATABASE=new_database("other.db"), INSTANCE_PATH=str(tmp_path / "i"))
    result = other.test_cli_runner().invoke(args=["ingest", str(path)])
    assert result.exit_code == 0, result.output
    assert "Stored 50 records." in result.output
    second = other.test_client().get(f"/v2/activity-log/csv?{WINDOW}&sortOrder=asc", headers=AUTH).get_data()
    assert second == first


def test_large_exports_are_streamed_in_chunks(client):
    ingest(client, *[record(question=f"q{i}.com") for i in range(12_000)])
    response = client.get(f"/v2/activity-log/csv?{WINDOW}", headers=AUTH, buffered=False)
    assert response.is_streamed
    chunks = list(response.response)
    assert len(chunks) >= 3, "one chunk per batch of rows, not one body"
    assert sum(chunk.count(b"\r\n") for chunk in chunks) == 12_001


@pytest.mark.parametrize("descending", [True, False])
@pytest.mark.parametrize("frozen", [True, False], ids=["frozen", "rows"])
def test_each_export_batch_seeks_past_the_rows_before_it(app, client, engine, descending, frozen, monkeypatch):
    """An export's work grows with its rows, not their square: a batch that walked again past
    every row already exported made a 1M-row export run at half its speed. (Counted over the
    whole export: a batch that unpacks a run of frozen hours does more than the others.)"""
    if engine != "sqlite":
        pytest.skip("counts the steps of SQLite's virtual machine")
    if not frozen:  # the records' 2024 times are past the hot horizon: kept as rows all the same
        monkeypatch.setattr(models.records.freezing, "hot_hours", 10**7)
    ingest(
        client,
        *[
            record(question=f"q{i}.com", timestamp=f"2024-05-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z")
            for i in range(8_000)
        ],
    )
    frozen_count = stores.scalar(client.application.config["ANALYTICS_DATABASE"], "SELECT COUNT(*) FROM record_block")
    assert bool(frozen_count) == frozen

    def steps_to_export(end_ms):
        steps, seen = [0], []
        with app.app_context(), models.engine.database.connection() as db:
            db.connection().set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1), 10)
            try:
                for rows in models.clients.activity.iter_raw_batches(
                    Filters(start_ms=1714521600000, end_ms=end_ms), descending, batch_size=100
                ):
                    seen.extend(row[0] for row in rows)
            finally:
                db.connection().set_progress_handler(None, 0)
        assert len(seen) == len(set(seen))
        return len(seen), steps[0]

    half_rows, half = steps_to_export(1714521600000 + 4_000_000 - 1)  # the first 4,000 seconds
    whole_rows, whole = steps_to_export(1714608000000)
    assert (half_rows, whole_rows) == (4_000, 8_000)
    assert whole < 2.6 * half, (half, whole)


def test_bad_parameters(client):
    assert_error(client.get("/v2/activity-log/csv", headers=AUTH), 400, 40003)
    assert_error(client.get(f"/v2/activity-log/csv?{WINDOW}&sortOrder=sideways", headers=AUTH), 400, 40001)
    assert_error(client.get(f"/v2/activity-log/csv?{WINDOW}"), 401, 40101)
