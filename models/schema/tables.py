"""The tables of the record store and how they are created."""

from peewee import (
    SQL,
    BigAutoField,
    BigIntegerField,
    BlobField,
    BooleanField,
    CompositeKey,
    DoubleField,
    IntegerField,
    Model,
    NodeList,
    TextField,
)

from catalogue import CLIENT, ENDPOINT, FIELDS, NUMBER, TERM, TIME
from models.engine.database import db

# Bumped when the schema changes; start-up migrates older databases forward.
SCHEMA_VERSION = 15

# The client metadata fields a record can carry; each is stored with the timestamp of the
# record it came from, so the newest record wins field by field whatever the ingest order.
CLIENT_META_FIELDS = ("host", "mac", "ip", "vendor", "os_type", "os_arch", "os_version")


def _text():
    """A text column that is '' when unknown, also for rows inserted by raw SQL."""
    return TextField(default="", constraints=[SQL("DEFAULT ''")])


class NeverReusedId(BigAutoField):
    """An id that is never handed out twice, even after the newest rows are deleted (SQLite's
    AUTOINCREMENT; a PostgreSQL sequence does so by itself: Engine.id_never_reused)."""

    def ddl(self, ctx):
        node = super().ddl(ctx)
        suffix = db.obj.dialect.id_never_reused
        return NodeList((node, SQL(suffix))) if suffix else node


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False


class Endpoint(BaseModel):
    """One row per endpoint ever seen. Never deleted: `lost_mark` must outlive its clients.

    `lost_mark` is the newest timestamp among the records the endpoint has lost (deleted or
    expired), raised in the same transaction as the deletion. The endpoint's last activity is
    max(newest stored record, lost_mark), so it never moves backwards.
    """

    name = TextField(unique=True)
    lost_mark = BigIntegerField(null=True)


class Client(BaseModel):
    """A client entry, keyed by (endpoint, client_id); it exists while it is not deleted.

    Records point at the entry's integer id. An entry is only deleted once it has no records,
    so a client seen again after deletion gets a fresh entry (and a fresh id).
    """

    # Never reused: a client deleted and seen again is a different entry (and id).
    id = NeverReusedId()
    endpoint = IntegerField()  # Endpoint.id
    client_id = TextField()
    alias = _text()
    host = _text()
    host_ts = BigIntegerField(null=True)
    mac = _text()
    mac_ts = BigIntegerField(null=True)
    ip = _text()
    ip_ts = BigIntegerField(null=True)
    vendor = _text()
    vendor_ts = BigIntegerField(null=True)
    os_type = _text()
    os_type_ts = BigIntegerField(null=True)
    os_arch = _text()
    os_arch_ts = BigIntegerField(null=True)
    os_version = _text()
    os_version_ts = BigIntegerField(null=True)
    # Marked as not logged (TRUE; NULL: logged): none of its records is stored (models/privacy/privacy.py).
    unlogged = BooleanField(null=True)
    # The newest timestamp among its frozen records (models/records/freezing.py; NULL: none frozen).
    last_frozen = BigIntegerField(null=True)

    class Meta:
        indexes = ((("endpoint", "client_id"), True),)


class Term(BaseModel):
    """Interned strings: records store the integer id of each repeated string (domains,
    profiles, ISPs, ...). A term nothing refers to any more may be deleted
    (models/privacy/unused_terms.py), but its id is never handed out again: an id means one string
    forever."""

    id = NeverReusedId()
    value = TextField()  # unique: see create_schema


class TermCandidate(BaseModel):
    """Terms a privacy rewrite or deletion stopped referring to, to be deleted once nothing
    else does (models/privacy/unused_terms.py); `since`: the term generation they were noted under."""

    term = BigIntegerField(primary_key=True)
    since = BigIntegerField()


class TermDomain(BaseModel):
    """The registrable domain of every term stored as a question: both term ids. A term's
    string never changes, so neither does its row (see models/records/domains.py); it goes with the
    term (models/privacy/unused_terms.py)."""

    term = BigIntegerField(primary_key=True)
    domain = BigIntegerField(index=True)


