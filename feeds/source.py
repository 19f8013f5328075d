"""What a feed's source is: something that yields records in batches, each with the resume
point the source reaches once it is committed, and knows nothing of where they go.

A source with a resume point (record files, Pi-hole's database, AdGuard Home's query log) is a
`Source`: asked for its readings with a way to look up a saved position, it yields one `Reading`
per stream it holds (AdGuard Home's log and its rotated predecessor are two), each under a key
of its own; `feeds.common.feed_source` commits their batches to any sink. The dnstap stream has
no resume point (a resolver's messages cannot be read again): the collector pushes its batches
to a live sink (feeds/sinks.LiveSink), and shares with the others what names it (`Named`).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .common import Batch


@dataclass
class Reading:
    """One stream of a source, read from the position saved under `key`."""

    key: str  # the position's key (and the spool folder's and bad-record file's, per sink)
    batches: Iterator[Batch]
    start: int  # progress-bar units already behind (query ids, bytes)
    end: int  # progress-bar units at the source's end when the reading began
    label: str  # the progress bar's
    bar: bool = True  # a progress bar at all (small or followed sources are done before it says anything)
    aged_out: int = 0  # records the source deleted before they were read (counted once a batch moved past them)
    once: bool = False  # the stream cannot be read again (standard input): its position is forgotten after


@runtime_checkable
class Named(Protocol):
    """What every source has, live or not."""

    name: str  # how messages name it (a path, '-', the collector's endpoint)

    def keys(self) -> list[str]:
        """The keys a sink keeps its positions (and spool folders, bad-record files) under."""
        ...


@runtime_checkable
class Source(Named, Protocol):
    """A source with a resume point."""

    def readings(self, position: Callable[[str], dict], announce: bool) -> Iterator[Reading]:
        """Its streams, each read after `position(key)` (the saved position, {} for none);
        `announce`: say where each resumes (a followed source's later looks say nothing). A
        stream is read while its reading is iterated: its file or database stays open until
        the next reading is asked for."""
        ...
