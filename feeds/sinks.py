"""Where a feed's records go: the local store, or a remote service through an on-disk spool.

A feed reads its source from a resume point and hands each batch to a sink with the point the
source stands at after it. The sink commits both at once: the local store in one transaction
(records and position), the remote sink in one spool file (records and position), which a
sender thread then delivers in order to POST /v2/ingest with an idempotency key, so a batch
sent again after a crash or a time-out is never stored twice. The resume point advances only
with the commit: a feed killed at any moment resumes without loss or doubling.
"""

import collections
import contextlib
import fcntl
import hashlib
import json
import logging
import math
import multiprocessing
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Protocol

import orjson

import models.engine.database
import models.ingest.ingestion
import models.ingest.losses
import models.stores.bound
import schemas.geoip
import schemas.record_times
from models.ingest.imports import ProgressMoved, forget_progress, get_progress, save_progress
from models.runtime.clock import now_ms

from .common import rejects_name, set_aside, validate, validate_text

log = logging.getLogger(__name__)

# How long a remote batch may wait between tries at most, and how long one try may take.
MAX_BACKOFF_SECONDS = 30.0
SEND_TIMEOUT_SECONDS = 60.0
# An upload of at least this size broken off by the service is taken for a body too large (see
# RemoteSink._post); smaller ones are a connection problem, tried again as they are.
CUT_BODY_BYTES = 1024 * 1024
# How much of a refusal's body is read (an ErrorResponse is far shorter).
MAX_ANSWER_BYTES = 64 * 1024
# The ErrorResponse of POST /v2/ingest for one invalid record: its code and how it names it.
INVALID_RECORD = 40005
_RECORD_INDEX = re.compile(r"Record (\d+): ")


class FeedError(Exception):
    """The feed cannot go on (another run owns the source, the service refused the batches);
    its message says why and what to do. What was committed stays committed."""


class LocalSink:
    """Records into this installation's store, the source's position in the same transaction;
    refused records into bad-record files in `rejects` (a folder)."""

    def __init__(self, rejects: str):
        self._tokens: dict[str, str | None] = {}
        self.rejects = rejects

    def rejects_path(self, source: str) -> str:
        return os.path.join(self.rejects, rejects_name(source))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def position(self, source: str) -> dict:
        saved = get_progress(source)
        self._tokens[source] = saved["text"] if saved else None
        return saved["position"] if saved else {}

    def forget(self, source: str):
        with models.engine.database.write_transaction():
            forget_progress(source)

    def commit(self, source: str, records: list, wire: list[dict], position: dict, skipped: int):
        """Store `records` (validated, see schemas.records.parse_record) and move `source` to
        `position`, all or nothing."""
        token = self._tokens.get(source)

        def save():
            self._tokens[source] = save_progress(source, token, position, len(records), skipped, now_ms())

        try:
            if records:
                models.stores.bound.records().store_records(records, in_transaction=save)
            else:
                with models.engine.database.write_transaction():
                    save()
        except ProgressMoved:
            raise FeedError(
                "another run of this import moved its position meanwhile; this run stopped without storing "
                "its last batch (nothing is stored twice)"
            ) from None

    def pending(self) -> int:
        return 0

    def report_losses(self, run: str, endpoint: str, totals: dict) -> None:
        _report_losses(run, endpoint, totals)

    def check(self):
        pass