class NameSeen(BaseModel):
    """When each question name was first and last asked on each endpoint (term and endpoint
    ids): a statistic, kept past the records' horizon (see models/statistics/first_seen.py)."""

    term = BigIntegerField()
    endpoint = IntegerField()  # 0: over all endpoints
    first = BigIntegerField()
    last = BigIntegerField()

    class Meta:
        # Clustered by endpoint: "first seen in a window" reads one endpoint's rows (a name's
        # row per endpoint is all there is), which an index on `first` bought little on.
        primary_key = CompositeKey("endpoint", "term")


class StreamToken(BaseModel):
    """Realtime tokens already used, until they expire, in the database so that a token works
    once whichever worker sees it. Only a hash of the token is kept; `principal` is unused (the
    signed token itself carries it; see models.access.tokens)."""

    token_hash = TextField(unique=True)
    expires = BigIntegerField()
    principal = TextField()  # JSON


class ApiKey(BaseModel):
    """API keys made with `flask keys create`. The secret is random (256 bits), so a SHA-256 of
    it is safe to keep and to look up by; the secret itself is never stored."""

    name = TextField(unique=True)
    secret_hash = TextField(unique=True)
    scopes = TextField()  # JSON list
    endpoints = TextField(null=True)  # JSON list; NULL: every endpoint
    created = BigIntegerField()
    revoked = BigIntegerField(null=True)


class AdminAction(BaseModel):
    """The admin-action log: one row per change, written in the change's own transaction.
    `endpoints` lists the endpoints the change touched (JSON; NULL: not tied to endpoints),
    so that endpoint-limited keys see only entries about their endpoints."""

    ts = BigIntegerField(index=True)
    action = TextField()
    key_id = IntegerField(null=True)
    key_name = TextField()
    source_ip = TextField()
    metadata = TextField()  # JSON
    endpoints = TextField(null=True)


class Rollup(BaseModel):
    """Record counts per (column, period, endpoint, value): see models/statistics/rollups.py."""

    dim = IntegerField()
    period = BigIntegerField()  # the period's number since 1970 (times its length in ms: BIGINT arithmetic)
    endpoint = IntegerField()
    value = BigIntegerField()
    n = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("dim", "period", "endpoint", "value")
        without_rowid = True


class AccessRead(BaseModel):
    """The access log: one row per read of the activity log, its export or its stream (see
    models/access/access_log.py). `endpoints` as in AdminAction: those the reader could see."""

    ts = BigIntegerField(index=True)
    kind = TextField()
    key_id = IntegerField(null=True)
    key_name = TextField()
    source_ip = TextField()
    query = TextField()  # JSON
    endpoints = TextField(null=True)
    start_ms = BigIntegerField(null=True)
    end_ms = BigIntegerField(null=True)
    rows = BigIntegerField(null=True)
    bytes = BigIntegerField(null=True)


class PrivacySetting(BaseModel):
    """Privacy settings by endpoint name ('_default': the operator's), the fields set as JSON,
    and the endpoint's key for hashed addresses (never shown). See models/privacy/privacy.py."""

    endpoint = TextField(primary_key=True)
    settings = TextField()
    hash_key = TextField(default="", constraints=[SQL("DEFAULT ''")])


class PrivacyRewrite(BaseModel):
    """Stored records still to be made coarser (see models/privacy/rewrites.py): an endpoint's records
    with ts in (ts_after, ts_upto] and id <= id_upto, to `detail` (JSON), worked through in
    (ts, id) order from the cursor; `total` records in all, `done` gone through."""

    endpoint = IntegerField()  # Endpoint.id
    detail = TextField()
    kind = TextField()  # stricter (a setting made stricter) or age (an age step reached)
    ts_after = BigIntegerField()
    ts_upto = BigIntegerField()
    id_upto = BigIntegerField()
    cursor_ts = BigIntegerField()
    cursor_id = BigIntegerField()
    total = BigIntegerField()
    done = BigIntegerField()
    created = BigIntegerField()


class PrivacyAgeMark(BaseModel):
    """How far each age step of each endpoint has been applied: its records with ts <= upto."""

    endpoint = IntegerField()
    step = TextField()  # its age and detail, as JSON
    upto = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("endpoint", "step")


