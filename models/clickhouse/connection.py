"""Talking to ClickHouse: the one place where chDB (in this process) and a server (through the
vendor's client) differ. Statements are ClickHouse SQL with `{name:Type}` parameters, which both
bind themselves; rows come back as tuples.

Times go in as epoch milliseconds, for columns the caller names: a server takes a DateTime64(3)
as its ticks, and chDB is handed a batch as Arrow, whose timestamps are those ticks. Days (a
Date32) go in as days since 1970: a server's client takes dates, Arrow the days."""

import copy
import dataclasses
import datetime
import fcntl
import json
import os
import threading
import uuid
from abc import ABC, abstractmethod

from models.clickhouse.target import BadTarget, Target
from models.engine.database import QueryStopped

# The file in a chDB folder that a process holds while it has the folder open (ClickHouse's own
# lock, `status`, only says "another server instance"): it names the process.
LOCK_FILE = "analytics.lock"


class NodesUnknown(RuntimeError):
    """A cluster whose nodes this service cannot reach one by one, and why."""


class FolderInUse(BadTarget):
    """A chDB folder another process has open: the setting names a ClickHouse this process
    cannot use."""


class Connection(ABC):
    """One ClickHouse, for this process."""

    def __init__(self, target: Target):
        self.target = target

    @abstractmethod
    def rows(self, sql: str, params: dict | None = None) -> list[tuple]:
        """The rows of a SELECT."""

    @abstractmethod
    def text(self, sql: str, params: dict | None = None, settings: dict | None = None) -> bytes:
        """The values of a SELECT of one String column, one after another with nothing between
        them (RawBLOB: text ClickHouse wrote, handed on without a row made in Python);
        `settings`: ClickHouse's settings for this statement."""

    @abstractmethod
    def command(self, sql: str, params: dict | None = None) -> None:
        """Run a statement that returns nothing (DDL, ALTER, DELETE)."""

    @abstractmethod
    def insert(
        self, table: str, columns: tuple[str, ...], rows: list, times=(), token: str | None = None, days=()
    ) -> None:
        """Insert `rows` (tuples in `columns`' order) into `table` as one block: all or none.
        `times`: the columns holding epoch milliseconds for a DateTime64(3); `days`: those
        holding days since 1970 for a Date32. `token`: the block's deduplication token, so that
        the same insert sent again is stored once."""

    @abstractmethod
    def close(self) -> None:
        """Let the ClickHouse go (for chDB: the folder, for another process to open)."""

    def records_written(self) -> int | None:
        """How many inserts into a records table this process has made, when it is its
        ClickHouse's only writer (chDB: one process a folder); None when others may write."""
        return None

    def nodes(self) -> list["Connection"]:
        """A connection to each node of the cluster, for what each node must hold itself (a
        privacy rewrite's map): this one where there is no cluster."""
        return [self]


