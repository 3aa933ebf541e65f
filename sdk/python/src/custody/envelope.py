"""DSSE v1 envelopes (DESIGN §1).

Exactly one signature over ``PAE(type, body) = "DSSEv1" SP LEN(type) SP type
SP LEN(body) SP body``, payloadType ``application/vnd.custody.<kind>.v1+json``,
standard base64 decoded strictly, and the key id the lowercase hex SHA-256
of the signer's public key (of the SPKI DER for a passkey).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, Mapping, Union

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives import serialization

from ._encoding import b64, b64decode_strict, is_lower_hex64
from .canonical import canonicalize
from .errors import CustodyFormatError, SignatureError
from .keys import PrivateKey, key_id, verify_signature

KINDS = ("GENESIS", "PRINCIPAL", "CONFIRM", "DELEGATE", "REVOKE", "RECEIPT", "STOP", "RESUME", "APPROVAL", "DENIAL")

Envelope = dict  # {"payloadType": str, "payload": str, "signatures": [{"keyid": str, "sig": str}]}


def payload_type(kind: str) -> str:
    """The DSSE payloadType of a statement kind."""
    if kind not in KINDS:
        raise CustodyFormatError("schema_invalid", "type", f"{kind!r} is not a statement kind")
    return f"application/vnd.custody.{kind.lower()}.v1+json"


_BY_TYPE = {payload_type(k): k for k in KINDS}


def kind_of_payload_type(pt: str) -> str | None:
    return _BY_TYPE.get(pt)


def pae(ptype: str, body: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding."""
    t = ptype.encode("utf-8")
    return b"DSSEv1 %d %s %d " % (len(t), t, len(body)) + body


def sign_envelope(key: PrivateKey, kind: str, payload: bytes) -> Envelope:
    """Signs payload bytes as a statement of kind; returns the envelope (a dict)."""
    pt = payload_type(kind)
    sig = key.sign(pae(pt, payload))
    return {"payload": b64(payload), "payloadType": pt, "signatures": [{"keyid": key.key_id, "sig": b64(sig)}]}


def envelope_bytes(env: Mapping[str, Any]) -> bytes:
    """An envelope's canonical JSON: what the ledger is sent, and what a DENIAL's envelope_sha256 hashes."""
    return canonicalize(dict(env))


@dataclass(frozen=True)
class ParsedEnvelope:
    """An envelope read and checked for form (not yet for its signature)."""

    envelope: dict
    kind: str
    payload_type: str
    payload: bytes
    key_id: str
    sig: bytes


def _env_err(path: str, msg: str) -> CustodyFormatError:
    return CustodyFormatError("bad_envelope", path, msg)


def _closed(obj: Any, path: str, fields: tuple[str, ...]) -> dict:
    if not isinstance(obj, dict):
        raise _env_err(path, "must be a JSON object")
    for k in obj:
        if k not in fields:
            raise _env_err(f"{path}.{k}" if path else k, "unknown field")
    for k in fields:
        if k not in obj:
            raise _env_err(f"{path}.{k}" if path else k, "is missing")
    return obj


def parse_envelope(value: Union[str, bytes, Mapping[str, Any], ParsedEnvelope]) -> ParsedEnvelope:
    """Reads an envelope (JSON text, bytes or dict) and checks its form: closed schema,
    a custody payloadType, exactly one signature, a 64-hex key id, strict base64."""
    if isinstance(value, ParsedEnvelope):
        return value
    obj: Any = value
    if isinstance(value, (str, bytes, bytearray)):
        try:
            obj = json.loads(value)
        except (ValueError, UnicodeDecodeError) as e:
            raise _env_err("", f"not a JSON envelope: {e}") from None
    env = _closed(obj, "", ("payload", "payloadType", "signatures"))
    if not isinstance(env["payloadType"], str) or not isinstance(env["payload"], str) or not isinstance(env["signatures"], list):
        raise _env_err("", "payloadType and payload are strings, signatures an array")
    kind = kind_of_payload_type(env["payloadType"])
    if kind is None:
        raise _env_err("payloadType", f"{env['payloadType']!r} is not application/vnd.custody.<kind>.v1+json for a custody statement kind")
    sigs = env["signatures"]
    if len(sigs) != 1:
        raise _env_err("signatures", f"must hold exactly one signature, got {len(sigs)}")
    s = _closed(sigs[0], "signatures[0]", ("keyid", "sig"))
    if not is_lower_hex64(s["keyid"]):
        raise _env_err("signatures[0].keyid", "must be 64 lowercase hex digits (SHA-256 of the public key)")
    try:
        payload = b64decode_strict(env["payload"])
    except ValueError as e:
        raise _env_err("payload", str(e)) from None
    if not payload:
        raise _env_err("payload", "must not be empty")
    try:
        sig = b64decode_strict(s["sig"])
    except ValueError as e:
        raise _env_err("signatures[0].sig", str(e)) from None
    if not sig:
        raise _env_err("signatures[0].sig", "must not be empty")
    clean = {"payload": env["payload"], "payloadType": env["payloadType"], "signatures": [{"keyid": s["keyid"], "sig": s["sig"]}]}
    return ParsedEnvelope(clean, kind, env["payloadType"], payload, s["keyid"], sig)


