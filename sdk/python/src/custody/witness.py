"""Witnesses (DESIGN §5): C2SP ``cosignature/v1`` keys and signatures, and witness
policies in the tlog-policy grammar custody uses::

    witness NAME VKEY [URL]
    group NAME N|any|all MEMBER...
    quorum NAME|none
    log VKEY [URL]          (read and ignored here)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Optional

from ._encoding import b64decode_strict
from .keys import verify_signature


@dataclass(frozen=True)
class WitnessKey:
    name: str
    id: int
    public_key: bytes


def _kid(name: str, alg: int, pub: bytes) -> int:
    return int.from_bytes(hashlib.sha256(name.encode() + bytes([0x0A, alg]) + pub).digest()[:4], "big")


def _valid_name(name: str) -> bool:
    return name != "" and not re.search(r"\s", name) and "+" not in name


def parse_witness_key(vkey: str) -> WitnessKey:
    """A witness's verifier key (type 0x04 cosignature/v1, or 0x01 Ed25519)."""
    parts = vkey.split("+", 2)
    if len(parts) != 3:
        raise ValueError(f"{vkey!r} is not a verifier key (<name>+<key id>+<base64 key>)")
    name, idh, b = parts
    if not _valid_name(name):
        raise ValueError(f"verifier key {vkey!r}: invalid key name")
    if not re.fullmatch(r"[0-9a-fA-F]{8}", idh):
        raise ValueError(f"verifier key {vkey!r}: the key id is not 8 hex digits")
    try:
        raw = b64decode_strict(b)
    except ValueError:
        raise ValueError(f"verifier key {vkey!r}: the key is not standard base64") from None
    alg = raw[0] if raw else 0
    if alg not in (0x04, 0x01):
        raise ValueError(f"verifier key {vkey!r}: signature type 0x{alg:x} is not a witness key type")
    pub = raw[1:]
    if len(pub) != 32:
        raise ValueError(f"verifier key {vkey!r}: an Ed25519 key is 32 bytes, not {len(pub)}")
    if int(idh, 16) != _kid(name, alg, pub):
        raise ValueError(f"verifier key {vkey!r}: the key id does not match the key")
    return WitnessKey(name, _kid(name, 0x04, pub), pub)


def cosignature_message(text: str, timestamp: int) -> bytes:
    """What a cosignature/v1 signature covers."""
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


@dataclass
class Cosignature:
    witness: str
    key_name: str
    time: datetime


@dataclass
class WitnessEvaluation:
    satisfied: bool
    quorum: str
    signed: list[Cosignature] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass
class _Comp:
    name: str
    key: Optional[WitnessKey]
    n: int
    members: list[int]
    required: bool = False


_KEYWORDS = {"witness", "group", "any", "all", "none", "quorum", "log"}