class Output(BaseModel):
    """An output: where every stored record of some endpoints is forwarded, and how far it got
    (see models/delivery/outputs.py). `cursor` is the highest record id the receiver accepted (every
    matching record up to it was delivered); it only moves forward."""

    id = NeverReusedId()
    name = TextField(unique=True)
    kind = TextField()  # http, syslog, file
    url = TextField()
    options = TextField()  # JSON: what the kind needs (headers, TLS, format, rotation, ...)
    shape = TextField()  # the record shape: querydata or controld
    endpoints = TextField(null=True)  # JSON list of endpoint names; NULL: every endpoint
    cursor = BigIntegerField()
    paused = IntegerField(default=0)
    created = BigIntegerField()
    delivered = BigIntegerField(default=0)
    skipped = BigIntegerField(default=0)
    last_delivery = BigIntegerField(null=True)
    failures = IntegerField(default=0)  # consecutive failed attempts; 0 once one succeeds
    last_error = TextField(null=True)
    last_error_at = BigIntegerField(null=True)


class JobLease(BaseModel):
    """Which process runs a periodic job now, and when it last ran, so that several workers
    (or hosts) run each job once per period between them."""

    name = TextField(primary_key=True)
    holder = TextField(null=True)
    expires = BigIntegerField(default=0)
    last_run = BigIntegerField(default=0)


class AlertRule(BaseModel):
    """An alert rule (models/delivery/alerts.py). `cursor` is how far the rule has looked: the highest
    record id (client entry id for new-client) it has evaluated, so that each record is
    judged once whichever worker runs the job. `secret` signs its webhooks; shown once."""

    id = NeverReusedId()
    kind = TextField()
    endpoints = TextField()  # JSON list of endpoint names
    client_ids = TextField(null=True)  # JSON list; NULL: every client
    destinations = TextField()  # JSON list of URLs
    cooldown = BigIntegerField()  # seconds
    settings = TextField()  # JSON: the kind's own fields
    secret = TextField()
    cursor = BigIntegerField()
    created = BigIntegerField()
    updated = BigIntegerField()


class AlertMark(BaseModel):
    """What a rule remembers between runs, by subject (new-domain: when each registrable
    domain was last seen), so that no worker keeps it in memory."""

    rule = BigIntegerField()
    subject = TextField()
    ts = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("rule", "subject")


class AlertTold(BaseModel):
    """When a rule last fired for each subject, kept apart from the history (which expires with
    the records): a cooldown, or a silence that lasts, must outlive it."""

    rule = BigIntegerField()
    subject = TextField()
    ts = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("rule", "subject")


class Alert(BaseModel):
    """One firing of a rule: its subject (an endpoint, client or domain) and what fired, as
    JSON. The rule's kind is copied so that the history outlives a deleted rule."""

    id = NeverReusedId()
    rule = BigIntegerField()
    kind = TextField()
    endpoint = TextField()
    subject = TextField()
    message = TextField()  # one line for people
    detail = TextField()  # JSON
    ts = BigIntegerField(index=True)

    class Meta:
        indexes = ((("rule", "subject", "ts"), False),)  # the cooldown's look-up


class AlertDelivery(BaseModel):
    """One alert to one destination: pending (not tried yet), retrying, delivered or failed;
    `next_try` is when the job tries it again (backoff), `error` the last failure."""

    id = NeverReusedId()
    alert = BigIntegerField(index=True)
    destination = TextField()
    state = TextField()
    attempts = IntegerField(default=0)
    next_try = BigIntegerField(null=True)
    error = _text()
    updated = BigIntegerField()

    class Meta:
        indexes = ((("state", "next_try"), False),)


def _record_column(field):
    """The record column of a catalogue field; NULL means unknown."""
    if field.storage == TIME:
        return BigIntegerField()
    if field.storage in (ENDPOINT, CLIENT):
        return IntegerField()  # Endpoint.id, Client.id
    if field.storage == TERM:
        return IntegerField(null=not field.required)  # Term.id
    if field.storage == NUMBER:
        return DoubleField(null=True)
    return BigIntegerField(null=True)  # integer; boolean as 0 or 1


class _RecordMeta:
    indexes = (
        # A client's last activity; client filters; deletion. With the question, a client's names
        # (its top names, its first-seen names) are read from the index alone: reading each of
        # its records' rows for them cost 4x as much.
        (("client", "ts", "question"), False),
        (("endpoint", "ts"), False),  # an endpoint's last activity; endpoint filters
        (("ts",), False),  # the time window; retention
        # A search's few names in the hours kept as rows: without it a rare search tested every
        # record of those 48 hours, several times a page (docs/record-store.md, "Choosing the
        # blocks"). Added to an existing database at start-up, as the tables are.
        (("question", "ts"), False),
    )