class InProcess(Connection):
    """chDB: ClickHouse inside this process, on a folder no other process may have open."""

    def __init__(self, target: Target):
        super().__init__(target)
        from chdb import session  # the extra: only an install that names chDB needs it

        os.makedirs(target.folder, exist_ok=True)
        self._lock = _hold(target.folder)
        try:
            self._session = session.Session(target.folder)
        except Exception:
            os.close(self._lock)
            raise
        self._closed = False
        self._owner = True
        self._others: dict[Target, InProcess] = {}
        self._types: dict[str, dict] = {}
        self._written = [0]  # shared with on_database's connections: the one session's inserts

    def on_database(self, target: Target) -> "InProcess":
        """This folder's connection for another database in it (the session shared; closing it
        leaves the folder open)."""
        other = self._others.get(target)
        if other is None:
            other = copy.copy(self)
            other.target, other._owner = target, False
            self._others[target] = other
        return other

    def rows(self, sql, params=None):
        text = self._query(sql, "JSONCompact", params)
        return [tuple(row) for row in json.loads(text)["data"]] if text else []

    def text(self, sql, params=None, settings=None):
        return self._query(sql, "RawBLOB", params, settings)

    def _query(self, sql, output, params, settings=None) -> bytes:
        return _asking(lambda: self._session.query(_limited(sql, settings), output, params=_texts(params)).bytes())

    def command(self, sql, params=None):
        self._session.query(sql, "Null", params=_texts(params))

    def insert(self, table, columns, rows, times=(), token=None, days=()):
        if not rows:
            return
        settings = ", ".join(f"{name} = {_text(value, quoted=True)}" for name, value in _deduplicating(token).items())
        statement = f"INSERT INTO {table} ({', '.join(columns)}) SETTINGS {settings}"
        data = _arrow_stream(columns, rows, self._arrow_types(table, columns), times, days)
        if table.rpartition(".")[2] == "records":
            self._written[0] += 1
        with self._session.send_insert(statement, "ArrowStream") as inserting:
            inserting.append(data)
            inserting.finish()

    def records_written(self) -> int:
        return self._written[0]

    def _arrow_types(self, table: str, columns) -> list:
        """The Arrow type of each of `columns` of `table`. (A batch goes as Arrow, which
        ClickHouse reads with no text parsed: half the time JSON took for a batch of records,
        and a quarter of the time to encode.)"""
        known = self._types.setdefault(table, {})
        if not set(columns) <= known.keys():
            database, name = table.split(".")
            known.update(
                (column, _arrow_type(kind))
                for column, kind in self.rows(
                    "SELECT name, type FROM system.columns "
                    "WHERE database = {database:String} AND table = {name:String}",
                    {"database": database, "name": name},
                )
            )
        return [known[column] for column in columns]

    def close(self):
        global _open_here
        with _opening:
            if self._owner and not self._closed:
                self._closed = True
                self._session.close()
                os.close(self._lock)
                if _open_here is self:
                    _open_here = None


# A cluster's connection (docs/clickhouse.md "A cluster"):
# - an insert into a Distributed table returns once each shard has its rows, not when they are
#   queued on the node that took them: a batch numbered and acknowledged is there for every read,
#   cursor and deletion after it (a queued one could land below a cursor or after a DELETE);
# - some mutations of Replicated tables read what each replica may find different: the deletions
#   of rows no record holds any more choose them by a subquery over the Distributed tables, and a
#   privacy rewrite reads each node's map (joinGetOrNull). ClickHouse takes them only when told
#   that keeping those the same on every replica is the caller's concern.
_CLUSTER_SETTINGS = {"distributed_foreground_insert": 1, "allow_nondeterministic_mutations": 1}