def _ed25519_raw(key: Any) -> bytes | None:
    if isinstance(key, (bytes, bytearray)) and len(key) == 32:
        return bytes(key)
    if isinstance(key, str):
        try:
            raw = b64decode_strict(key)
        except ValueError:
            return None
        return raw if len(raw) == 32 else None
    if isinstance(key, Ed25519PublicKey):
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    if isinstance(key, PrivateKey):
        return key.public_key
    return None


def verify_envelope(envelope: Union[str, bytes, Mapping[str, Any], ParsedEnvelope], key: Any) -> ParsedEnvelope:
    """Verifies the envelope's one signature and returns the parsed envelope; raises on failure.

    key is an Ed25519 public key (raw 32 bytes, its standard base64, or a
    cryptography ``Ed25519PublicKey``), or a passkey enrollment: the dict a
    PRINCIPAL carries (``key_type`` ``webauthn-es256``/``webauthn-ed25519``,
    ``public_key`` the base64 SPKI DER, ``rp_id``, ``origins``,
    ``allowed_types``), checked as DESIGN §1 says.
    Raises :class:`SignatureError` (``reason`` names the rule) or
    :class:`CustodyFormatError` for an envelope of the wrong form.
    """
    p = parse_envelope(envelope)
    if isinstance(key, Mapping) and key.get("key_type", "ed25519") != "ed25519":
        from .passkey import verify_passkey

        verify_passkey(p, key)
        return p
    if isinstance(key, Mapping):
        key = key.get("public_key")
    raw = _ed25519_raw(key)
    if raw is None:
        raise SignatureError("the key is not an Ed25519 public key or a passkey enrollment", "bad_key")
    if key_id(raw) != p.key_id:
        raise SignatureError(f"the envelope names key {p.key_id}, not {key_id(raw)}", "unknown_key")
    if len(p.sig) != 64 or not verify_signature(raw, pae(p.payload_type, p.payload), p.sig):
        raise SignatureError("the Ed25519 signature does not verify", "bad_signature")
    return p


def envelope_verifies(p: ParsedEnvelope, key: Any) -> bool:
    """verify_envelope as a bool."""
    try:
        verify_envelope(p, key)
        return True
    except (SignatureError, CustodyFormatError):
        return False


def dedup_hash(p: ParsedEnvelope) -> str:
    """The ledger's identity of a submission (Ed25519): SHA-256 over "custody/submission/v1\\0" and
    the length-prefixed payloadType, payload and signature."""
    h = hashlib.sha256(b"custody/submission/v1\x00")
    for part in (p.payload_type.encode(), p.payload, p.sig):
        h.update(struct.pack(">Q", len(part)))
        h.update(part)
    return h.hexdigest()


def same_submission(a: ParsedEnvelope, b: ParsedEnvelope) -> bool:
    """Whether two envelopes are the same submission. ECDSA passkey signatures are randomised,
    so (payloadType, payload, keyid) decides when the signature is not a 64-byte Ed25519 one."""
    if a.payload_type != b.payload_type or a.payload != b.payload or a.key_id != b.key_id:
        return False
    return a.sig == b.sig or len(a.sig) != 64 or len(b.sig) != 64
