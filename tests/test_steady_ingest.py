"""The store keeps its promises while records keep arriving (real gunicorn): freezing takes its
share every look, and a client deletion of many records lets ingest go on between its batches."""

import itertools
import threading
import time

from stores import run_sql, scalar

from models.clock import now_ms
from schemas.datetimes import format_ms

from helpers import API_KEY, AUTH, record, wait_for
from servers import Gunicorn

HOUR = 3_600_000
COUNTED = "SELECT CAST(value AS BIGINT) FROM store_setting WHERE name = 'rollups_counted_through'"
FROZEN = "SELECT COALESCE(SUM(n), 0) FROM record_block"


class Sender(threading.Thread):
    """Posts the batches `make(number)` one after another until stopped; keeps what each took."""

    def __init__(self, server, make):
        super().__init__(daemon=True)
        self.server, self.make = server, make
        self.stop, self.sent, self.posts, self.errors = threading.Event(), 0, [], []

    def run(self):
        number = 0
        while not self.stop.is_set():
            records = self.make(number)
            started = time.monotonic()
            status, body = self.server.call("POST", "/v2/ingest", records, AUTH)
            self.posts.append((started, time.monotonic()))
            if status != 200 or body["accepted"] != len(records):
                self.errors.append((status, body))
            self.sent += len(records)
            number += 1

    def finish(self):
        self.stop.set()
        self.join(30)
        assert not self.is_alive() and not self.errors, self.errors


def waiting(database) -> int:
    """Records stored but not counted yet (ids past the counting's mark)."""
    return scalar(database, "SELECT COALESCE(MAX(id), 0) FROM record") - scalar(database, COUNTED)


def test_freezing_takes_its_share_while_records_arrive(tmp_path, database):
    """Records past the hot horizon keep arriving beside today's (a backfill, a feed catching
    up): each look freezes its share during the load, not only once the load stops, and the
    counting keeps up meanwhile."""
    server = Gunicorn(
        tmp_path,
        {"ANALYTICS_DATABASE": database, "ANALYTICS_API_KEY": API_KEY, "ANALYTICS_FREEZE_INTERVAL": "1"},
        workers=2,
    )
    old_hour = (now_ms() // HOUR - 72) * HOUR  # a day past the 48 hours' horizon

    def batch(sender: int):
        def make(number: int) -> list[dict]:
            return [
                record(
                    "home",
                    f"c{i % 20}",
                    format_ms((old_hour if i % 2 else now_ms() // HOUR * HOUR - HOUR) + (number * 400 + i) * 50 % HOUR),
                    f"s{sender}-{number}-{i}.example",
                )
                for i in range(400)
            ]

        return make

    senders = [Sender(server, batch(s)) for s in range(2)]
    samples = []  # (seconds into the load, records sent, records frozen, records waiting to be counted)
    try:
        started = time.monotonic()
        for sender in senders:
            sender.start()
        while time.monotonic() - started < 12:
            sent = sum(sender.sent for sender in senders)
            samples.append((round(time.monotonic() - started, 1), sent, scalar(database, FROZEN), waiting(database)))
            time.sleep(0.5)
        for sender in senders:
            sender.finish()
        sent = sum(sender.sent for sender in senders)

        # Half the records sent are past the horizon. Before, none was frozen until the load
        # stopped: the counting process caught up as long as each catch-up found records.
        _, sent_then, frozen_then, _ = samples[-1]
        assert frozen_then >= sent_then / 8, f"too few frozen during the load: {samples}"
        looks = sum(later[2] > earlier[2] for earlier, later in itertools.pairwise(samples))
        assert looks >= 3, f"frozen in fewer than 3 looks during the load: {samples}"
        # Under ANALYTICS_COUNT_BEHIND, so that no batch had to count for the counting process.
        assert max(sample[3] for sample in samples) < 50_000, f"the counting fell behind: {samples}"

        wait_for(lambda: waiting(database) == 0, 20, "every record counted")
        wait_for(lambda: scalar(database, FROZEN) == sent // 2, 30, "every record past the horizon frozen")
        assert scalar(database, "SELECT COUNT(*) FROM record") == sent // 2
        status, body = server.call("GET", f"/v2/statistic/count?startTime={format_ms(old_hour)}", headers=AUTH)
        assert (status, body["count"]) == (200, sent)
        assert run_sql(database, "SELECT COUNT(*) FROM record WHERE ts < ?", [old_hour + HOUR]) == [(0,)]
    finally:
        for sender in senders:
            sender.stop.set()
        server.stop()