class Server(Connection):
    """A ClickHouse server, through clickhouse-connect (its HTTP interface); a client per
    thread, as a client runs one query at a time."""

    def __init__(self, target: Target, connect=None):
        super().__init__(target)
        if connect is None:
            import clickhouse_connect  # the extra: only an install that names a server needs it

            connect = clickhouse_connect.get_client
        # The vendor client's constructor (the tests hand it the client's own in-process chDB
        # backend: tests/test_clickhouse_client.py).
        self._connect = connect
        self._local = threading.local()
        self._clients = []
        self._nodes: list[Server] | None = None  # a cluster's (nodes())
        self._opening_nodes = threading.Lock()

    def _client(self):
        client = getattr(self._local, "client", None)
        if client is None:
            target = self.target
            client = self._connect(
                host=target.host,
                port=target.port,
                username=target.user,
                password=target.password,
                database=target.database,
                secure=target.secure,
                autogenerate_session_id=False,
                settings=_CLUSTER_SETTINGS if target.cluster else None,
            )
            self._local.client = client
            self._clients.append(client)
        return client

    def rows(self, sql, params=None):
        found = _asking(lambda: self._client().query(_limited(sql), parameters=params or {}).result_rows)
        return [tuple(row) for row in found]

    def text(self, sql, params=None, settings=None):
        return _asking(
            lambda: self._client().raw_query(_limited(sql, settings), parameters=params or {}, fmt="RawBLOB")
        )

    def command(self, sql, params=None):
        self._client().command(sql, parameters=params or {})

    def insert(self, table, columns, rows, times=(), token=None, days=()):
        if not rows:
            return
        dated = [columns.index(column) for column in days]
        if dated:
            rows = [[_date(value) if i in dated else value for i, value in enumerate(row)] for row in rows]
        settings = _deduplicating(token)
        self._client().insert(table, rows, column_names=list(columns), settings=settings)

    def nodes(self):
        """Each host of the cluster (system.clusters, asked once), reached on this one's port, as
        its user: a cluster's nodes serve HTTP alike (docs/clickhouse.md "A cluster"). NodesUnknown
        when the cluster lists none, or two nodes on one host (their ports are not this one's)."""
        if not self.target.cluster:
            return [self]
        with self._opening_nodes:
            if self._nodes is None:
                hosts = [
                    host
                    for (host,) in self.rows(
                        "SELECT host_name FROM system.clusters WHERE cluster = {cluster:String} ORDER BY host_name",
                        {"cluster": self.target.cluster},
                    )
                ]
                if not hosts or len(set(hosts)) < len(hosts):
                    raise NodesUnknown(
                        f"the cluster {self.target.cluster} lists {len(hosts)} nodes on {len(set(hosts))} hosts: each "
                        "node must be a host of its own, serving HTTP on the port ANALYTICS_RECORD_STORE names"
                    )
                target = dataclasses.replace(self.target, cluster=None)
                self._nodes = [Server(dataclasses.replace(target, host=host), self._connect) for host in hosts]
            return self._nodes

    def close(self):
        for node in self._nodes or ():
            node.close()
        for client in self._clients:
            client.close()
        self._clients.clear()
        self._local = threading.local()


def _texts(params: dict | None) -> dict[str, str]:
    """Parameters as chDB takes them: each value in ClickHouse's text form of its type (the
    server's client writes them so itself)."""
    return {name: _text(value, quoted=False) for name, value in (params or {}).items()}


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "'": "\\'"})


def _text(value, quoted: bool) -> str:
    """`value` in ClickHouse's escaped text form; a string inside an array is quoted."""
    if value is None:
        return "NULL" if quoted else "\\N"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(_text(item, quoted=True) for item in value) + "]"
    if isinstance(value, tuple):
        return "(" + ",".join(_text(item, quoted=True) for item in value) + ")"
    text = str(value).translate(_ESCAPES)
    return f"'{text}'" if quoted else text


# ClickHouse's types by their Arrow types; a time, a day and the wrappers are read apart.
_ARROW_NAMES = {
    "String": "string",
    "Bool": "bool_",
    "Float64": "float64",
    "Float32": "float32",
    **{f"{sign}Int{bits}": f"{sign.lower()}int{bits}" for sign in ("", "U") for bits in (8, 16, 32, 64)},
}


def _arrow_type(kind: str):
    """The Arrow type a column of ClickHouse's type `kind` is sent as (TypeError for a type
    no table here has)."""
    import pyarrow  # chDB's own dependency

    for wrapper in ("LowCardinality(", "Nullable("):
        if kind.startswith(wrapper):
            return _arrow_type(kind[len(wrapper) : -1])
    if kind.startswith("SimpleAggregateFunction("):
        return _arrow_type(kind[len("SimpleAggregateFunction(") : -1].split(", ", 1)[1])
    if kind.startswith("DateTime64(3"):
        return pyarrow.timestamp("ms", tz="UTC")
    if kind == "Date32":
        return pyarrow.date32()
    if kind not in _ARROW_NAMES:
        raise TypeError(f"no Arrow type for ClickHouse's {kind}")
    return getattr(pyarrow, _ARROW_NAMES[kind])()


