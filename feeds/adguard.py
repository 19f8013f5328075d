"""AdGuard Home: the entries of its query log (querylog.json: one JSON object a line), read
line by line.

An entry's keys (AdGuard Home's internal/querylog): T (RFC 3339 time), QH, QT, QC (the
question), CP (client protocol), CID (ClientID), IP (client address), Answer and OrigAnswer
(base64 DNS messages), Upstream, Elapsed, Cached, and Result {IsFiltered, Reason, Rules
[{Text, FilterListID, IP}], ServiceName, CanonName, IPList, DNSRewriteResult {RCode,
Response}}; logs of older versions carry Result.Rule / Result.FilterID instead of Rules.
"""

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterator

import click

from .common import Batch, SkipRow, SourceError, compact, ip_or_none, text_or_none
from .dns_message import RCODES, parse_response
from .source import Reading

# CP -> protocol. DNSCrypt has no protocol of ours, and AdGuard logs DoH over HTTP/3 as "doh"
# too, so neither is ever "doh3". Entries without CP (old versions) have no known protocol.
PROTOCOLS = {"": "legacy", "doh": "doh", "dot": "dot", "doq": "doq"}

# Result.Reason (AdGuard Home's filtering.Reason, in declaration order).
NOT_FILTERED_NOT_FOUND = 0
NOT_FILTERED_ALLOW_LIST = 1
NOT_FILTERED_ERROR = 2
FILTERED_BLOCK_LIST = 3
FILTERED_SAFE_BROWSING = 4
FILTERED_PARENTAL = 5
FILTERED_INVALID = 6
FILTERED_SAFE_SEARCH = 7
FILTERED_BLOCKED_SERVICE = 8
REWRITTEN = 9
REWRITTEN_AUTO_HOSTS = 10
REWRITTEN_RULE = 11

# Rules[].FilterListID of the built-in lists; a positive id is one of the configured filter
# lists (blocklists or allowlists).
BUILT_IN_LISTS = {
    0: ("custom", None),  # the user's own rules: the triggerValue is the rule text
    -1: ("custom", "etc-hosts"),
    -2: ("service", None),
    -3: ("filter", "parental"),
    -4: ("filter", "safebrowsing"),
    -5: ("filter", "safesearch"),
}
UNSPECIFIED = {"0.0.0.0", "::"}
# Enough for any query log entry; a longer first "line" is no query log (and is not read whole).
FIRST_LINE_LIMIT = 1 << 20


class AdguardSource:
    """AdGuard Home's query log at `path` (a feeds.source.Source), in batches of `size`, as
    records of `endpoint`: first the rest of PATH.1 (where AdGuard Home moves the log when it
    rotates it), so that lines written just before a rotation are not lost, then PATH (missing
    until AdGuard writes again after a rotation). A file is known by its first line, so each
    keeps its own position whatever its name."""

    def __init__(self, path: str, endpoint: str, size: int):
        self.name, self.endpoint, self.size = path, endpoint, size

    def keys(self) -> list[str]:
        """The keys of the positions of the log and of its rotated predecessor."""
        found = []
        for name in (self.name, self.name + ".1"):
            if os.path.exists(name):
                with open(name, "rb") as stream:
                    first = stream.readline(FIRST_LINE_LIMIT)
                if first:
                    found.append(_key(first, self.endpoint))
        return found

    def readings(self, position, announce: bool) -> Iterator[Reading]:
        for name in (self.name + ".1", self.name):
            if os.path.exists(name):
                yield from self._file(name, position, announce)

    def _file(self, path: str, position, announce: bool) -> Iterator[Reading]:
        with open(path, "rb") as stream:
            first = stream.readline(FIRST_LINE_LIMIT)
            if not first:
                if announce:
                    click.echo(f"{path} is empty: nothing to import.", err=True)
                return
            check_first_line(first)
            key = _key(first, self.endpoint)
            saved = position(key)
            offset = resume_offset(stream, saved)
            end = os.fstat(stream.fileno()).st_size
            if offset and announce:
                click.echo(f"Resuming after line {saved['line']}.", err=True)
            yield Reading(
                key,
                batches(stream, offset, saved.get("line", 0), end, self.size, self.endpoint),
                start=offset,
                end=end,
                label=f"Importing {os.path.basename(path)}",
                bar=announce,
            )


def _key(first_line: bytes, endpoint: str) -> str:
    return f"adguard:{endpoint}:{identity(first_line)}"