class RemoteSink:
    """Records posted to another installation's POST /v2/ingest, through a spool directory.

    Layout: one folder per source (named by a hash of its key), holding `state.json` (the
    source's key, the spool's id, the last batch number and the source's position) and one
    `NNNNNNNNNNNN.json` per batch not yet delivered. A folder is used by one feed at a time (a
    lock file). A batch is written before the state that counts it; the sender sends only the
    batches the state counts, and a batch found beyond the state (a crash between the two
    writes) is counted on the next start, so a batch number is never used twice."""

    def __init__(self, url: str, key: str, spool: str, *, wait_seconds: float = 30.0):
        if not url.startswith(("http://", "https://")):
            raise FeedError(f"--url must be the service's base URL, http://... or https://...; got {url!r}")
        self.url = url.rstrip("/") + "/v2/ingest"
        self.key = key
        self.spool = spool
        self.wait_seconds = wait_seconds  # how long closing waits for the spool to drain
        self._folders: dict[str, str] = {}
        self._locks = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._error: str | None = None
        # The fewest records in a part the service found too large: larger parts are split
        # before they are sent, rather than each uploaded in vain first.
        self._too_many: int | None = None
        self._sender = threading.Thread(target=self._send_loop, name="spool-sender", daemon=True)

    def __enter__(self):
        os.makedirs(self.spool, exist_ok=True)
        # Batches of earlier runs are sent too, whatever source this run reads (standard
        # input, a rotated file, a replaced database): each folder not in use by another feed.
        for name in sorted(os.listdir(self.spool)):
            state = os.path.join(self.spool, name, "state.json")
            if os.path.exists(state):
                with contextlib.suppress(FeedError, OSError, ValueError, KeyError):
                    with open(state, encoding="utf-8") as handle:
                        self._folder(json.load(handle)["source"])
        self._sender.start()
        return self

    def __exit__(self, exc_type, *exc):
        self._wake.set()
        deadline = time.monotonic() + self.wait_seconds
        while self.pending() and self._error is None and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.set()
        self._wake.set()
        self._sender.join(timeout=SEND_TIMEOUT_SECONDS)
        for handle in self._locks:
            handle.close()
        if exc_type is None:
            self.check()
        return False

    def position(self, source: str) -> dict:
        return _read_state(self._folder(source))["position"]

    def rejects_path(self, source: str) -> str:
        return os.path.join(self._folder(source), "rejected.ndjson")

    def forget(self, source: str):
        folder = self._folder(source)
        _write_atomically(os.path.join(folder, "state.json"), {**_read_state(folder), "position": {}})

    def commit(self, source: str, records: list, wire: list[dict], position: dict, skipped: int, check=True):
        """Write the batch with `position` to the spool (durably), for the sender to deliver.
        `check`: first stop (FeedError) if the service refused a batch for good."""
        if check:
            self.check()
        folder = self._folder(source)
        state = _read_state(folder)
        number = state["batch"] + 1
        if wire:
            batch = {"idempotencyKey": f"{state['spool']}-{number}", "records": wire, "position": position}
            _write_atomically(os.path.join(folder, f"{number:012d}.json"), batch)
        _write_atomically(os.path.join(folder, "state.json"), {**state, "batch": number, "position": position})
        self._wake.set()

    def pending(self) -> int:
        """Batches in the spool not yet delivered."""
        return sum(len(_batch_files(folder)) for folder in self._folders.values())

    def check(self):
        """FeedError if the service refused a batch for good (it stays in the spool)."""
        if self._error is not None:
            raise FeedError(self._error)

    def _folder(self, source: str) -> str:
        folder = self._folders.get(source)
        if folder is None:
            folder = os.path.join(self.spool, hashlib.sha256(source.encode()).hexdigest()[:24])
            os.makedirs(folder, exist_ok=True)
            handle = open(os.path.join(folder, "lock"), "a")  # noqa: SIM115 - held while the sink lives
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise FeedError(f"another feed is using the spool {folder}; this one stopped") from None
            self._locks.append(handle)
            state_path = os.path.join(folder, "state.json")
            if not os.path.exists(state_path):
                _write_atomically(state_path, {"source": source, "spool": uuid.uuid4().hex, "batch": 0, "position": {}})
            state, files = _read_state(folder), _batch_files(folder)
            if files and int(files[-1].split(".")[0]) > state["batch"]:
                # Written just before a crash kept its state from being written: count it now.
                with open(os.path.join(folder, files[-1]), encoding="utf-8") as handle:
                    newest = json.load(handle)
                number = int(files[-1].split(".")[0])
                _write_atomically(state_path, {**state, "batch": number, "position": newest["position"]})
            self._folders[source] = folder
        return folder

    def _send_loop(self):
        backoff = 0.5
        while not self._stop.is_set():
            sent_any = False
            for folder in list(self._folders.values()):
                counted = _read_state(folder)["batch"]
                for name in _batch_files(folder):
                    if int(name.split(".")[0]) > counted:
                        break  # its state is not written yet: see the class's notes
                    try:
                        outcome = self._send(os.path.join(folder, name))
                    except Exception as exc:  # noqa: BLE001 - whatever it is, the batch waits
                        log.warning("sending a batch failed (%s: %s); it waits in the spool", type(exc).__name__, exc)
                        outcome = "later"
                    if outcome == "sent":
                        sent_any, backoff = True, 0.5
                        continue
                    if outcome == "refused":
                        return
                    self._stop.wait(backoff)  # unreachable: the same batch again, later
                    backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
                    break
            if not sent_any:
                self._wake.wait(1.0)
                self._wake.clear()

    def _send(self, path: str) -> str:
        """Deliver the batch in the file at `path`, part by part. A batch the service finds
        too large (a 413: more records than its ANALYTICS_MAX_BATCH, or a body over its
        ANALYTICS_MAX_BODY_MB or the proxy's limit; or a large body whose upload the service
        cut off) is split in two halves, in order, and those are sent instead; the file is
        rewritten (atomically) after each change. Every part has an idempotency key of its
        own, and before a part is split the service is asked, with an empty batch under the
        part's key, whether it stored the part already (its answer lost, the limit lowered
        since): so no crash, lost answer or split stores a record twice or loses one."""
        with open(path, encoding="utf-8") as handle:
            batch = json.load(handle)
        parts = batch.get("parts") or [{"idempotencyKey": batch["idempotencyKey"], "records": batch["records"]}]
        while parts:
            part = parts[0]
            if self._too_many is not None and len(part["records"]) >= self._too_many:
                outcome, detail = 413, "larger than a part the service found too large"
            else:
                outcome, detail = self._post(part["records"], part["idempotencyKey"])
            if outcome in (413, "cut") and len(part["records"]) > 1:
                self._too_many = min(len(part["records"]), self._too_many or len(part["records"]))
                outcome = self._post([], part["idempotencyKey"])[0]
                if outcome == "sent":  # not stored before: now its key stands for nothing
                    half = len(part["records"]) // 2
                    parts[:1] = [
                        {"idempotencyKey": f"{part['idempotencyKey']}.{n}", "records": records}
                        for n, records in ((1, part["records"][:half]), (2, part["records"][half:]))
                    ]
                elif outcome == "replayed":
                    parts = parts[1:]
            elif outcome in ("sent", "replayed"):
                parts = parts[1:]
            elif (index := _refused_record(outcome, detail, len(part["records"]))) is not None:
                # One record the service refuses (its clock or rules differ from the feed's):
                # set aside, and the rest of the part sent again under the same key (nothing
                # of a refused part is stored, so its key stands for nothing yet).
                # Beside the part (rejects_path would take the folder's lock: the sender may
                # deliver a spool no source of this run opened).
                folder = os.path.dirname(path)
                refused = [(part["records"][index], _message(detail))]
                set_aside(os.path.join(folder, "rejected.ndjson"), _read_state(folder)["source"], refused)
                rest = part["records"][:index] + part["records"][index + 1 :]
                parts[:1] = [{**part, "records": rest}] if rest else []
                outcome = "sent"
            if outcome in ("later", "cut"):
                return "later"
            if outcome not in ("sent", "replayed"):
                self._error = (
                    f"the service refused a batch with HTTP {outcome}: {detail[:300]}; it stays in the spool "
                    f"({path}) and is sent again when the feed restarts"
                )
                return "refused"
            if parts:
                _write_atomically(path, {"parts": parts, "position": batch["position"]})
        os.remove(path)
        return "sent"

    def report_losses(self, run: str, endpoint: str, totals: dict) -> None:
        """POST a feed run's losses to the service (raises when it cannot be reached or refuses)."""
        body = json.dumps({"run": run, "endpointId": endpoint, "losses": totals}).encode()
        request = urllib.request.Request(
            self.url + "/losses",
            data=body,
            method="POST",
            headers={"Authorization": self.key, "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def _post(self, records: list, idempotency_key: str) -> tuple[str | int, str]:
        """POST records: ("sent" or "replayed" (stored before), ""), ("later", ""), ("cut", why):
        the service stopped reading a large body, so stored none of it, or (the HTTP status
        refusing them, why)."""
        body = json.dumps({"records": records}, separators=(",", ":")).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Authorization": self.key,
                "Content-Type": "application/json",
                "Idempotency-Key": idempotency_key,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_SECONDS) as response:
                response.read()
                replayed = response.headers.get("Idempotency-Replayed") == "true"
        except urllib.error.HTTPError as exc:
            if exc.code in (408, 429) or exc.code >= 500:
                log.warning("the service answered %s; the batch waits in the spool", exc.code)
                return "later", ""
            return exc.code, exc.read(MAX_ANSWER_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            # A service refusing a body by its announced length answers without reading it and
            # closes: the upload breaks before its 413 can be read.
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, (BrokenPipeError, ConnectionResetError)) and len(body) >= CUT_BODY_BYTES:
                log.warning("the service cut off a %d-byte batch (%s); it is split", len(body), reason)
                return "cut", str(reason)
            log.warning("the service is unreachable (%s); batches wait in the spool", exc)
            return "later", ""
        return ("replayed" if replayed else "sent"), ""


class Sink(Protocol):
    """What a live feed hands its batches and its losses to (see LiveSink)."""

    def deliver(self, batch: list[dict]) -> collections.Counter: ...

    def report_losses(self, run: str, endpoint: str, totals: dict) -> None: ...


class LiveSink:
    """The sink of a live feed, a stream with no resume point (dnstap): `deliver(batch)`
    stores a batch in the local store, or spools it for the remote service. `store`: where the
    local store's batches go (a StoreProcess; default: this process)."""

    def __init__(self, sink, source: str, store=None):
        self.sink, self.source, self.store = sink, source, store
        if isinstance(sink, RemoteSink):
            sink.position(source)  # takes the spool folder now: a second collector stops at once

    def deliver(self, batch: list[dict]) -> collections.Counter:
        """Store (or spool) the records of a batch of wire records that the validator accepts,
        each checked alone (a record the store would refuse is skipped, not its batch); the
        rejections by field. The local store's process validates its batches itself, so that
        the collector's reading does not."""
        rejects = self.sink.rejects_path(self.source)
        if isinstance(self.sink, LocalSink):
            # Handed over as JSON text: cheaper to make than a pickle, and the store's process
            # then reads it as POST /v2/ingest reads a body (feeds.common.validate_text).
            body = _json_text(batch)
            if self.store is None:
                return _validate_and_store(body, self.source, rejects)
            return self.store.run(_validate_and_store, body, self.source, rejects)
        records, wire, rejected = validate(batch, now_ms(), (rejects, self.source))
        # Spooled whatever the sender's state: on disk the records wait for the operator
        # to fix what the service refused, instead of filling memory.
        self.sink.commit(self.source, records, wire, {}, 0, check=False)
        return rejected

    def report_losses(self, run: str, endpoint: str, totals: dict) -> None:
        if isinstance(self.sink, LocalSink) and self.store is not None:
            self.store.run(_report_losses, run, endpoint, totals)
        else:
            self.sink.report_losses(run, endpoint, totals)


class StoreProcess:
    """The local store written by a process of its own, so that a live feed's validating and
    writing run on another core than its reading and decoding (in one process they share one
    interpreter lock, and the reading pauses while a batch is stored: what a resolver sends
    meanwhile waits in its own small buffer, which overflows). The process is started on first
    use and again after it died (the batch it held is then delivered again: nothing of it was
    committed); it ignores SIGTERM, SIGINT and SIGHUP, so a stop is the feed's to carry out, and
    ends by itself once the feed is gone (see _follow_parent), killed outright too."""

    def __init__(
        self, database: str, record_store: str, wal_limit: int, geoip: tuple, hot_hours: int, future_tolerance: int
    ):
        self._settings = (database, record_store, wal_limit, geoip, hot_hours, future_tolerance)
        self._pool = None

    def run(self, function, *args):
        """`function(*args)` in the store's process (a module-level function: it is pickled)."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_open_store,
                initargs=(os.getpid(), *self._settings),
            )
        try:
            return self._pool.submit(function, *args).result()
        except BrokenProcessPool:
            self._pool = None
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


# Held while the store's process works on a batch: its end (see _follow_parent) waits for it.
_IN_HAND = threading.Lock()
PARENT_POLL_SECONDS = 0.2
# The store's process gives way to the reading one on a busy machine (its threads, ClickHouse's
# in chDB among them, take its niceness): a reading that falls behind loses what the resolver's
# dnstap buffer drops, a store that falls behind stores the next batches larger (up to ten times
# --batch-size), and loses records only once --max-pending of them wait, counted.
STORE_NICENESS = 10


def _open_store(
    parent: int, database: str, record_store: str, wal_limit: int, geoip: tuple, hot_hours: int, future_tolerance: int
) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    os.nice(STORE_NICENESS)
    models.engine.database.open_database(database, wal_limit)
    models.stores.bound.bind(models.stores.bound.for_settings({"ANALYTICS_RECORD_STORE": record_store}))
    # A spawned process starts with none of its parent's settings: the records it stores get
    # their geography from the operator's files here (models/ingest/enrichment.py), and what it
    # stores is frozen past the operator's hot horizon; records further in the future than the
    # operator's tolerance are refused.
    schemas.geoip.configure(*geoip)
    models.stores.bound.records().configure({"ANALYTICS_HOT_HOURS": hot_hours})
    schemas.record_times.configure(
        {"ANALYTICS_FUTURE_TOLERANCE_SECONDS": future_tolerance, "ANALYTICS_RECORD_STORE": record_store}
    )
    threading.Thread(target=_follow_parent, args=(parent,), name="follow-parent", daemon=True).start()


def _follow_parent(parent: int) -> None:
    """End this process once `parent` is gone, after the batch in hand. Nothing else would: a
    feed killed outright (SIGKILL) leaves it waiting for batches forever, holding the database
    open. Its parent's pid is compared, not a parent-death signal (PR_SET_PDEATHSIG fires when
    the *thread* that started the process ends: here a delivery's thread, gone after the first
    batch); `parent` is the feed's pid taken before the start, so a feed that died before this
    thread began is seen too."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_SECONDS)
    with _IN_HAND:
        try:
            # Closed, not just dropped: SQLite's last connection folds its write-ahead log back.
            models.engine.database.db.obj.close_all()
        finally:
            os._exit(0)