def _arrow_stream(columns, rows, types, times, days) -> bytes:
    """`rows` as one Arrow stream (a record batch), times as epoch milliseconds and days as
    days since 1970."""
    import pyarrow

    arrays = []
    for column, values, kind in zip(columns, zip(*rows, strict=True), types, strict=True):
        if column in times:
            arrays.append(pyarrow.array(values, pyarrow.int64()).cast(kind))
        elif column in days:
            arrays.append(pyarrow.array(values, pyarrow.int32()).cast(kind))
        elif kind == pyarrow.bool_():  # a SQL store's booleans are 0 and 1
            arrays.append(pyarrow.array([None if value is None else bool(value) for value in values], kind))
        else:
            arrays.append(pyarrow.array(values, kind))
    batch = pyarrow.RecordBatch.from_arrays(arrays, names=list(columns))
    sink = pyarrow.BufferOutputStream()
    with pyarrow.ipc.new_stream(sink, batch.schema) as stream:
        stream.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _date(days: int) -> datetime.date:
    return datetime.date(1970, 1, 1) + datetime.timedelta(days=days)


def _deduplicating(token: str | None) -> dict:
    """The settings of an insert: stored once under `token`, its views fed once too. Without a
    token, one of the insert's own: a table would otherwise drop a block equal to one it took
    lately (a batch erased and stored again under the same numbers: ingestion.py). Any number
    of days in one insert: a batch may span months (an import), and what a batch cut short
    left in some of its day partitions is erased as a failed batch is (ingestion.py)."""
    if token is None:
        # (`insert_deduplicate = 0` would say so, but chDB's inserts do not obey it.)
        token = uuid.uuid4().hex
    return {
        "insert_deduplication_token": token,
        "deduplicate_blocks_in_dependent_materialized_views": "1",
        "max_partitions_per_insert_block": "0",
    }


# The chDB folder this process has open: chDB runs one embedded server a process, on one folder.
_open_here: InProcess | None = None
# A worker's threads (a request, the retention and delivery loops) reach for the store at once
# when it starts: without a turn, two opened the folder, and the second took its own lock for
# another process's.
_opening = threading.Lock()


def connect(target: Target) -> Connection:
    """A connection to `target`: for chDB, the process's own while it has that folder open.
    FolderInUse: a chDB folder another process has open, or another folder open in this one."""
    if not target.in_process:
        return Server(target)
    with _opening:
        return _connect_here(target)


def _connect_here(target: Target) -> "InProcess":
    global _open_here
    if _open_here is not None:
        if _open_here.target == target:
            return _open_here
        if _open_here.target.folder == target.folder:
            return _open_here.on_database(target)
        raise FolderInUse(
            f"ANALYTICS_RECORD_STORE: this process has chdb://{_open_here.target.folder} open, and chDB "
            f"opens one folder a process: close it before opening chdb://{target.folder}"
        )
    _open_here = InProcess(target)
    return _open_here


def _hold(folder: str) -> int:
    """Take the folder's lock for this process, writing its pid into it; FolderInUse naming the
    process that holds it."""
    path = os.path.join(folder, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise FolderInUse(
            f"ANALYTICS_RECORD_STORE: chdb://{folder} is open in process {holder}: chDB lets one process "
            "open a folder, so the service runs with one worker (-w 1) and feeds send to it with --url "
            "(or use a ClickHouse server: clickhouse://...)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


# This thread's time budget for reads (limit_reads), in seconds; None: none.
_budget = threading.local()
# ClickHouse's error for a query past max_execution_time (TIMEOUT_EXCEEDED).
_TIMEOUT_EXCEEDED = "Code: 159."


def limit_reads(seconds: float | None) -> None:
    """Stop this thread's SELECTs past `seconds` with QueryStopped (None: lift the limit)."""
    _budget.seconds = seconds


def _limited(sql: str, settings: dict | None = None) -> str:
    """`sql` with its `settings` and this thread's time budget."""
    settings = dict(settings or {})
    seconds = getattr(_budget, "seconds", None)
    if seconds is not None:
        settings["max_execution_time"] = float(seconds)
    if not settings:
        return sql
    return f"{sql} SETTINGS " + ", ".join(f"{name} = {value!r}" for name, value in settings.items())


def _asking(read):
    """What `read()` returns; QueryStopped for a read ClickHouse stopped at its time budget."""
    try:
        return read()
    except Exception as error:
        if _TIMEOUT_EXCEEDED in str(error):
            raise QueryStopped(str(error)) from error
        raise