def identity(first_line: bytes) -> str:
    """A log file is known by its first entry: it survives appends and AdGuard's rotation
    (querylog.json renamed to querylog.json.1), and a new file starts with a new one."""
    return "first-line-" + hashlib.sha256(first_line.rstrip(b"\r\n")).hexdigest()[:32]


def check_first_line(line: bytes) -> None:
    try:
        entry = json.loads(line)
    except ValueError:
        entry = None
    if not isinstance(entry, dict) or "T" not in entry or "QH" not in entry:
        raise SourceError("not an AdGuard Home query log: line 1 is not an entry with T and QH")


def resume_offset(stream, position: dict | None) -> int:
    """Where to go on in `stream` after `position`, checking that the file still holds the
    very line imported last (else it was rewritten, and an offset into it means nothing)."""
    if not position:
        return 0
    start, end = position["lastStart"], position["offset"]
    stream.seek(start)
    if hashlib.sha256(stream.read(end - start)).hexdigest() != position["lastHash"]:
        raise SourceError(
            f"the file changed since the last import (line {position['line']} is not the one "
            "imported then); --restart imports it again from the start"
        )
    return end


def batches(stream, offset: int, line: int, up_to: int, size: int, endpoint: str) -> Iterator[Batch]:
    """Batches of wire records for the complete lines between `offset` and `up_to` bytes.

    A last line without its newline may be half written: it is only taken if it parses.
    """
    stream.seek(offset)
    records, unreadable, pending = [], 0, False
    last_start = last_hash = None
    while offset < up_to:
        raw = stream.readline()
        if not raw:
            break
        try:
            entry, bad = (json.loads(raw) if raw.strip() else None), False
        except ValueError:
            if not raw.endswith(b"\n"):
                break
            entry, bad = None, True
        last_start, last_hash = offset, hashlib.sha256(raw).hexdigest()
        offset += len(raw)
        line += 1
        pending = True
        if bad:
            unreadable += 1
        elif entry is not None:
            try:
                records.append(to_record(entry, endpoint))
            except SkipRow:
                unreadable += 1
        if len(records) + unreadable >= size:
            yield Batch(records, unreadable, _position(offset, line, last_start, last_hash), offset)
            records, unreadable, pending = [], 0, False
    if pending:
        yield Batch(records, unreadable, _position(offset, line, last_start, last_hash), offset)


def _position(offset, line, last_start, last_hash) -> dict:
    return {"offset": offset, "line": line, "lastStart": last_start, "lastHash": last_hash}


