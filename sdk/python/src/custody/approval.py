"""Deciding, from a verified workflow bundle, whether a held pending RECEIPT is
approved (DESIGN §7): the runtime's own check, never the server's word.

The rules in force are those of the receipt's grant and of every ancestor
grant; a rule matches when the receipt's action is under its capabilities,
its target under its targets and its step under its step_ids (absent sets
match all) and, with ``above``, it reserves more than ``above[k]`` for some
k. Every matched rule needs ``quorum`` approving APPROVALs, of exactly
this receipt's payload bytes, from distinct principal names its approvers
cover, enrolled at the receipt's trust_head, logged before the deadline.
One reject from an eligible approver rejects; a STOP covering the step or a
REVOKE on the chain after the receipt closes it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Optional

from .bundle import BundleVerdict
from .scope import match, parse_time


@dataclass
class ApprovalState:
    #: "held", "approved", "rejected", "expired" or "closed".
    state: str
    deadline: Optional[int] = None
    reason: str = ""
    rules: list[dict] = field(default_factory=list)
    approved_by: dict[str, list[str]] = field(default_factory=dict)


def _covers(patterns: Optional[list], value: str) -> bool:
    return patterns is None or any(match(p, value) for p in patterns)


def decide(v: BundleVerdict, receipt_index: int, now: int) -> ApprovalState:
    """The state of the held receipt at receipt_index, from a verified (whole-workflow) bundle."""
    if not v.valid:
        return ApprovalState("held", reason=f"the bundle does not verify: {v.failure}")
    r = v.entries.get(receipt_index)
    if r is None or r.statement["type"] != "RECEIPT" or r.statement["result"] != "pending":
        return ApprovalState("held", reason=f"entry {receipt_index} is not a pending RECEIPT in the bundle")
    rc = r.statement
    rsha = hashlib.sha256(r.envelope.payload).hexdigest()
    by_id = {e.statement.get(k): (i, e) for i, e in v.entries.items()
             for k in ("confirm_id", "delegation_id") if e.statement.get(k) is not None}
    chain = []
    gid: Optional[str] = rc["authorization_ref"]
    while gid is not None:
        if gid not in by_id:
            return ApprovalState("held", reason=f"grant {gid} is not in the bundle")
        gi, g = by_id[gid]
        chain.append((gi, g.statement))
        gid = g.statement.get("parent_ref")
    matched = []
    grant_expiry: Optional[int] = None
    for gi, g in chain:
        ts = parse_time(g["timestamp"])
        if ts is not None:
            exp = ts + g["ttl_seconds"]
            grant_expiry = exp if grant_expiry is None else min(grant_expiry, exp)
        for rule in g.get("approvals") or []:
            if not _covers(rule.get("capabilities"), rc["action"]):
                continue
            if not _covers(rule.get("targets"), rc["target"]):
                continue
            if not _covers(rule.get("step_ids"), rc["step_id"]):
                continue
            above = rule.get("above")
            if above:
                reserve = rc.get("reserve") or {}
                if not any(reserve.get(k, 0) > n for k, n in above.items()):
                    continue
            matched.append(dict(rule, grant=g.get("confirm_id") or g.get("delegation_id")))
    if not matched:
        return ApprovalState("held", reason="no approval rule on the grant chain matches this receipt")
    logged = parse_time(r.leaf["logged_at"].split(".")[0].rstrip("Z") + "Z")
    assert logged is not None
    deadline = logged + min(rule["ttl_seconds"] for rule in matched)
    if grant_expiry is not None:
        deadline = min(deadline, grant_expiry)
    st = ApprovalState("held", deadline=deadline, rules=matched)
    since = getattr(v, "principal_since", {})
    trust_head = r.leaf["trust_head"]
    names: dict[str, set[str]] = {rule["rule_id"] + "@" + rule["grant"]: set() for rule in matched}
    grant_ids = {c[1].get("confirm_id") or c[1].get("delegation_id") for c in chain}
    for i in sorted(v.entries):
        if i <= receipt_index:
            continue
        e = v.entries[i].statement
        t = e["type"]
        if t == "STOP" and e["workflow_id"] == rc["workflow_id"]:
            sid = e.get("step_id")
            if e["stop_scope"] == "chain" or rc["step_id"] == sid or rc["step_id"].startswith(f"{sid}/"):
                st.state, st.reason = "closed", f"STOP {e['request_id']} at {i} covers the step"
                return st
        if t == "REVOKE" and e["target_ref"] in grant_ids:
            st.state, st.reason = "closed", f"REVOKE {e['revoke_id']} at {i} ends the grant {e['target_ref']}"
            return st
        if t != "APPROVAL" or e["receipt_ref"] != rc["receipt_id"]:
            continue
        if e["receipt_sha256"] != rsha or e["workflow_id"] != rc["workflow_id"]:
            continue
        kid = v.entries[i].envelope.key_id
        name = v.principals.get(kid)
        if name is None or since.get(kid, 1 << 62) > trust_head:
            continue
        if v.principal_retired.get(kid, 1 << 62) < i:
            continue  # retired before this APPROVAL: it does not count
        at = parse_time(v.entries[i].leaf["logged_at"].split(".")[0].rstrip("Z") + "Z")
        if at is None or at >= deadline:
            continue
        eligible = [rule for rule in matched if _covers(rule.get("approvers"), name)]
        if not eligible:
            continue
        if e["decision"] == "reject":
            st.state, st.reason = "rejected", f"{name} rejected it (APPROVAL {e['approval_id']} at {i})" + (f": {e['reason']}" if e.get("reason") else "")
            return st
        for rule in eligible:
            names[rule["rule_id"] + "@" + rule["grant"]].add(name)
        if all(len(names[rule["rule_id"] + "@" + rule["grant"]]) >= rule["quorum"] for rule in matched):
            st.state = "approved"
            st.approved_by = {k: sorted(n) for k, n in names.items()}
            return st
    if now >= deadline:
        st.state, st.reason = "expired", f"the deadline passed unapproved"
    st.approved_by = {k: sorted(n) for k, n in names.items()}
    return st
