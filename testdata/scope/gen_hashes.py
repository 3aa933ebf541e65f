#!/usr/bin/env python3
"""Writes hashes.json: scope-hash vectors computed apart from the Go code.

scope_hash = hex(SHA-256(b"custody/scope/v1\\x00" || JCS(descriptor)))  (DESIGN §3)

Every string here is printable ASCII and every number an integer, and for
such values RFC 8785 (JCS) is exactly json.dumps with sorted keys and no
whitespace. The script first reproduces the known answers in
../known-answers.json, so a wrong serialisation cannot go unnoticed.

Run from this folder: python3 gen_hashes.py > hashes.json
"""
import hashlib
import json
import os

PREFIX = b"custody/scope/v1\x00"


def jcs(v):
    s = json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert all(0x20 <= ord(ch) < 0x7F for ch in s), "vectors must be printable ASCII"
    return s


def scope_hash(d):
    return hashlib.sha256(PREFIX + jcs(d).encode()).hexdigest()


here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "known-answers.json")) as f:
    for ka in json.load(f)["scope_hash"]:
        assert scope_hash(ka["descriptor"]) == ka["scope_hash"], ka["name"]

LONG = "t/" + "x" * 254  # 256 bytes, the longest identifier

vectors = [
    ("minimal: one capability, one target, no limits",
     {"capabilities": ["read"], "expires_at": "2026-01-01T00:00:00Z",
      "targets": ["repo"], "workflow_id": "wf_1"}),
    ("everything: * capabilities and * targets",
     {"capabilities": ["*"], "expires_at": "2026-03-19T08:27:00Z",
      "targets": ["*"], "workflow_id": "wf_9f3a"}),
    ("prefix wildcards next to exact patterns",
     {"capabilities": ["db:read", "db:write"], "expires_at": "2026-06-30T12:00:00Z",
      "targets": ["db/*", "files/reports/*", "queue"], "workflow_id": "wf_etl"}),
    ("principals restrict grantees below",
     {"capabilities": ["purchase"], "expires_at": "2026-03-19T08:22:00Z",
      "principals": ["agent:acme/*", "agent:ops@corp"],
      "targets": ["airline_portal/account_123"], "workflow_id": "wf_9f3a"}),
    ("step_ids with a step subtree",
     {"capabilities": ["submit_form"], "expires_at": "2026-03-19T08:27:00Z",
      "step_ids": ["step_3", "step_4/*"], "targets": ["airline_portal/*"],
      "workflow_id": "wf_9f3a"}),
    ("limits at 0 and at 2^53-1",
     {"capabilities": ["transfer"], "expires_at": "2027-01-01T00:00:00Z",
      "limits": {"max_side_effects": 0, "usd_cents": 9007199254740991},
      "targets": ["bank/acct_1"], "workflow_id": "wf_pay"}),
    ("every field",
     {"capabilities": ["email:send", "purchase"], "expires_at": "2026-12-31T23:59:59Z",
      "limits": {"budget_usd": 50, "emails": 3}, "principals": ["agent:acme/mailer"],
      "step_ids": ["s1", "s2/*"], "targets": ["mail/*", "shop/cart"], "workflow_id": "wf_all"}),
    ("every identifier byte class",
     {"capabilities": ["A-Z_a-z.0-9:@+="], "expires_at": "2030-05-05T05:05:05Z",
      "targets": ["v1.2/..a/a..", "x+y=z@h:p"], "workflow_id": "wf.A-1:b@c+d=e"}),
    ("a 256-byte target and a 256-byte wildcard",
     {"capabilities": ["write"], "expires_at": "2026-03-19T08:27:00Z",
      "targets": [LONG, "u/" + "y" * 252 + "/*"], "workflow_id": "wf_long"}),
    ("latest expiry and a limit key with segments",
     {"capabilities": ["spend"], "expires_at": "9999-12-31T23:59:59Z",
      "limits": {"usd/total": 10}, "targets": ["wallet"], "workflow_id": "wf_far"}),
    # Approval rules (DESIGN §7) are copied into the descriptor sorted by
    # rule_id, so the scope hash commits to them.
    ("one approval rule, as DESIGN §7 writes it",
     {"approvals": [{"above": {"budget_usd": 300}, "approvers": ["org:acme/finance/*", "user:alice"],
                     "capabilities": ["purchase"], "quorum": 1, "rule_id": "big_spend",
                     "targets": ["airline_portal/*"], "ttl_seconds": 900}],
      "capabilities": ["purchase", "submit_form"], "expires_at": "2026-03-19T08:27:00Z",
      "limits": {"budget_usd": 800, "max_side_effects": 1}, "step_ids": ["step_2", "step_3"],
      "targets": ["airline_portal/account_123"], "workflow_id": "wf_9f3a"}),
    ("two approval rules sorted by rule_id, one with step_ids and a quorum of 2",
     {"approvals": [{"approvers": ["user:alice", "user:bob", "user:carol"], "capabilities": ["db:delete"],
                     "quorum": 2, "rule_id": "deletes", "step_ids": ["prod/*"], "ttl_seconds": 86400},
                    {"approvers": ["*"], "capabilities": ["*"], "quorum": 16, "rule_id": "everything",
                     "ttl_seconds": 1}],
      "capabilities": ["db:delete", "db:read"], "expires_at": "2026-06-30T12:00:00Z",
      "targets": ["db/*"], "workflow_id": "wf_etl"}),
]

out = []
for name, d in vectors:
    out.append({"name": name, "descriptor": d, "jcs": jcs(d), "scope_hash": scope_hash(d)})
print(json.dumps({"note": "Computed by gen_hashes.py (Python hashlib/json), apart from the Go code.",
                  "vectors": out}, indent=2))
