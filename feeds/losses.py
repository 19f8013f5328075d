"""What a feed loses, never silently: each place's total is logged with its rate while it
grows, and reported through the sink (models.ingest.losses keeps it), so that the service's /metrics
shows it whichever host the feed runs on. Queries a resolver never answered are counted, logged
and reported the same way, but apart (UNANSWERED, not LOST): no record was lost there."""

import collections
import time
import uuid
from collections.abc import Callable

from models.ingest.losses import COUNTED_APART, LOSS_PLACES

REPORT_EVERY = 10.0  # seconds between two reports (and log lines) while losses grow

ADVICE = {
    "collector-queue": "The store is slower than the resolvers: give the collector its own core, push from the "
    "resolver's host with --url, or run one collector per resolver (docs/feeding.md, Rate).",
    "resolver": "The resolver dropped dnstap messages the collector did not read in time: see docs/feeding.md, Rate.",
    "source-aged-out": "The feed fell behind its source: keep it following (--follow), or look more often "
    "(--interval).",
}


class Losses:
    """A feed run's losses by place. `report(run, endpoint, totals)` sends the totals to the
    store (it may raise: the next flush tries again); `log` takes a line."""

    def __init__(self, endpoint: str, report: Callable[[str, str, dict], None], log: Callable[[str], None]):
        self.run = uuid.uuid4().hex
        self.endpoint = endpoint
        self.report = report
        self.log = log
        self.totals: collections.Counter = collections.Counter()
        self._reported: dict = {}
        self._logged: tuple[dict, float] = ({}, time.monotonic())

    def add(self, place: str, count: int = 1) -> None:
        assert place in LOSS_PLACES
        self.totals[place] += count

    def set(self, place: str, total: int) -> None:
        """A total counted elsewhere (e.g. by the dnstap decoder); COUNTED_APART's too."""
        assert place in LOSS_PLACES or place in COUNTED_APART
        if total:
            self.totals[place] = total

    def flush(self) -> None:
        """Log what grew since the last flush, with its rate, and report totals that changed."""
        now = time.monotonic()
        before, since = self._logged
        for place, total in sorted(self.totals.items()):
            grown = total - before.get(place, 0)
            if grown > 0:
                seconds = max(now - since, 0.001)
                self.log(_line(place, grown, seconds, total))
        self._logged = (dict(self.totals), now)
        if dict(self.totals) == self._reported:
            return
        totals = dict(self.totals)
        try:
            self.report(self.run, self.endpoint, totals)
        except Exception as exc:  # the store or the service is away: the totals go with the next flush
            self.log(f"Could not report the losses ({exc.__class__.__name__}: {exc}); trying again later")
            return
        self._reported = totals


def _line(place: str, grown: int, seconds: float, total: int) -> str:
    rate = f"in {seconds:.0f} s ({grown / seconds:,.0f}/s)"
    if place == "unanswered":  # no record lost: an alarm that is not a loss teaches people to ignore LOST
        return (
            f"UNANSWERED {grown:,} queries {rate}: the resolver logged them and sent no response within the "
            f"collector's --answer-within; {total:,} since this run started. Not a loss: no upstream reachable, "
            "or its upstreams time out (docs/feeding.md, Losses)."
        )
    return (
        f"LOST {grown:,} records {rate} at {place} ({LOSS_PLACES[place]}); {total:,} since this run started. "
        f"{ADVICE[place]}"
    )