def _json_text(batch: list[dict]) -> bytes | list[dict]:
    """The batch as JSON text, or as it is where JSON cannot say it as it is: a number that is
    not finite (JSON has none: it would come back null, a value the validator takes) or a value
    JSON has no form for, which the validator must see to refuse."""
    try:
        body = orjson.dumps(batch)
    except orjson.JSONEncodeError:
        return batch
    return batch if b"null" in body and _not_finite(batch) else body


def _not_finite(value) -> bool:
    if value.__class__ is float:
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(map(_not_finite, value.values()))
    if isinstance(value, list | tuple):
        return any(map(_not_finite, value))
    return False


def _validate_and_store(batch: bytes | list[dict], source: str = "", rejects: str | None = None) -> collections.Counter:
    """Store the records of `batch` (wire records, or their JSON text) the validator accepts;
    the rejections (set aside in the bad-record file `rejects`)."""
    with _IN_HAND:
        aside = None if rejects is None else (rejects, source)
        if isinstance(batch, bytes):
            records, rejected = validate_text(batch, now_ms(), aside)
        else:
            records, _, rejected = validate(batch, now_ms(), aside)
        if records:
            with models.engine.database.connection():
                models.stores.bound.records().store_records(records)
    return rejected


def _report_losses(run: str, endpoint: str, totals: dict) -> None:
    with _IN_HAND, models.engine.database.connection():
        models.ingest.losses.report(run, endpoint, totals, now_ms())


