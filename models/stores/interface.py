"""RecordStore: every operation the app performs on records or on what is derived from them
(counts, first and last sightings, last activity), as a store promises it. The small
transactional data (keys, client entries' aliases, alert rules, outputs and their leases, the
admin and access logs, settings) is not the record store's: the app calls it directly, and it
stays in ANALYTICS_DATABASE whichever store keeps the records (docs/layout.md, "The record
store's seam")."""

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

from models.clients import activity
from models.ingest import ingestion
from models.records.filters import Filters

# What the wire needs of the store besides its operations, the same for every store: the
# fields of a raw row (iter_raw_batches), and the refusal of a batch stored before (store_once).
ROW_FIELDS = activity.ROW_FIELDS
AlreadyStored = ingestion.AlreadyStored


class RecordStore(ABC):
    """Where the records are kept. A record goes in as (values, client metadata): the values of
    catalogue.FIELDS in its order (texts for strings, the endpoint's name and the client's id;
    None: unknown) and {client column: value} of what it says of its client. Records come out
    as rows whose fields are ROW_FIELDS (`id`, then catalogue.READ_FIELDS by their column
    names), texts for strings. Every record has a number (`id`), handed out in the order the
    records are committed and never reused. A window is the Filters' [start_ms, end_ms]; "the
    selected records" are those the Filters match (endpoints, clients, fields, searches)."""

    # The records a live feed gathers before it stores a batch here while records flow (the
    # collector's --batch-size when none is given): a SQL store's commit costs little.
    FEED_BATCH = 500

    # Ingest

    @abstractmethod
    def store_records(self, records: list[tuple], in_transaction=None, first=None) -> int:
        """Store new records all or nothing, enriched once (models/ingest/enrichment.py:
        geography, then the endpoint's privacy settings, then the registrable domain), with
        their client entries made or updated; how many. `first()`, if given, runs before
        anything is written (an exception from it writes nothing); `in_transaction()`, if
        given, runs once the records are written and what it writes in ANALYTICS_DATABASE
        commits or rolls back with them. Records stored may wait a while (set_behind_limit)
        before they are counted, but every read counts them."""

    @abstractmethod
    def store_once(self, records: list[tuple], key: str, now_ms: int) -> int:
        """store_records, remembering the batch's `key` with it; AlreadyStored (nothing
        written) when a batch under this key was stored before. Two batches under one key at
        once store one."""

    # The activity log

    @abstractmethod
    def page_records(self, filters: Filters, page: int, page_size: int, descending: bool = True) -> list:
        """Page `page` (from 0) of `page_size` of the selected records, as rows, ordered by
        (ts, id), newest first unless not `descending`."""

    @abstractmethod
    def iter_raw_batches(self, filters: Filters, descending: bool = True, batch_size: int = 5000) -> Iterator[list]:
        """Every selected record in the log's order, as raw rows (tuples in ROW_FIELDS' order
        whose strings may be references that value_texts turns into texts), a list of about
        `batch_size` at a time, memory flat. No batch holds the store while the caller
        handles it; a record is handed on once, and left out only if a deletion or an expiry
        removed it before its batch was read."""

    def csv_lines(self, filters: Filters, descending: bool = True) -> Iterator[bytes] | None:
        """The CSV export's lines (catalogue.CSV_FIELDS, each ending "\\r\\n", no header) of
        every selected record, in the log's order, as iter_raw_batches hands them on, written by
        the store itself as UTF-8, a text per batch; None where the store writes none (the wire
        then writes them from the raw rows: schemas/csv_format.py, whose bytes these must be)."""
        return None

    @abstractmethod
    def value_texts(self, storage: str, values) -> dict:
        """{raw value: its text} for raw values (iter_raw_batches) of a field stored as
        `storage` (catalogue's storages); an endpoint or client no longer kept is absent."""

    @abstractmethod
    def records_after(self, filters: Filters, last_id: int, limit: int = 500, scan: int = 20_000) -> tuple[list, int]:
        """The selected records numbered in (last_id, last_id + scan], lowest number first, at
        most `limit`, as rows; and the number the next call starts after: the last one
        examined, matching or not, so that a stream moves on and reads nothing twice.
        Records of clients deleted meanwhile are read past, not returned."""

    @abstractmethod
    def committed_top(self) -> int:
        """The highest record number visible now (0: none); every record committed later has a
        higher one, so a stream starting now starts after it."""

    # Statistics (every count includes the records stored but not counted yet)

    @abstractmethod
    def count(self, filters: Filters) -> int:
        """How many records the filters select."""

    @abstractmethod
    def top(self, filters: Filters, column: str, limit: int, descending: bool = True) -> list[tuple[str, int]]:
        """The `limit` most (or fewest, not `descending`) frequent values of the field stored
        as `column` among the selected records: (text, count), ties by text ascending; ""
        stands for unknown."""

    @abstractmethod
    def series(self, filters: Filters, interval_ms: int) -> dict[int, int]:
        """{bucket start: count} of the selected records per time bucket, each bucket's start a
        multiple of `interval_ms` (a bucket without records may be absent)."""

    @abstractmethod
    def top_series(self, filters: Filters, interval_ms: int, column: str, limit: int) -> tuple[list[str], dict]:
        """The window's `limit` most frequent values of `column` and their counts per bucket:
        (values, {bucket start: {value: count}})."""

    @abstractmethod
    def trend(self, filters: Filters, baseline: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
        """The `limit` most frequent values of `column` under `filters`, each with its count
        there and under `baseline` (another window): (value, count, baseline count)."""

    @abstractmethod
    def counts_of(self, filters: Filters, column: str, values: list[str]) -> dict[str, int]:
        """{value: count} of these texts of `column` among the selected records, kept cheap for
        long windows (a baseline over days)."""

    @abstractmethod
    def newly_seen(self, filters: Filters, column: str, limit: int) -> list[tuple[str, int, int]]:
        """The names (`column`: question or registrable domain) first seen, over all stored
        history the statistics keep, inside the window: (name, first seen ms, selected records
        in the window), newest first, ties by name; at most `limit`."""

    @abstractmethod
    def latency(self, filters: Filters, column: str | None = None, limit: int = 1, descending: bool = True) -> list:
        """Response-time summaries (value, count, mean, p50, p95, max) of the selected records
        that have one: of them all (`column` None: one row, value None), or of the `limit`
        values of `column` with the most (fewest) of them, ties by value."""

    @abstractmethod
    def availability(self, filters: Filters) -> tuple[int | None, int | None, int]:
        """(oldest timestamp, newest timestamp, count) of the records the filters allow."""

    @abstractmethod
    def statistics_start(self) -> int | None:
        """The start (ms) of the oldest period the statistics still count; None if none."""

    # Clients and deletion

    @abstractmethod
    def list_clients(self, endpoint: str | None = None, client_ids=None, endpoint_limit=None) -> tuple[dict, list]:
        """The selected client entries with their last activity (their newest record's time,
        None when they have none), and the last activity of their endpoints (every record of
        the endpoint, and the newest it lost to deletion or retention): ({endpoint: ms or
        None}, [ClientRow]), by endpoint name then client id."""

    @abstractmethod
    def set_logged(self, endpoint: str, client_id: str, logged: bool) -> tuple:
        """Mark a client logged or not: (its entry, made if it was not seen yet; how many of its
        records went). Marked not logged, its records and its entry's metadata (not the
        alias) go, their counts left in the statistics."""

    @abstractmethod
    def purge_records(
        self, endpoints, client_ids, end_ms: int, endpoint_limit, batch_size: int, after_batch=None
    ) -> int:
        """The bulk of a client deletion: the selected clients' records up to `end_ms`, in steps
        of at most `batch_size` records that let ingest go on between them, each consistent on
        its own (`after_batch(deleted so far)` committed with each); how many went.
        delete_clients ends the deletion."""

    @abstractmethod
    def delete_clients(self, endpoints=None, client_ids=None, end_ms: int = 0, endpoint_limit=None) -> tuple[list, int]:
        """The selected clients' records up to `end_ms` deleted, and their entries left without
        records, at once: (the deleted (endpoint, client id), sorted; how many records went).
        An entry with a newer record stays (the client came back); a client with no record
        left has no last activity."""

    @abstractmethod
    def delete_records(
        self,
        endpoints=None,
        client_ids=None,
        end_ms=None,
        batch_size=None,
        endpoint_limit=None,
        after_batch=None,
        expire=False,
    ) -> int:
        """Delete the selected clients' records (everyone's with neither filter) up to `end_ms`
        (inclusive; None: all); how many. Their counts leave the statistics, unless they
        `expire`, when only the statistics that expire with the records lose them; their
        endpoints' last activity does not move back. Without `batch_size`, one step inside the
        caller's write transaction; with it, steps of that many records, each committed with
        `after_batch(deleted so far)`."""

    @abstractmethod
    def future_records(self, after_ms: int) -> list[tuple[str, int, int, int]]:
        """(endpoint, records, oldest, newest timestamp) of the records stamped after `after_ms`,
        per endpoint."""

    @abstractmethod
    def delete_future(self, after_ms: int) -> int:
        """Delete the records stamped after `after_ms`, their counts taken out of the
        statistics; how many. Their time is no one's activity: last activity reads as if they
        had never been stored. Inside the caller's write transaction."""

    @abstractmethod
    def expire_statistics(self, before_ms: int) -> int:
        """Drop the statistics of whole periods that ended before `before_ms`; how many rows
        (or parts) of statistics went."""

    @abstractmethod
    def limit_reads(self, seconds: float | None) -> None:
        """Stop this thread's reads of the store that run past `seconds` from their start with
        models.engine.database.QueryStopped (None: lift the limit). Reads of ANALYTICS_DATABASE
        are limited by models.engine.database.limit_queries."""

    # Status for the metrics

    @abstractmethod
    def database_sizes(self) -> tuple[int, int | None]:
        """(bytes the store takes, bytes of its write-ahead log, None where it keeps none)."""

    @abstractmethod
    def endpoints_by_age(self) -> list[tuple[str, int | None]]:
        """(name, last activity ms or None) of every endpoint, oldest first."""

    @abstractmethod
    def first_endpoints(self, limit: int) -> list[str]:
        """The names of the `limit` endpoints seen first (a list that only grows)."""

    # Upkeep: counting stored records into the statistics, and compacting old ones

    @abstractmethod
    def set_behind_limit(self, records: int) -> None:
        """Let up to `records` stored records wait to be counted (a web worker's, behind whom
        the counting process counts); 0, every batch counted as it is stored."""

    @abstractmethod
    def configure(self, config) -> None:
        """Take the installation's settings (the Flask config or runtime.config.read()) that
        shape how records are kept."""

    @abstractmethod
    def open(self) -> None:
        """Open what the records are kept in now, not at first use: a process that will store
        (a feed's local sink) says at its start that it cannot (models.clickhouse.target.
        BadTarget: a chDB folder another process has open)."""

    @abstractmethod
    def close(self) -> None:
        """Let go of what the records are kept in, for another process to open (a chDB folder
        opens in one process at a time: a collector's store process stores its batches)."""

    @abstractmethod
    def waiting(self) -> int:
        """About how many stored records wait to be counted (cheap: polled)."""

    @abstractmethod
    def not_counted(self) -> int:
        """How many stored records wait to be counted, exactly."""

    @abstractmethod
    def catch_up_aside(self) -> int:
        """Count records waiting to be counted, holding up ingest as little as possible; how
        many (0: none, or another process counted meanwhile)."""

    @abstractmethod
    def freeze_a_look(self, arrived: bool) -> int:
        """Compact what is past the recent hours, in steps that let ingest and counting go on
        (a bounded share while records arrive, `arrived`: some were counted just before);
        how many records. Run by the process that has the turn to count."""

    # Privacy rewrites of stored records

    @abstractmethod
    def change_privacy(self, endpoint: str, fields: dict, now: int) -> tuple[dict, int]:
        """models.privacy.privacy.change, and the records stored so far of every endpoint whose
        settings it made stricter set to be rewritten: (the settings in force, how many
        records are still to rewrite). Inside the caller's write transaction."""

    @abstractmethod
    def privacy_in_force(self, endpoint_limit=None) -> dict[str, tuple[dict, int]]:
        """{endpoint (or DEFAULT): (settings in force, stored records still to rewrite)}."""

    @abstractmethod
    def plan_ages(self, now: int) -> None:
        """Set the records that reached a privacy age step since the last time to be
        rewritten. Inside the caller's write transaction."""

    @abstractmethod
    def run_rewrites(self, deadline: Callable[[], bool], on_finished=None) -> int:
        """Rewrite the records set to be rewritten, oldest task first, until none is left or
        `deadline()` is true; how many. `on_finished(endpoint, kind, detail, rewritten)` is
        committed with the end of each task."""

    @abstractmethod
    def clean_unused_terms(self, deadline: Callable[[], bool]) -> tuple[int, int]:
        """Forget the strings no stored record or statistic refers to any more (privacy: a name
        rewritten away leaves no trace), until done or `deadline()`: (looked at, gone)."""

    # What alerts read of the records

    @abstractmethod
    def endpoint_activity(self, names: list) -> dict[str, int | None]:
        """{endpoint: last activity ms, None when it has no record or was never seen}."""

    @abstractmethod
    def alert_records_after(self, names: list, clients: list | None, after_id: int, limit: int) -> tuple[list, int]:
        """Records numbered after `after_id` of the named endpoints (and clients), lowest first,
        at most `limit`, as (id, ts, endpoint, client, question, registrable domain); and the
        number to go on from (the last read; `after_id` when none)."""

    @abstractmethod
    def client_counts(self, names: list, clients: list | None, start_ms: int, end_ms: int) -> list[tuple]:
        """Per client of the named endpoints (and clients) with records in [start_ms, end_ms]:
        (endpoint, client id, records, NXDOMAIN answers, blocked)."""

    @abstractmethod
    def seed_domains(self, rule_id: int, names: list, since_ms: int) -> None:
        """Mark the registrable domains asked on the named endpoints since `since_ms` as known
        to the new-domain rule `rule_id` (subjects "endpoint/domain"), from the names' first
        and last sightings kept past the records' horizon."""

    # What outputs read of the records

    @abstractmethod
    def newest_id(self) -> int:
        """The number an output that starts "now" starts after."""

    @abstractmethod
    def pending(self, output, limit: int) -> tuple[list, int]:
        """The output's next records after its cursor, on its endpoints, lowest number first,
        at most `limit`, as rows; and the number its cursor may move to once they are accepted
        (past other endpoints' records too)."""

    @abstractmethod
    def backlog(self, output, at_most: int) -> int:
        """How many of the output's records are stored after its cursor, counted up to
        `at_most`."""

    @abstractmethod
    def skip_point(self, output, keep: int) -> tuple[int, int] | None:
        """Where the output's cursor would go for only its newest `keep` records to remain, and
        how many it would pass; None when no more than `keep` wait. Reads only."""
