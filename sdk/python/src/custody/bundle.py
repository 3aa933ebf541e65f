"""Offline checks of a custody-bundle/v1 (DESIGN §6) with nothing but the log's checkpoint key(s).

Checked: the checkpoint's signature and origin; every entry's inclusion
proof, in strictly increasing index order, the subject among them; every
leaf's canonical form and schema, and ``log`` equal to the origin; GENESIS
at index 0 with a log_key among the given keys; every envelope's signature
by the key the bundle binds to its key id by then (admin for GENESIS and
PRINCIPAL, enrolled principals, passkeys included, and grantees for the
rest, the DENIAL key in force for DENIALs); a DENIAL's rejected envelope
when its signer is bound; the subject's workflow chain and the trust chain.

Not re-derived: the ledger's decisions (authority, attenuation, depth,
liveness, STOPs, budgets, DENIAL reasons); ``custody verify`` does that.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ._encoding import b64decode_strict
from .canonical import canonicalize
from .envelope import envelope_verifies, parse_envelope
from .keys import parse_public_key
from .leaf import ReadLeaf, parse_leaf
from .merkle import leaf_hash, verify_inclusion
from .note import Checkpoint, KeySet, parse_verifier_key

BUNDLE_FORMAT = "custody-bundle/v1"


@dataclass
class BundleCheck:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class BundleVerdict:
    valid: bool = False
    failure: str = ""
    checks: list[BundleCheck] = field(default_factory=list)
    checkpoint: Optional[Checkpoint] = None
    entries: dict[int, ReadLeaf] = field(default_factory=dict)
    #: The signing key (raw Ed25519 bytes, or a passkey enrollment dict) bound to each key id, as the bundle showed.
    keys: dict[str, Any] = field(default_factory=dict)
    #: Principal name by key id (enrolled or added by the admin), as the bundle showed.
    principals: dict[str, str] = field(default_factory=dict)
    #: The index at which each principal key id was enrolled or added.
    principal_since: dict[str, int] = field(default_factory=dict)
    #: The index at which each retired principal key id (by name: every key of the name) was retired.
    principal_retired: dict[str, int] = field(default_factory=dict)
    not_checked: tuple[str, ...] = (
        "the ledger's decisions (authority, attenuation, depth, liveness, STOPs, budgets, DENIAL reasons)",
        "seq and ids across the whole log (custody audit)",
    )


class _Fail(Exception):
    def __init__(self, check: str, detail: str) -> None:
        super().__init__(detail)
        self.check = check


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def verify_bundle(bundle: Union[dict, str, bytes], log_key: Union[str, KeySet]) -> BundleVerdict:
    """Checks a bundle (parsed JSON or its text) against the log's checkpoint key (or key set).

    Returns a :class:`BundleVerdict`; ``valid`` is False and ``failure`` names
    the first failed check otherwise. Never raises on bad input.
    """
    v = BundleVerdict()

    def ok(name: str, detail: str = "") -> None:
        v.checks.append(BundleCheck(name, True, detail))

    try:
        try:
            b = json.loads(bundle) if isinstance(bundle, (str, bytes, bytearray)) else bundle
        except ValueError as e:
            raise _Fail("format", f"not JSON: {e}") from None
        if not isinstance(b, dict) or b.get("format") != BUNDLE_FORMAT:
            raise _Fail("format", f"format {b.get('format') if isinstance(b, dict) else None!r} is not {BUNDLE_FORMAT}")
        try:
            keys = log_key if isinstance(log_key, KeySet) else KeySet.parse(log_key)
        except ValueError as e:
            raise _Fail("key", str(e)) from None
        if b.get("origin") != keys.origin:
            raise _Fail("origin", f"bundle of log {b.get('origin')!r}, key of {keys.origin!r}")
        ok("format")
        try:
            cp = keys.open_checkpoint(b.get("checkpoint", ""))
        except (ValueError, TypeError) as e:
            raise _Fail("checkpoint", str(e)) from None
        v.checkpoint = cp
        ok("checkpoint", f"size {cp.size}")
        ents = b.get("entries")
        if not isinstance(ents, list) or not ents:
            raise _Fail("inclusion", "no entries")
        last = -1
        for e in ents:
            idx = e.get("index") if isinstance(e, dict) else None
            if type(idx) is not int or idx <= last:
                raise _Fail("inclusion", f"entry {idx} is out of index order")
            last = idx
            if idx >= cp.size:
                raise _Fail("inclusion", f"entry {idx} is beyond the checkpoint's size {cp.size}")
            try:
                leaf = b64decode_strict(e.get("leaf"))
                proof = [b64decode_strict(h) for h in (e.get("proof") or [])]
                verify_inclusion(idx, cp.size, leaf_hash(leaf), proof, cp.root)
            except (ValueError, TypeError) as err:
                raise _Fail("inclusion", f"entry {idx}: {err}") from None
            try:
                v.entries[idx] = parse_leaf(leaf)
            except ValueError as err:
                raise _Fail("canonical", f"entry {idx}: {err}") from None
        subject = b.get("subject")
        if subject not in v.entries:
            raise _Fail("inclusion", f"the subject {subject} is not among the entries")
        ok("inclusion", f"{len(v.entries)} entries")
        ok("canonical")
        for i, r in v.entries.items():
            if r.statement.get("log") != b["origin"]:
                raise _Fail("log", f"entry {i}: log {r.statement.get('log')!r}, want {b['origin']!r}")
        ok("log")
        g = v.entries.get(0)
        if g is None or g.statement["type"] != "GENESIS":
            raise _Fail("genesis", "entry 0 is not in the bundle as a GENESIS")
        try:
            log_pub = parse_verifier_key(g.statement["log_key"]).public_key
        except ValueError as e:
            raise _Fail("genesis", f"log_key: {e}") from None
        if not keys.has(log_pub):
            raise _Fail("genesis", f"GENESIS log_key {g.statement['log_key']} is not one of the given checkpoint keys")
        ok("genesis")

        bound: dict[str, Any] = {}
        log_role = {_sha(log_pub)}
        denial_key = log_pub
        admin = parse_public_key(g.statement["admin_key"])
        admin_id = _sha(admin)
        for i, r in v.entries.items():
            st = r.statement
            kid = r.envelope.key_id
            t = st["type"]
            signer: Any = None
            if t == "GENESIS":
                if i != 0:
                    raise _Fail("genesis", f"a second GENESIS at {i}")
                signer = admin
            elif t == "PRINCIPAL":
                signer = admin if kid == admin_id else None
            elif t == "DENIAL":
                signer = denial_key if kid == _sha(denial_key) else None
            else:
                signer = None if kid in log_role else bound.get(kid)
            if signer is None:
                raise _Fail("signature", f"entry {i} ({t}): key {kid} is not the key the bundle binds to sign it at this index")
            if not envelope_verifies(r.envelope, signer):
                raise _Fail("signature", f"entry {i} ({t}): the signature does not verify")
            if t == "PRINCIPAL":
                op = st["op"]
                if op in ("enroll", "add_key"):
                    if st.get("key_type", "ed25519") == "ed25519":
                        pub = parse_public_key(st["public_key"])
                        bound[_sha(pub)] = pub
                        v.principals[_sha(pub)] = st["name"]
                        v.principal_since[_sha(pub)] = i
                    else:
                        der = b64decode_strict(st["public_key"])
                        bound[_sha(der)] = dict(st)
                        v.principals[_sha(der)] = st["name"]
                        v.principal_since[_sha(der)] = i
                if op == "retire":
                    for kid, nm in v.principals.items():
                        if nm == st["name"]:
                            v.principal_retired.setdefault(kid, i)
                if op == "log_key":
                    if st["name"] != b["origin"]:
                        raise _Fail("signature", f"entry {i}: a log_key statement names {st['name']!r}, not the origin")
                    denial_key = parse_public_key(st["public_key"])
                    log_role.add(_sha(denial_key))
            if t in ("CONFIRM", "DELEGATE"):
                pub = parse_public_key(st["grantee"]["public_key"])
                bound[_sha(pub)] = pub
            if t == "DENIAL" and st.get("envelope") is not None:
                if _sha(canonicalize(st["envelope"])) != st["envelope_sha256"]:
                    raise _Fail("denial", f"DENIAL {i}: envelope_sha256 is not the hash of its envelope")
                pub = bound.get(st["signer_keyid"])
                if pub is not None:
                    try:
                        inner = parse_envelope(st["envelope"])
                        good = inner.key_id == st["signer_keyid"] and envelope_verifies(inner, pub)
                    except ValueError:
                        good = False
                    if not good:
                        raise _Fail("denial", f"DENIAL {i}: the rejected envelope's signature does not verify under its signer {st['signer_keyid']}")
        v.keys = bound
        ok("signature")

        def walk(start: int, what: str) -> int:
            at = start
            while True:
                r = v.entries.get(at)
                if r is None:
                    raise _Fail("backlinks", f"{what}: entry {at} is missing")
                prev = r.leaf.get("prev_in_workflow")
                if prev is None:
                    return at
                if prev >= at:
                    raise _Fail("backlinks", f"{what}: entry {at} links forward to {prev}")
                at = prev

        walk(subject, "the subject's workflow")
        if walk(v.entries[subject].leaf["trust_head"], "the trust chain") != 0:
            raise _Fail("backlinks", "the trust chain does not lead back to GENESIS")
        ok("backlinks")
        v.valid = True
    except _Fail as e:
        v.checks.append(BundleCheck(e.check, False, str(e)))
        v.failure = f"{e.check}: {e}"
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        v.checks.append(BundleCheck("bundle", False, str(e)))
        v.failure = f"bundle: {e}"
    return v