def make_sink(url: str | None, key: str | None, spool: str | None, default_spool: str, rejects: str):
    """The local store (refused records set aside in the folder `rejects`), or with `url` the
    remote service through the spool (refused records set aside in each source's spool folder)."""
    if not url:
        return LocalSink(rejects)
    if not key:
        raise FeedError("--url needs --key: an API key with the ingest scope on that service")
    return RemoteSink(url, key, spool or default_spool)


def _refused_record(status, detail: str, size: int) -> int | None:
    """The index of the one record a 400 refused (the service's INVALID_RECORD), or None."""
    if status != 400:
        return None
    message, code = _message(detail), None
    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
        code = json.loads(detail)["error"]["code"]
    match = _RECORD_INDEX.match(message)
    if code != INVALID_RECORD or match is None or int(match.group(1)) >= size:
        return None
    return int(match.group(1))


def _message(detail: str) -> str:
    """The message of an ErrorResponse body (the body itself when it is not one)."""
    try:
        return str(json.loads(detail)["error"]["message"])
    except (ValueError, TypeError, KeyError):
        return detail


def _batch_files(folder: str) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".json") and name[0].isdigit())


def _read_state(folder: str) -> dict:
    with open(os.path.join(folder, "state.json"), encoding="utf-8") as handle:
        return json.load(handle)


def _write_atomically(path: str, data: dict):
    """Replace `path` with `data` so that a crash leaves either the old or the new file whole."""
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(data, handle, separators=(",", ":"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