class WitnessPolicy:
    """Which witnesses must cosign a checkpoint."""

    def __init__(self, comps: list[_Comp], quorum: int) -> None:
        self._comps = comps
        self._quorum = quorum

    @classmethod
    def parse(cls, text: str) -> "WitnessPolicy":
        if len(text.encode()) > 64 << 10:
            raise ValueError("policy: more than 64 KiB")
        comps: list[_Comp] = []
        by_name: dict[str, int] = {}
        quorum, qline = "", 0
        for i, raw in enumerate(text.split("\n")):
            ln = i + 1
            f = raw.split("#", 1)[0].split()
            if not f:
                continue

            def fail(msg: str) -> ValueError:
                return ValueError(f"policy line {ln}: {msg}")

            def new_name(name: str) -> None:
                if name in _KEYWORDS:
                    raise fail(f"{name!r} is a keyword and cannot name a witness or group")
                if name in by_name:
                    raise fail(f"{name!r} is defined twice")
                if len(comps) == 256:
                    raise fail("more than 256 witnesses and groups")

            if f[0] == "log":
                if not 2 <= len(f) <= 3:
                    raise fail(f"want `log VKEY [URL]`, got {len(f)} fields")
            elif f[0] == "witness":
                if not 3 <= len(f) <= 4:
                    raise fail(f"want `witness NAME VKEY [URL]`, got {len(f)} fields")
                new_name(f[1])
                try:
                    key = parse_witness_key(f[2])
                except ValueError as e:
                    raise fail(f"witness {f[1]}: {e}") from None
                if any(c.key and c.key.name == key.name and c.key.id == key.id for c in comps):
                    raise fail(f"witness {f[1]} has the same key as another witness")
                by_name[f[1]] = len(comps)
                comps.append(_Comp(f[1], key, 0, []))
            elif f[0] == "group":
                if len(f) < 4:
                    raise fail(f"want `group NAME N|any|all MEMBER...`, got {len(f)} fields")
                name, thr, members = f[1], f[2], f[3:]
                new_name(name)
                idx: list[int] = []
                for m in members:
                    if m not in by_name:
                        raise fail(f"group {name}: member {m!r} is not a witness or group defined above")
                    if by_name[m] in idx:
                        raise fail(f"group {name}: member {m!r} is listed twice")
                    idx.append(by_name[m])
                if thr == "any":
                    n = 1
                elif thr == "all":
                    n = len(members)
                else:
                    if not re.fullmatch(r"[1-9][0-9]{0,2}", thr) or int(thr) > 255:
                        raise fail(f"group {name}: threshold {thr!r} is not a number from 1 to 255, any or all")
                    n = int(thr)
                    if n > len(members):
                        raise fail(f"group {name}: threshold {n} is more than its {len(members)} members")
                by_name[name] = len(comps)
                comps.append(_Comp(name, None, n, idx))
            elif f[0] == "quorum":
                if len(f) != 2:
                    raise fail(f"want `quorum NAME`, got {len(f)} fields")
                if quorum:
                    raise fail(f"a second quorum (the first is on line {qline})")
                quorum, qline = f[1], ln
            else:
                raise fail(f"unknown keyword {f[0]!r} (want log, witness, group or quorum)")
        if not quorum:
            raise ValueError("policy: no `quorum` line: say which witness or group must cosign (or `quorum none`)")
        if quorum == "none":
            return cls(comps, -1)
        if quorum not in by_name:
            raise ValueError(f"policy line {qline}: quorum {quorum!r} is not a witness or group defined in the policy")
        q = by_name[quorum]

        def mark(j: int) -> None:
            if comps[j].required:
                return
            comps[j].required = True
            for m in comps[j].members:
                mark(m)

        mark(q)
        return cls(comps, q)

    @property
    def none(self) -> bool:
        return self._quorum < 0

    def _describe(self, j: int) -> str:
        c = self._comps[j]
        if c.key:
            return f"witness {c.name}"
        parts = [self._comps[m].name if self._comps[m].key else f"({self._describe(m)})" for m in c.members]
        return f"group {c.name}: {c.n} of [{' '.join(parts)}]"

    def __str__(self) -> str:
        return "no witnesses (quorum none)" if self._quorum < 0 else self._describe(self._quorum)

    def evaluate(self, checkpoint: str) -> WitnessEvaluation:
        """Which witnesses cosigned a checkpoint and whether they meet the quorum (cosignatures only)."""
        ev = WitnessEvaluation(False, str(self))
        split = checkpoint.rfind("\n\n")
        text = checkpoint[: split + 1] if split >= 0 else ""
        lines = [x for x in checkpoint[split + 2 :].split("\n") if x] if split >= 0 else []
        signed = [False] * len(self._comps)
        for j, c in enumerate(self._comps):
            if not c.key:
                continue
            k = c.key
            state = "missing"
            for line in lines:
                if not line.startswith("\u2014 "):
                    continue
                name, _, sb = line[2:].partition(" ")
                if name != k.name:
                    continue
                try:
                    sig = base64.b64decode(sb)
                except (binascii.Error, ValueError):
                    continue
                if len(sig) < 4 or int.from_bytes(sig[:4], "big") != k.id:
                    continue
                body = sig[4:]
                ts = int.from_bytes(body[:8], "big") if len(body) == 72 else -1
                if ts < 0 or ts > (1 << 63) - 1 or not text or not verify_signature(k.public_key, cosignature_message(text, ts), body[8:]):
                    state = "invalid"
                    break
                state = "signed"
                ev.signed.append(Cosignature(c.name, k.name, datetime.fromtimestamp(ts, timezone.utc)))
                break
            if state == "signed":
                signed[j] = True
            elif state == "invalid":
                ev.invalid.append(c.name)
            elif c.required:
                ev.missing.append(c.name)
        if self._quorum < 0:
            ev.satisfied = True
            return ev
        for j, c in enumerate(self._comps):
            if not c.key:
                signed[j] = sum(1 for m in c.members if signed[m]) >= c.n
        ev.satisfied = signed[self._quorum]
        return ev
