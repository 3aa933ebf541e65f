"""Scope (DESIGN §3): identifiers, patterns, canonical pattern sets, a grant's
scope descriptor and its hash ``hex(SHA-256("custody/scope/v1\\x00" || JCS(descriptor)))``.

The rules are the Go package scope's, so a runtime learns of a
non-canonical grant before the ledger denies it.
"""

from __future__ import annotations

import calendar
import hashlib
import re
import time as _time
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Optional

from .canonical import MAX_SAFE_INTEGER, canonicalize
from .errors import CustodyFormatError

MAX_IDENTIFIER_LEN = 256
SCOPE_HASH_PREFIX = b"custody/scope/v1\x00"
_SEGMENT = re.compile(r"[A-Za-z0-9._:@+=-]")
_IDENT = re.compile(r"[A-Za-z0-9._:@+=-]+(?:/[A-Za-z0-9._:@+=-]+)*")
_DOTS = re.compile(r"(?:^|/)\.+(?:/|$)")


def _nc(path: str, msg: str) -> CustodyFormatError:
    return CustodyFormatError("non_canonical", path, msg)


def identifier_problem(s: Any) -> str:
    """Why s is not an identifier, or "" if it is one."""
    if not isinstance(s, str):
        return "is not a string"
    if len(s) <= MAX_IDENTIFIER_LEN and _IDENT.fullmatch(s) and not _DOTS.search(s):
        return ""  # the common case, at once; the loop below says why otherwise
    if not s:
        return "is empty"
    n = len(s.encode("utf-8", "surrogatepass"))
    if n > MAX_IDENTIFIER_LEN:
        return f"is {n} bytes, over the {MAX_IDENTIFIER_LEN}-byte limit"
    start = 0
    dots_only = True
    for i in range(len(s) + 1):
        if i == len(s) or s[i] == "/":
            if i == start:
                return f"has an empty segment at byte {i}"
            if dots_only:
                return f"has a segment made only of dots ({s[start:i]!r})"
            start = i + 1
            dots_only = True
            continue
        c = s[i]
        if not _SEGMENT.fullmatch(c):
            return f"has {c!r} at offset {i}; only A-Z a-z 0-9 . _ : @ + = - and '/' between segments are allowed"
        if c != ".":
            dots_only = False
    return ""


def check_identifier(s: Any, path: str = "") -> None:
    p = identifier_problem(s)
    if p:
        raise _nc(path, f"identifier {s!r} {p}")


def pattern_problem(p: Any) -> str:
    """Why p is not a pattern, or ""."""
    if not isinstance(p, str):
        return "is not a string"
    if p == "*":
        return ""
    if len(p.encode("utf-8", "surrogatepass")) > MAX_IDENTIFIER_LEN:
        return identifier_problem(p)
    if p.endswith("/*"):
        prefix = p[:-2]
        if "*" in prefix:
            return "has '*' that is not the whole final segment"
        if prefix == "":
            return 'has an empty segment before "/*"'
        prob = identifier_problem(prefix)
        return "has a prefix that " + prob if prob else ""
    if "*" in p:
        return "has '*' that is not the whole final segment"
    return identifier_problem(p)


def match(pattern: str, ident: str) -> bool:
    """Whether pattern matches the identifier."""
    if pattern_problem(pattern) or identifier_problem(ident):
        return False
    if not pattern.endswith("*"):
        return pattern == ident
    prefix = pattern[:-1]
    return len(ident) > len(prefix) and ident.startswith(prefix)


def pattern_covers(p: str, q: str) -> bool:
    """Whether every identifier q matches is matched by p."""
    if pattern_problem(p) or pattern_problem(q):
        return False
    if p == q:
        return True
    if not p.endswith("*"):
        return False
    prefix = p[:-1]
    if q.endswith("*"):
        return q[:-1].startswith(prefix)
    return len(q) > len(prefix) and q.startswith(prefix)


