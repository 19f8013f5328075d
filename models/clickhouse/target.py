"""ANALYTICS_RECORD_STORE read: which ClickHouse keeps the records (docs/clickhouse.md)."""

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

# A database or cluster name goes into statements as an identifier: plain ones only.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_EXAMPLES = "clickhouse://USER:PASSWORD@HOST:8123/DATABASE or chdb:///ABSOLUTE/FOLDER"


class BadTarget(ValueError):
    """ANALYTICS_RECORD_STORE names no ClickHouse this service can use, and why."""


@dataclass(frozen=True)
class Target:
    """A ClickHouse: in this process (`folder`, chDB) or a server (`host`...)."""

    database: str
    folder: str | None = None
    host: str | None = None
    port: int = 8123
    user: str = "default"
    password: str = ""
    secure: bool = False
    cluster: str | None = None

    @property
    def in_process(self) -> bool:
        return self.folder is not None

    def __str__(self) -> str:
        """The target as a message may show it: without its password."""
        if self.in_process:
            return f"chdb://{self.folder}"
        scheme = "clickhouses" if self.secure else "clickhouse"
        cluster = f"?cluster={self.cluster}" if self.cluster else ""
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{self.database}{cluster}"


def from_settings(settings) -> Target | None:
    """The ClickHouse the settings' ANALYTICS_RECORD_STORE names (None: unset, the records stay in
    ANALYTICS_DATABASE); BadTarget when it names none."""
    text = (settings.get("ANALYTICS_RECORD_STORE") or "").strip()
    if not text:
        return None
    return parse(text)


def parse(text: str) -> Target:
    """The Target `text` names; BadTarget saying what is wrong and what to write instead."""
    parts = urlsplit(text)
    options = parse_qs(parts.query, keep_blank_values=True)
    if parts.scheme == "chdb" and "cluster" in options:
        raise BadTarget("ANALYTICS_RECORD_STORE: ?cluster= is for a ClickHouse server; chDB is one process")
    # chDB's one folder may hold several stores (the tests keep one a test), each a database.
    allowed = {"chdb": "database"}.get(parts.scheme, "cluster")
    unknown = sorted(set(options) - {allowed})
    if unknown:
        raise BadTarget(f"ANALYTICS_RECORD_STORE: unknown option {unknown[0]!r} (the one option is ?{allowed}=NAME)")
    if parts.scheme == "chdb":
        return _in_process(parts, options.get("database", [None])[-1])
    cluster = options.get("cluster", [None])[-1]
    if parts.scheme in ("clickhouse", "clickhouses"):
        return _server(parts, cluster)
    raise BadTarget(f"ANALYTICS_RECORD_STORE: {parts.scheme or text!r} is not a ClickHouse: use {_EXAMPLES}")


def _in_process(parts, database) -> Target:
    if parts.netloc:
        raise BadTarget(
            f"ANALYTICS_RECORD_STORE: chdb:// takes a folder, not a host ({parts.netloc!r}): "
            "write chdb:///ABSOLUTE/FOLDER (three slashes)"
        )
    folder = unquote(parts.path)
    if not os.path.isabs(folder) or folder == "/":
        raise BadTarget(f"ANALYTICS_RECORD_STORE: chdb:// needs an absolute folder, not {folder!r}")
    database = database or "analytics"
    _plain("database", database)
    return Target(database=database, folder=os.path.normpath(folder))


def _server(parts, cluster) -> Target:
    if not parts.hostname:
        raise BadTarget(f"ANALYTICS_RECORD_STORE: a ClickHouse server needs a host: {_EXAMPLES}")
    database = unquote(parts.path.strip("/")) or "default"
    for what, name in (("database", database), ("cluster", cluster)):
        if name is not None:
            _plain(what, name)
    try:
        port = parts.port or (8443 if parts.scheme == "clickhouses" else 8123)
    except ValueError as exc:
        raise BadTarget(f"ANALYTICS_RECORD_STORE: {exc}") from None
    return Target(
        database=database,
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or "default"),
        password=unquote(parts.password or ""),
        secure=parts.scheme == "clickhouses",
        cluster=cluster or None,
    )


def _plain(what: str, name: str) -> None:
    if not _NAME.match(name):
        raise BadTarget(
            f"ANALYTICS_RECORD_STORE: the {what} {name!r} is not a plain name (letters, digits, _, "
            "not starting with a digit)"
        )