def to_record(entry, endpoint: str) -> dict:
    """The wire record of one query log entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("T"), str):
        raise SkipRow("no time")
    result = entry.get("Result") if isinstance(entry.get("Result"), dict) else {}
    rcode, answer_ips = _answer(entry.get("Answer"))
    rewrite = result.get("DNSRewriteResult") if isinstance(result.get("DNSRewriteResult"), dict) else {}
    if rcode is None and isinstance(rewrite.get("RCode"), int):
        rcode = RCODES.get(rewrite["RCode"])
    action, trigger, trigger_value, target = _decision(result, rewrite, answer_ips, rcode)
    ip = ip_or_none(entry.get("IP"))
    return compact(
        {
            "timestamp": entry["T"],
            "endpointId": endpoint,
            # The ClientID is what AdGuard itself knows the client by; the address may change.
            "clientId": text_or_none(entry.get("CID")) or text_or_none(entry.get("IP")),
            "question": entry.get("QH"),
            "rrType": text_or_none(entry.get("QT")),
            "statusCode": rcode,
            "protocol": PROTOCOLS.get(entry["CP"]) if isinstance(entry.get("CP"), str) else None,
            "action": action,
            "trigger": trigger,
            "triggerValue": trigger_value,
            "spoofTarget": target,
            "sourceIp": ip,
            "upstream": text_or_none(entry.get("Upstream")),
            "responseTimeMs": _milliseconds(entry.get("Elapsed")),
            "cached": entry["Cached"] if isinstance(entry.get("Cached"), bool) else None,
            # AD set: the upstream validated the answer. Clear says nothing (no validation, or
            # an insecure zone), so it stays unknown.
            "dnssec": "secure" if entry.get("AD") is True else None,
            "answers": [{"ips": answer_ips}] if answer_ips else None,
            "client": compact({"ip": ip}),
        }
    )


def _milliseconds(elapsed) -> float | None:
    """AdGuard writes Elapsed as a Go duration: integer nanoseconds."""
    if isinstance(elapsed, bool) or not isinstance(elapsed, int) or not 0 <= elapsed <= 86_400 * 10**9:
        return None
    return elapsed / 1e6


def _decision(result: dict, rewrite: dict, answer_ips: list, rcode) -> tuple:
    """action, trigger, triggerValue and spoofTarget of a Result (see README's table)."""
    reason = result.get("Reason", NOT_FILTERED_NOT_FOUND)
    rule = _first_rule(result)
    if reason == NOT_FILTERED_NOT_FOUND:
        return (-1 if rcode == "SERVFAIL" else 1), "default", None, None
    if reason == NOT_FILTERED_ALLOW_LIST:
        return (1, *_by_rule(rule, result), None)
    if reason == NOT_FILTERED_ERROR:
        return 1, None, None, None
    if reason == FILTERED_BLOCK_LIST:
        trigger, value = _by_rule(rule, result)
        target = ip_or_none(rule.get("IP"))
        if target and target not in UNSPECIFIED:  # a hosts-style rule pointing elsewhere
            return 2, trigger, value, target
        return 0, trigger, value, None
    if reason == FILTERED_SAFE_BROWSING:
        return 0, "filter", "safebrowsing", None
    if reason == FILTERED_PARENTAL:
        return 0, "filter", "parental", None
    if reason == FILTERED_INVALID:
        return -1, None, None, None
    if reason == FILTERED_SAFE_SEARCH:
        return 2, "filter", "safesearch", _target(result, rewrite, rule, answer_ips)
    if reason == FILTERED_BLOCKED_SERVICE:
        return 0, "service", text_or_none(result.get("ServiceName")), None
    if reason in (REWRITTEN, REWRITTEN_AUTO_HOSTS, REWRITTEN_RULE):
        if reason == REWRITTEN:
            trigger, value = "custom", "rewrite"
        elif reason == REWRITTEN_AUTO_HOSTS:
            trigger, value = "custom", "etc-hosts"
        else:
            trigger, value = _by_rule(rule, result)
        if rewrite.get("RCode", 0) != 0:  # e.g. $dnsrewrite=NXDOMAIN: an answer withheld
            return 0, trigger, value, None
        target = _target(result, rewrite, rule, answer_ips)
        if target in UNSPECIFIED:
            return 0, trigger, value, None
        return 2, trigger, value, target
    return None, None, None, None


def _first_rule(result: dict) -> dict:
    rules = result.get("Rules")
    if isinstance(rules, list) and rules and isinstance(rules[0], dict):
        return rules[0]
    if "Rule" in result or "FilterID" in result:  # the format of older versions
        return {"Text": result.get("Rule"), "FilterListID": result.get("FilterID", 0)}
    return {}


def _by_rule(rule: dict, result: dict) -> tuple[str | None, str | None]:
    """trigger and triggerValue of the rule that decided."""
    if not rule:
        return None, None
    list_id = rule.get("FilterListID", 0)  # omitted when 0: the user's own rules
    if not isinstance(list_id, int) or isinstance(list_id, bool):
        return None, None
    if list_id > 0:
        return "filter", f"list:{list_id}"
    trigger, value = BUILT_IN_LISTS.get(list_id, (None, None))
    if list_id == 0:
        value = text_or_none(rule.get("Text"))
    elif list_id == -2:
        value = text_or_none(result.get("ServiceName"))
    return trigger, value


def _target(result: dict, rewrite: dict, rule: dict, answer_ips: list) -> str | None:
    """Where a rewrite sent the client: an address it was answered, else the rule's or the
    rewrite's address, else the name it was sent to."""
    candidates = list(answer_ips) + [rule.get("IP")]
    if isinstance(result.get("IPList"), list):
        candidates += result["IPList"]
    response = rewrite.get("Response") if isinstance(rewrite.get("Response"), dict) else {}
    for rr_type in ("1", "28"):  # A, AAAA
        if isinstance(response.get(rr_type), list):
            candidates += response[rr_type]
    for candidate in candidates:
        ip = ip_or_none(candidate)
        if ip:
            return ip
    name = text_or_none(result.get("CanonName"))
    return name.removesuffix(".") if name else None


def _answer(encoded) -> tuple[str | None, list[str]]:
    """rcode and addresses of the base64 DNS response; nothing when there is none or it does
    not parse (the entry is still worth importing without them)."""
    if not isinstance(encoded, str) or not encoded:
        return None, []
    try:
        return parse_response(base64.b64decode(encoded, validate=True))
    except (ValueError, binascii.Error):
        return None, []