def _bkey(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def check_set(name: str, s: Any, optional: bool) -> None:
    """Raises unless s is a canonical pattern set (sorted bytewise, no duplicates, none covered by another)."""
    if s is None and optional:
        return
    if s is None:
        raise _nc(name, f"{name} is required")
    if not isinstance(s, (list, tuple)):
        raise _nc(name, f"{name} is not an array")
    if not s:
        raise _nc(name, f"{name} is an empty array; an optional set is omitted instead, a required one needs a pattern")
    for i, p in enumerate(s):
        prob = pattern_problem(p)
        if prob:
            raise _nc(f"{name}[{i}]", f"{name}[{i}] {p!r} {prob}")
    for i in range(1, len(s)):
        if s[i - 1] == s[i]:
            raise _nc(name, f"{name} holds {s[i]!r} twice")
        if _bkey(s[i - 1]) > _bkey(s[i]):
            raise _nc(name, f"{name} is not sorted: {s[i - 1]!r} comes before {s[i]!r}")
    for p in s:
        for e in s:
            if e != p and pattern_covers(e, p):
                raise _nc(name, f"{name} element {p!r} is already covered by {e!r} in the same set")
    if optional and len(s) == 1 and s[0] == "*":
        raise _nc(name, f'{name} must be omitted rather than written ["*"]')


def canonical_set(s: Optional[Iterable[str]]) -> Optional[list[str]]:
    """A pattern set made canonical (sorted bytewise, no duplicates or covered elements); None for empty."""
    if not s:
        return None
    srt = sorted(set(s), key=_bkey)
    out = [p for p in srt if not any(e != p and pattern_covers(e, p) for e in srt)]
    return out or None


def optional_set(s: Optional[Iterable[str]]) -> Optional[list[str]]:
    """canonical_set for step_ids and principals, where ["*"] is written absent."""
    c = canonical_set(s)
    return None if c == ["*"] else c


_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z\Z")


def parse_time(s: Any) -> Optional[int]:
    """A statement time (2026-03-19T08:12:00Z) as Unix seconds; None if it is not one."""
    m = _TIME.match(s) if isinstance(s, str) else None
    if not m:
        return None
    y, mo, d, h, mi, se = (int(x) for x in m.groups())
    if not 1 <= mo <= 12 or h > 23 or mi > 59 or se > 59:
        return None
    if not 1 <= d <= calendar.monthrange(y if y > 0 else 2000, mo)[1] or (y == 0 and mo == 2 and d == 29 and False):
        return None
    # days from civil (works for year 0 as the proleptic Gregorian calendar does)
    yy = y - (1 if mo <= 2 else 0)
    era = yy // 400
    yoe = yy - era * 400
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + h * 3600 + mi * 60 + se


def format_time(t: Any = None) -> str:
    """Unix seconds (or a datetime; None: now), truncated to whole seconds, as a statement time."""
    if t is None:
        t = _time.time()
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        t = t.timestamp()
    sec = int(t // 1)
    days, rem = divmod(sec, 86400)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    y = yoe + era * 400 + (1 if m <= 2 else 0)
    if not 0 <= y <= 9999:
        raise ValueError(f"{sec} is outside years 0000..9999")
    return f"{y:04d}-{m:02d}-{d:02d}T{rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}Z"


_DESC_FIELDS = ("approvals", "capabilities", "expires_at", "limits", "principals", "step_ids", "targets", "workflow_id")
_RULE_FIELDS = ("above", "approvers", "capabilities", "quorum", "rule_id", "step_ids", "targets", "ttl_seconds")
MAX_RULES, MAX_APPROVERS, MAX_QUORUM, MAX_RULE_TTL = 16, 16, 16, 86400


def check_rule(r: Any) -> None:
    """One approval rule (DESIGN §7), canonical and within bounds, as Go's scope.CheckRule."""
    if not isinstance(r, Mapping):
        raise CustodyFormatError("schema_invalid", "", "a rule is a JSON object")
    for k in r:
        if k not in _RULE_FIELDS:
            raise CustodyFormatError("schema_invalid", k, f"unknown field {k!r} in an approval rule")
    rid = r.get("rule_id")
    prob = identifier_problem(rid)
    if prob:
        raise _nc("", f"rule_id {rid!r} {prob}")
    above = r.get("above")
    if above is not None:
        if not isinstance(above, Mapping):
            raise CustodyFormatError("schema_invalid", "", f"rule {rid!r}: above must be an object")
        for k in sorted(above):
            if identifier_problem(k):
                raise _nc("", f"rule {rid!r}: above key {k!r} {identifier_problem(k)}")
            v = above[k]
            if type(v) is not int or not 0 <= v <= MAX_SAFE_INTEGER:
                raise _nc("", f"rule {rid!r}: above {k!r} is {v!r}, outside 0..{MAX_SAFE_INTEGER}")
        if not above:
            raise _nc("", f"rule {rid!r}: above is an empty object; omit it instead")
    check_set("approvers", r.get("approvers"), False)
    if len(r["approvers"]) > MAX_APPROVERS:
        raise CustodyFormatError("schema_invalid", "", f"rule {rid!r}: approvers holds {len(r['approvers'])} patterns, above {MAX_APPROVERS}")
    check_set("capabilities", r.get("capabilities"), False)
    q = r.get("quorum")
    if type(q) is not int or not 1 <= q <= MAX_QUORUM:
        raise CustodyFormatError("schema_invalid", "", f"rule {rid!r}: quorum {q!r} is outside 1..{MAX_QUORUM}")
    check_set("step_ids", r.get("step_ids"), True)
    check_set("targets", r.get("targets"), True)
    t = r.get("ttl_seconds")
    if type(t) is not int or not 1 <= t <= MAX_RULE_TTL:
        raise CustodyFormatError("schema_invalid", "", f"rule {rid!r}: ttl_seconds {t!r} is outside 1..{MAX_RULE_TTL}")


def check_rules(rules: Any) -> None:
    """An approvals list: at most 16 rules, sorted by rule_id without repeats, each canonical."""
    if rules is None:
        return
    if not isinstance(rules, (list, tuple)):
        raise CustodyFormatError("schema_invalid", "approvals", "must be a list of rules")
    if not rules:
        raise _nc("approvals", "approvals is an empty list; omit it instead")
    if len(rules) > MAX_RULES:
        raise CustodyFormatError("schema_invalid", "approvals", f"approvals holds {len(rules)} rules, above the {MAX_RULES} a grant may carry")
    for i, r in enumerate(rules):
        try:
            check_rule(r)
        except CustodyFormatError as e:
            p = f"approvals[{i}]" + (f".{e.path}" if e.path else "")
            raise CustodyFormatError(e.code, p, e.detail) from None
        if i and rules[i - 1]["rule_id"] >= r["rule_id"]:
            if rules[i - 1]["rule_id"] == r["rule_id"]:
                raise _nc("approvals", f"rule_id {r['rule_id']!r} appears twice; rule ids are unique in a grant")
            raise _nc("approvals", f"rule_id {r['rule_id']!r} comes after {rules[i - 1]['rule_id']!r}; rules are written sorted by rule_id")


def check_limits(path: str, m: Any, non_empty: bool) -> None:
    """A limits/reserve/consumed map: identifier keys, integers in 0..2^53-1."""
    if not isinstance(m, Mapping):
        raise CustodyFormatError("schema_invalid", path, "must be an object of limit keys to integers")
    if non_empty and not m:
        raise _nc(path, "an empty object is not allowed (omit the field)")
    for k in sorted(m):
        prob = identifier_problem(k)
        if prob:
            raise _nc(f"{path}.{k}", f"limit key {k!r} {prob}")
        v = m[k]
        if type(v) is not int or not 0 <= v <= MAX_SAFE_INTEGER:
            code = "schema_invalid" if type(v) is int and abs(v) <= MAX_SAFE_INTEGER else "non_canonical"
            raise CustodyFormatError(code, f"{path}.{k}", f"{v!r} is not an integer in 0..{MAX_SAFE_INTEGER}")


def check_descriptor(d: Any) -> None:
    """Raises (non_canonical) unless d is a canonical scope descriptor."""
    if not isinstance(d, Mapping):
        raise _nc("", "a scope descriptor is a JSON object")
    for k in d:
        if k not in _DESC_FIELDS:
            raise CustodyFormatError("schema_invalid", k, f"unknown field {k!r} in a scope descriptor")
    check_rules(d.get("approvals"))
    check_set("capabilities", d.get("capabilities"), False)
    if parse_time(d.get("expires_at")) is None:
        raise _nc("expires_at", f"{d.get('expires_at')!r} is not an RFC 3339 UTC time with whole seconds, like 2026-03-19T08:27:00Z")
    if d.get("limits") is not None:
        check_limits("limits", d["limits"], True)
    check_set("principals", d.get("principals"), True)
    check_set("step_ids", d.get("step_ids"), True)
    check_set("targets", d.get("targets"), False)
    prob = identifier_problem(d.get("workflow_id"))
    if prob:
        raise _nc("workflow_id", f"workflow_id {d.get('workflow_id')!r} {prob}")


def derive_descriptor(scope: Mapping[str, Any], limits: Optional[Mapping[str, int]], timestamp: str, ttl_seconds: Any,
                      approvals: Optional[list] = None) -> dict:
    """A grant's scope descriptor: its scope's sets and workflow, its limits, expires_at = timestamp + ttl_seconds."""
    ts = parse_time(timestamp)
    if ts is None:
        raise _nc("timestamp", f"{timestamp!r} is not RFC 3339 UTC with whole seconds (like 2026-03-19T08:12:00Z)")
    if type(ttl_seconds) is not int or not 1 <= ttl_seconds <= MAX_SAFE_INTEGER:
        raise _nc("ttl_seconds", f"ttl_seconds is {ttl_seconds!r}, not an integer of at least 1")
    try:
        expires = format_time(ts + ttl_seconds)
    except ValueError:
        raise _nc("ttl_seconds", f"expiry of timestamp {timestamp} plus {ttl_seconds} seconds is outside years 0000..9999") from None
    d: dict[str, Any] = {"capabilities": scope.get("capabilities"), "expires_at": expires, "targets": scope.get("targets"), "workflow_id": scope.get("workflow_id")}
    if limits:
        d["limits"] = dict(limits)
    if approvals is not None:
        d["approvals"] = approvals
    if scope.get("principals") is not None:
        d["principals"] = scope["principals"]
    if scope.get("step_ids") is not None:
        d["step_ids"] = scope["step_ids"]
    check_descriptor(d)
    return d


def scope_hash(descriptor: Mapping[str, Any]) -> str:
    """The lowercase hex scope hash of a canonical descriptor."""
    check_descriptor(descriptor)
    return hashlib.sha256(SCOPE_HASH_PREFIX + canonicalize(dict(descriptor))).hexdigest()
