"""Leaves (DESIGN §5): ``{"envelope":{...},"logged_at":"...","prev_in_workflow":N,"trust_head":M}`` in canonical JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .canonical import parse_canonical
from .envelope import ParsedEnvelope, parse_envelope
from .statement import parse_statement

MAX_LEAF_SIZE = 65535
_LOGGED_AT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d*[1-9])?Z\Z")


@dataclass(frozen=True)
class ReadLeaf:
    """A leaf read whole: the leaf, its envelope and the statement inside (not yet checked against any key)."""

    leaf: dict
    envelope: ParsedEnvelope
    statement: dict


def parse_leaf(data: bytes) -> ReadLeaf:
    """Reads leaf bytes: at most 65,535, canonical, closed schema, an envelope whose payload is a valid statement."""
    if len(data) > MAX_LEAF_SIZE:
        raise ValueError(f"leaf of {len(data)} bytes exceeds the {MAX_LEAF_SIZE}-byte limit")
    v = parse_canonical(data, "leaf")
    if not isinstance(v, dict):
        raise ValueError("leaf: not a JSON object")
    for k in v:
        if k not in ("envelope", "logged_at", "prev_in_workflow", "trust_head"):
            raise ValueError(f"leaf: unknown field {k!r}")
    if not isinstance(v.get("logged_at"), str) or not _LOGGED_AT.match(v["logged_at"]):
        raise ValueError(f"leaf: logged_at {v.get('logged_at')!r} is not RFC 3339 UTC without trailing zeros")
    if type(v.get("trust_head")) is not int or v["trust_head"] < 0:
        raise ValueError("leaf: trust_head is not an index")
    if "prev_in_workflow" in v and (type(v["prev_in_workflow"]) is not int or v["prev_in_workflow"] < 0):
        raise ValueError("leaf: prev_in_workflow is not an index")
    env = parse_envelope(v.get("envelope"))
    st = parse_statement(env.kind, env.payload)
    return ReadLeaf(v, env, st)
