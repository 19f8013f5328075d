"""Record blocks of a format this release does not read (models/records/block_formats.py): refused
with one clear error naming the block's format and the one this release reads, whether an older
format (tests/data/blocks/, packed by the code that wrote it: scripts/make-block-fixtures) or a
newer one, and nothing in the store changed."""

import logging
import pathlib

import pytest

from models.records import block_formats, blocks

from support import stores
from support.helpers import AUTH, ingest, record

BLOCKS = pathlib.Path(__file__).parent / "data" / "blocks"
WINDOW = "startTime=2024-05-01T00:00:00Z&endTime=2024-05-02T00:00:00Z"

# The SQL store's own parts (docs/testing.md, "Engines"): not run on ClickHouse.
pytestmark = pytest.mark.sql_store


@pytest.mark.parametrize("form", [1, 2])
def test_a_block_an_older_commit_wrote_is_refused_naming_its_format(form):
    blob = (BLOCKS / f"format{form}.bin").read_bytes()
    with pytest.raises(block_formats.UnreadableBlock) as refused:
        blocks.unpack(blob)
    assert str(refused.value) == (
        f"a record block of format {form}, which this release does not read (it reads format 3):"
        f" {block_formats.UNRELEASED[form]} (docs/record-store.md, Block formats)."
    )


def test_a_block_of_a_newer_format_is_refused_naming_both_and_left_as_it_was(client, database, caplog):
    ingest(client, *[record("ep1", "c1", f"2024-05-01T10:0{i}:00Z", f"n{i}.example") for i in range(3)])
    ((stored,),) = stores.run_sql(database, "SELECT data FROM record_block")
    newer = bytes([4]) + bytes(stored)[1:]
    stores.run_sql(database, "UPDATE record_block SET data = ?", [newer])

    with caplog.at_level(logging.ERROR):
        answer = client.get(f"/v2/activity-log?{WINDOW}", headers=AUTH)
    assert answer.status_code == 500
    assert answer.json["error"]["code"] == 50001
    assert (
        "UnreadableBlock: a record block of format 4, newer than this release reads (format 3): a newer release"
        " wrote it. Run that release (or a later one) on this database, or restore a backup made before it ran."
    ) in caplog.text
    assert [bytes(data) for (data,) in stores.run_sql(database, "SELECT data FROM record_block")] == [newer]
