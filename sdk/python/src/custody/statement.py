"""Statements (DESIGN §2): the kinds as plain dicts whose keys are the wire
names, their closed schemas and field rules (the Go package statement's),
sealing (a grant's scope_hash) and signing.

Build a statement as a dict, :func:`seal` it if it is a CONFIRM or DELEGATE,
and :func:`sign_statement` it. A :class:`~custody.Runtime` fills the header
(timestamp, log, actor, seq) for you.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional, Union

from ._encoding import is_lower_hex64
from .canonical import MAX_SAFE_INTEGER, canonicalize, check_profile, parse_canonical
from .envelope import KINDS, Envelope, sign_envelope
from .errors import CustodyFormatError, CustodyKeyError
from .keys import PrivateKey, parse_public_key
from .scope import check_limits, derive_descriptor, identifier_problem, parse_time, scope_hash

Statement = dict

ID_FIELD = {
    "GENESIS": "genesis_id", "PRINCIPAL": "principal_id", "CONFIRM": "confirm_id", "DELEGATE": "delegation_id",
    "REVOKE": "revoke_id", "RECEIPT": "receipt_id", "STOP": "request_id", "RESUME": "resume_id",
    "APPROVAL": "approval_id", "DENIAL": "denial_id",
}

_HEADER = ("type", "timestamp", "log", "actor", "seq")
_GRANT = ("grantee", "scope", "limits", "ttl_seconds", "revocable", "scope_hash", "approvals")
FIELDS: dict[str, tuple[str, ...]] = {
    "GENESIS": _HEADER + ("genesis_id", "admin_key", "log_key", "max_depth", "clock_skew_seconds", "max_ttl_seconds"),
    "PRINCIPAL": _HEADER + ("principal_id", "op", "name", "public_key", "key_type", "credential_id", "rp_id", "origins", "allowed_types"),
    "CONFIRM": _HEADER + ("confirm_id",) + _GRANT + ("risk_level",),
    "DELEGATE": _HEADER + ("delegation_id", "parent_ref", "parent_scope_hash") + _GRANT,
    "REVOKE": _HEADER + ("revoke_id", "workflow_id", "target_ref", "reason"),
    "RECEIPT": _HEADER + ("receipt_id", "workflow_id", "step_id", "action", "target", "authorization_ref", "result", "scope_hash",
                          "reserve", "params_sha256", "consumed", "pending_ref", "side_effects", "evidence_refs", "error"),
    "STOP": _HEADER + ("request_id", "workflow_id", "stop_scope", "step_id", "takeover_mode", "takeover_to", "reason"),
    "RESUME": _HEADER + ("resume_id", "workflow_id", "stop_ref"),
    "APPROVAL": _HEADER + ("approval_id", "workflow_id", "receipt_ref", "receipt_sha256", "decision", "reason"),
    "DENIAL": _HEADER + ("denial_id", "envelope", "envelope_size", "envelope_sha256", "signer_keyid", "statement_type",
                         "statement_id", "workflow_id", "reason_code", "reason"),
}


def statement_id(st: Mapping[str, Any]) -> str:
    """A statement's id (its kind's id field)."""
    return st[ID_FIELD[st["type"]]]


def workflow_of(st: Mapping[str, Any]) -> str:
    """The workflow a statement belongs to ("" for GENESIS, PRINCIPAL and a DENIAL naming none)."""
    t = st.get("type")
    if t in ("CONFIRM", "DELEGATE"):
        return (st.get("scope") or {}).get("workflow_id", "")
    if t in ("GENESIS", "PRINCIPAL"):
        return ""
    return st.get("workflow_id", "")


def _inv(path: str, msg: str) -> CustodyFormatError:
    return CustodyFormatError("schema_invalid", path, msg)


def _str(o: Mapping[str, Any], k: str, path: Optional[str] = None) -> str:
    v = o.get(k)
    if not isinstance(v, str):
        raise _inv(path or k, "is required" if v is None else "must be a string")
    return v


def _ident(o: Mapping[str, Any], k: str, path: Optional[str] = None) -> None:
    s = _str(o, k, path)
    prob = identifier_problem(s)
    if prob:
        raise _inv(path or k, f"identifier {s!r} {prob}")


def _opt_ident(o: Mapping[str, Any], k: str) -> None:
    if o.get(k) is not None:
        _ident(o, k)


def _text(o: Mapping[str, Any], k: str, path: Optional[str] = None) -> None:
    if _str(o, k, path) == "":
        raise _inv(path or k, "must not be empty")


def _hash(o: Mapping[str, Any], k: str) -> None:
    s = _str(o, k)
    if not is_lower_hex64(s):
        raise _inv(k, f"{s!r} is not 64 lowercase hex digits")


def _pubkey(o: Mapping[str, Any], k: str, path: Optional[str] = None) -> None:
    try:
        parse_public_key(_str(o, k, path))
    except CustodyKeyError as e:
        raise _inv(path or k, str(e)) from None


def _one_of(o: Mapping[str, Any], k: str, allowed: tuple[str, ...]) -> None:
    s = _str(o, k)
    if s not in allowed:
        raise _inv(k, f"{s!r} is not one of {', '.join(repr(a) for a in allowed)}")


def _int(o: Mapping[str, Any], k: str, lo: int, hi: int = MAX_SAFE_INTEGER) -> None:
    v = o.get(k)
    if type(v) is not int:
        raise _inv(k, "is required" if v is None else "must be an integer")
    if not lo <= v <= hi:
        raise _inv(k, f"{v} is outside {lo}..{hi}")


def _absent(o: Mapping[str, Any], k: str, why: str) -> None:
    if o.get(k) is not None:
        raise _inv(k, f"not allowed {why}")


def _limits(o: Mapping[str, Any], k: str) -> None:
    if o.get(k) is None:
        return
    try:
        check_limits(k, o[k], True)
    except CustodyFormatError as e:
        raise _inv(e.path, e.detail) from None


def _closed(v: Any, path: str, fields: tuple[str, ...], required: tuple[str, ...]) -> dict:
    if not isinstance(v, dict):
        raise _inv(path, "must be a JSON object")
    for k in v:
        if k not in fields:
            raise _inv(f"{path}.{k}" if path else k, "unknown field (schemas are closed)")
    for k in required:
        if v.get(k) is None:
            raise _inv(f"{path}.{k}" if path else k, "is required")
    return v


def _header(o: Mapping[str, Any]) -> None:
    ts = _str(o, "timestamp")
    if parse_time(ts) is None:
        raise _inv("timestamp", f"timestamp {ts!r} is not RFC 3339 UTC with whole seconds (like 2026-03-19T08:12:00Z)")
    _ident(o, "log")
    _ident(o, "actor")
    _int(o, "seq", 1)


def _grant(o: Mapping[str, Any]) -> None:
    g = _closed(o.get("grantee"), "grantee", ("name", "public_key"), ("name", "public_key"))
    _ident(g, "name", "grantee.name")
    _pubkey(g, "public_key", "grantee.public_key")
    _limits(o, "limits")
    _int(o, "ttl_seconds", 1)
    if type(o.get("revocable")) is not bool:
        raise _inv("revocable", "is required" if o.get("revocable") is None else "must be true or false")
    _hash(o, "scope_hash")
    s = _closed(o.get("scope"), "scope", ("workflow_id", "capabilities", "targets", "step_ids", "principals"), ("workflow_id", "capabilities", "targets"))
    rules = o.get("approvals")
    if rules is not None:
        if rules == []:
            raise _inv("approvals", "an empty list; omit it instead")
        if not isinstance(rules, list):
            raise _inv("approvals", "must be a list of rules")
        for i, r in enumerate(rules):
            _closed(r, f"approvals[{i}]", ("above", "approvers", "capabilities", "quorum", "rule_id", "step_ids", "targets", "ttl_seconds"), ())
    try:
        derive_descriptor(s, o.get("limits"), "1970-01-01T00:00:00Z", o["ttl_seconds"], rules)
    except CustodyFormatError as e:
        # As Go's statement.scopeError: a rule's fault is named "approvals", any other the scope's.
        path = "approvals" if e.path.startswith("approvals") else "scope"
        raise CustodyFormatError("non_canonical" if e.code == "non_canonical" else "schema_invalid", path, str(e)) from None


def _receipt(o: Mapping[str, Any]) -> None:
    for k in ("receipt_id", "workflow_id", "step_id", "action", "target", "authorization_ref"):
        _ident(o, k)
    _one_of(o, "result", ("pending", "success", "failure", "partial"))
    _hash(o, "scope_hash")
    if o["result"] == "pending":
        _limits(o, "reserve")
        if o.get("params_sha256") is not None:
            _hash(o, "params_sha256")
        _absent(o, "consumed", "on a pending receipt")
        _absent(o, "pending_ref", "on a pending receipt")
        _absent(o, "error", "on a pending receipt")
    else:
        _absent(o, "reserve", "on an outcome receipt (reserve belongs to the pending one)")
        _absent(o, "params_sha256", "on an outcome receipt")
        if o.get("pending_ref") is None:
            raise _inv("pending_ref", "an outcome receipt must name its pending receipt")
        _ident(o, "pending_ref")
        _limits(o, "consumed")
        if o.get("error") is not None:
            _text(o, "error")
    se = o.get("side_effects")
    if se is not None:
        if not isinstance(se, dict):
            raise _inv("side_effects", "must be a JSON object")
        for k in se:
            prob = identifier_problem(k)
            if prob:
                raise _inv(f"side_effects.{k}", f"identifier {k!r} {prob}")
            _str(se, k, f"side_effects.{k}")
    ev = o.get("evidence_refs")
    if ev is not None:
        if not isinstance(ev, list):
            raise _inv("evidence_refs", "must be an array of strings")
        for i, x in enumerate(ev):
            if not isinstance(x, str) or x == "":
                raise _inv(f"evidence_refs[{i}]", "must be a non-empty string")


def _stop(o: Mapping[str, Any]) -> None:
    _ident(o, "request_id")
    _ident(o, "workflow_id")
    _one_of(o, "stop_scope", ("step", "chain"))
    if o["stop_scope"] == "step":
        if o.get("step_id") is None:
            raise _inv("step_id", "a step STOP must name its step")
        _ident(o, "step_id")
    else:
        _absent(o, "step_id", "on a chain STOP")
    _one_of(o, "takeover_mode", ("human", "pause", "delegate_to_other_agent"))
    if o["takeover_mode"] == "delegate_to_other_agent":
        if o.get("takeover_to") is None:
            raise _inv("takeover_to", "takeover_mode delegate_to_other_agent must name the agent to take over")
        _ident(o, "takeover_to")
    else:
        _absent(o, "takeover_to", "unless takeover_mode is delegate_to_other_agent")
    _text(o, "reason")


def _genesis(o: Mapping[str, Any]) -> None:
    from .note import parse_verifier_key

    _ident(o, "genesis_id")
    _pubkey(o, "admin_key")
    lk = _str(o, "log_key")
    try:
        name = parse_verifier_key(lk).name
    except ValueError as e:
        raise _inv("log_key", f"not a signed-note verifier key: {e}") from None
    if name != o.get("log"):
        raise _inv("log_key", f"key name {name!r} is not the log's origin {o.get('log')!r}")
    if o.get("max_depth") is not None:
        _int(o, "max_depth", 1, 16)
    if o.get("clock_skew_seconds") is not None:
        _int(o, "clock_skew_seconds", 1)
    if o.get("max_ttl_seconds") is not None:
        _int(o, "max_ttl_seconds", 1)


def _principal(o: Mapping[str, Any]) -> None:
    _ident(o, "principal_id")
    _one_of(o, "op", ("enroll", "add_key", "retire", "log_key"))
    _ident(o, "name")
    kt = o.get("key_type")
    if kt is None or kt == "ed25519":
        _pubkey(o, "public_key")
        for k in ("credential_id", "rp_id", "origins", "allowed_types"):
            _absent(o, k, "without a passkey key_type")
    else:
        from .passkey import load_passkey_key

        try:
            load_passkey_key(kt, _str(o, "public_key"))
        except CustodyKeyError as e:
            raise _inv("public_key", str(e)) from None
        _str(o, "credential_id")
        _str(o, "rp_id")
        if not isinstance(o.get("origins"), list) or not all(isinstance(x, str) for x in o["origins"]):
            raise _inv("origins", "must be a non-empty list of origins")
        if o.get("allowed_types") is not None:
            at = o["allowed_types"]
            if not isinstance(at, list) or any(t not in KINDS for t in at):
                raise _inv("allowed_types", "must be a list of statement kinds")


def _approval(o: Mapping[str, Any]) -> None:
    _ident(o, "approval_id")
    _ident(o, "workflow_id")
    _ident(o, "receipt_ref")
    _hash(o, "receipt_sha256")
    _one_of(o, "decision", ("approve", "reject"))
    if o.get("reason") is not None:
        _text(o, "reason")


def _denial(o: Mapping[str, Any]) -> None:
    _ident(o, "denial_id")
    if o.get("envelope_size") is not None:
        _int(o, "envelope_size", 1)
        if o.get("envelope") is not None:
            raise _inv("envelope_size", "not allowed beside the envelope (it says how long a left-out envelope was)")
    _hash(o, "envelope_sha256")
    _hash(o, "signer_keyid")
    t = _str(o, "statement_type")
    if t not in KINDS:
        raise _inv("statement_type", f"{t!r} is not a statement kind")
    _opt_ident(o, "statement_id")
    _opt_ident(o, "workflow_id")
    if o.get("envelope") is not None:
        e = _closed(o["envelope"], "envelope", ("payload", "payloadType", "signatures"), ("payload", "payloadType", "signatures"))
        _str(e, "payload", "envelope.payload")
        _str(e, "payloadType", "envelope.payloadType")
        if not isinstance(e["signatures"], list):
            raise _inv("envelope.signatures", "must be an array")
        for i, sig in enumerate(e["signatures"]):
            so = _closed(sig, f"envelope.signatures[{i}]", ("keyid", "sig"), ("keyid", "sig"))
            _str(so, "keyid", f"envelope.signatures[{i}].keyid")
            _str(so, "sig", f"envelope.signatures[{i}].sig")
    rc = _str(o, "reason_code")
    if not re.fullmatch(r"[a-z_]{1,64}", rc):
        raise _inv("reason_code", f"{rc!r} is not a reason code")
    _text(o, "reason")


def _revoke(o: Mapping[str, Any]) -> None:
    _ident(o, "revoke_id")
    _ident(o, "workflow_id")
    _ident(o, "target_ref")
    _text(o, "reason")


def _confirm(o: Mapping[str, Any]) -> None:
    _ident(o, "confirm_id")
    _grant(o)
    if o.get("risk_level") is not None:
        _one_of(o, "risk_level", ("low", "medium", "high"))


def _delegate(o: Mapping[str, Any]) -> None:
    _ident(o, "delegation_id")
    _ident(o, "parent_ref")
    _hash(o, "parent_scope_hash")
    _grant(o)


def _resume(o: Mapping[str, Any]) -> None:
    _ident(o, "resume_id")
    _ident(o, "workflow_id")
    _ident(o, "stop_ref")


_RULES: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "GENESIS": _genesis, "PRINCIPAL": _principal, "CONFIRM": _confirm, "DELEGATE": _delegate, "REVOKE": _revoke,
    "RECEIPT": _receipt, "STOP": _stop, "RESUME": _resume, "APPROVAL": _approval, "DENIAL": _denial,
}


def validate_statement(st: Any) -> None:
    """Checks a statement against its kind's closed schema, field rules and the strict profile.

    Raises :class:`CustodyFormatError` (``schema_invalid`` or ``non_canonical``)
    naming the field. What needs the log (references, authority, seq, clock)
    is the ledger's to decide.
    """
    if not isinstance(st, dict):
        raise _inv("", "a statement is a JSON object")
    kind = st.get("type")
    if kind not in KINDS:
        raise _inv("type", f"{kind!r} is not one of {', '.join(KINDS)}")
    _closed(st, "", FIELDS[kind], ())
    check_profile(st)
    _header(st)
    _RULES[kind](st)


def grant_descriptor(g: Mapping[str, Any]) -> dict:
    """A CONFIRM's or DELEGATE's scope descriptor."""
    return derive_descriptor(g["scope"], g.get("limits"), g["timestamp"], g["ttl_seconds"], g.get("approvals"))


def seal(st: Statement) -> Statement:
    """Sets a CONFIRM's or DELEGATE's scope_hash from its scope, limits, ttl_seconds and timestamp."""
    if st.get("type") in ("CONFIRM", "DELEGATE"):
        st["scope_hash"] = scope_hash(grant_descriptor(st))
    return st


def statement_bytes(st: Statement) -> bytes:
    """The canonical JSON of a valid statement: the payload that gets signed."""
    validate_statement(st)
    if st["type"] in ("CONFIRM", "DELEGATE"):
        want = scope_hash(grant_descriptor(st))
        if st["scope_hash"] != want:
            raise _inv("scope_hash", f"{st['scope_hash']} is not the hash of the grant's scope descriptor ({want}); seal() the statement")
    return canonicalize(st)


def sign_statement(statement: Statement, key: PrivateKey) -> Envelope:
    """Validates a statement (a grant's scope_hash included), signs its canonical bytes in a DSSE
    envelope and returns the envelope (a dict; :func:`custody.envelope_bytes` is its wire form)."""
    return sign_envelope(key, statement["type"], statement_bytes(statement))


def parse_statement(kind: str, payload: Union[bytes, str]) -> Statement:
    """Reads a payload (canonical JSON) of the given kind and validates it."""
    v = parse_canonical(payload, "statement")
    if not isinstance(v, dict) or v.get("type") != kind:
        raise _inv("type", f"{(v.get('type') if isinstance(v, dict) else None)!r} does not match the payload type, which is for {kind}")
    validate_statement(v)
    return v