# One observed DNS query: a column per catalogue field. `id` is AUTOINCREMENT so that it is
# never reused, even after the newest records are deleted: it orders records with equal
# timestamps and numbers realtime events.
Record = type(
    "Record",
    (BaseModel,),
    {
        "__module__": __name__,
        "__doc__": "One observed DNS query: a column per field of catalogue.FIELDS.",
        "id": NeverReusedId(),
        **{field.sql: _record_column(field) for field in FIELDS},
        "Meta": _RecordMeta,
    },
)


class RecordBlock(BaseModel):
    """Records packed together once old enough to be left alone (models/records/freezing.py): some of
    one endpoint's records of one hour (`hour`: its number since 1970), ts and id bounds, `n`
    records, packed by models/records/blocks.py. A record is in the record table or in one block."""

    id = NeverReusedId()
    endpoint = IntegerField()
    hour = BigIntegerField()
    first_ts = BigIntegerField()
    last_ts = BigIntegerField()
    first_id = BigIntegerField()
    last_id = BigIntegerField()
    n = IntegerField()
    client_filter = BlobField()  # a Bloom filter of its records' client entries (blocks.bloom)
    question_filter = BlobField()  # of its names up to version 14; empty since: see BlockQuestion
    data = BlobField()

    class Meta:
        # Covering the reads that pick blocks (models/records/thawing.py): the blobs stay unread.
        indexes = (
            (("endpoint", "hour", "n", "first_ts", "last_ts"), False),
            (("hour", "endpoint", "n", "first_ts", "last_ts"), False),
            (("last_id", "first_id"), False),
        )


class BlockQuestion(BaseModel):
    """Which blocks hold each question name: a row per name a block holds (written as it is
    frozen, gone with it: models/records/freezing.py). A search after a few names reads the
    blocks that hold them from here, exactly and in hour order, instead of testing the question
    filter of every block of its window (docs/record-store.md, "Choosing the blocks")."""

    question = BigIntegerField()
    hour = BigIntegerField()  # the block's: a window's postings are a range of each name's
    block = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("question", "hour", "block")
        without_rowid = True


class IngestBatch(BaseModel):
    """Batches stored under an idempotency key (by the API key that sent them), with what
    their answer was, so that a batch sent again is answered without being stored again."""

    key = TextField(primary_key=True)
    created = BigIntegerField(index=True)
    accepted = BigIntegerField()


class StoreSetting(BaseModel):
    """Facts about the stored data that are not rows of it (e.g. the rollups' layout)."""

    name = TextField(primary_key=True)
    value = TextField()


class ImportProgress(BaseModel):
    """How far a history import (feeds/) got in one source, keyed by importer, endpoint
    and the source's identity. Written in the same transaction as the records it covers."""

    source = TextField(unique=True)
    position = TextField()  # JSON, the importer's own resume point
    records = BigIntegerField(default=0)
    skipped = BigIntegerField(default=0)
    updated = BigIntegerField()


class FeedLoss(BaseModel):
    """Records a feed could not store, by where they were lost (models/ingest/losses.py): one row per
    run of a feed, endpoint and place, holding that run's total so far."""

    run = TextField()
    endpoint = BigIntegerField()  # the endpoint's id
    place = TextField()
    total = BigIntegerField()
    updated = BigIntegerField()

    class Meta:
        primary_key = CompositeKey("run", "endpoint", "place")


TABLES = (
    Endpoint,
    Client,
    RecordBlock,
    BlockQuestion,
    Term,
    TermCandidate,
    TermDomain,
    NameSeen,
    StreamToken,
    ApiKey,
    AdminAction,
    AccessRead,
    PrivacySetting,
    PrivacyRewrite,
    PrivacyAgeMark,
    Output,
    JobLease,
    AlertRule,
    AlertMark,
    AlertTold,
    Alert,
    AlertDelivery,
    Rollup,
    Record,
    ImportProgress,
    IngestBatch,
    StoreSetting,
    FeedLoss,
)
