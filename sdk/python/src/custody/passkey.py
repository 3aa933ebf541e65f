"""Passkey (WebAuthn) signatures on DSSE envelopes, DESIGN v4 §1.

A passkey-signed envelope's ``sig`` is the standard base64 of exactly the
JCS object ``{"authenticator_data","client_data_json","signature"}`` (strict
unpadded base64url members). It verifies when the client data is a
``webauthn.get`` over the challenge base64url(SHA-256(PAE)), from an
enrolled origin, not cross-origin and without ``topOrigin``; the
authenticator data starts with SHA-256(rp_id) and has user presence and
verification set, attested data clear, backup state only with backup
eligibility and trailing bytes only with extensions; and the signature
verifies over ``authenticator_data || SHA-256(client_data_json)``.
The counter is not checked.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from ._encoding import b64decode_strict, b64url, b64url_decode_strict
from .canonical import parse_canonical
from .errors import CustodyFormatError, CustodyKeyError, SignatureError
from .keys import check_public_key, key_id

KEY_TYPES = ("webauthn-es256", "webauthn-ed25519")
DEFAULT_ALLOWED_TYPES = ("APPROVAL", "RESUME", "STOP")

_UP, _UV, _BE, _BS, _AT, _ED = 0x01, 0x04, 0x08, 0x10, 0x40, 0x80


def _fail(reason: str, msg: str) -> SignatureError:
    return SignatureError(f"passkey signature: {msg}", reason)


def load_passkey_key(key_type: str, spki_b64: str) -> Any:
    """Reads an enrolled passkey's public key (standard base64 SPKI DER), re-encoded and compared byte for byte."""
    try:
        der = b64decode_strict(spki_b64)
    except ValueError as e:
        raise CustodyKeyError(f"passkey public_key: {e}") from None
    try:
        pub = serialization.load_der_public_key(der)
    except (ValueError, TypeError) as e:
        raise CustodyKeyError(f"passkey public_key is not SPKI DER: {e}") from None
    if key_type == "webauthn-es256":
        if not isinstance(pub, ec.EllipticCurvePublicKey) or not isinstance(pub.curve, ec.SECP256R1):
            raise CustodyKeyError("a webauthn-es256 key must be a P-256 SPKI")
    elif key_type == "webauthn-ed25519":
        if not isinstance(pub, Ed25519PublicKey):
            raise CustodyKeyError("a webauthn-ed25519 key must be an Ed25519 SPKI")
        check_public_key(pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
    else:
        raise CustodyKeyError(f"key_type {key_type!r} is not a passkey type ({', '.join(KEY_TYPES)})")
    if pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != der:
        raise CustodyKeyError("passkey public_key is not in its one DER encoding (named curve, uncompressed point)")
    return pub


def _pairs_no_dup(pairs: list[tuple[str, Any]]) -> dict:
    d: dict = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"duplicate key {k!r}")
        d[k] = v
    return d


def verify_passkey(p: Any, enrollment: Mapping[str, Any]) -> None:
    """Checks a parsed envelope's passkey signature against an enrollment; raises :class:`SignatureError`."""
    from .envelope import pae

    key_type = enrollment.get("key_type", "")
    try:
        pub = load_passkey_key(key_type, enrollment.get("public_key", ""))
    except CustodyKeyError as e:
        raise _fail("bad_key", str(e)) from None
    der = b64decode_strict(enrollment["public_key"])
    if key_id(der) != p.key_id:
        raise _fail("unknown_key", f"the envelope names key {p.key_id}, not {key_id(der)}")
    allowed = enrollment.get("allowed_types") or DEFAULT_ALLOWED_TYPES
    if p.kind not in allowed:
        raise _fail("type_not_allowed", f"this passkey may sign {', '.join(allowed)}, not {p.kind}")
    rp_id = enrollment.get("rp_id", "")
    origins = enrollment.get("origins") or []
    try:
        obj = parse_canonical(p.sig, "passkey signature")
    except CustodyFormatError as e:
        raise _fail("bad_signature", f"sig is not the canonical JSON of the three members: {e}") from None
    if not isinstance(obj, dict) or sorted(obj) != ["authenticator_data", "client_data_json", "signature"]:
        raise _fail("bad_signature", "sig must hold exactly authenticator_data, client_data_json and signature")
    parts: dict[str, bytes] = {}
    for k in ("authenticator_data", "client_data_json", "signature"):
        v = obj[k]
        try:
            parts[k] = b64url_decode_strict(v) if isinstance(v, str) else b""
        except ValueError as e:
            raise _fail("bad_signature", f"{k}: {e}") from None
        if not isinstance(v, str):
            raise _fail("bad_signature", f"{k} is not a string")
    ad, cdj, sig = parts["authenticator_data"], parts["client_data_json"], parts["signature"]
    try:
        cd = json.loads(cdj.decode("utf-8"), object_pairs_hook=_pairs_no_dup)
    except (UnicodeDecodeError, ValueError) as e:
        raise _fail("bad_signature", f"client_data_json is not UTF-8 JSON without duplicate keys: {e}") from None
    if not isinstance(cd, dict):
        raise _fail("bad_signature", "client_data_json is not a JSON object")
    if cd.get("type") != "webauthn.get":
        raise _fail("bad_signature", f"client data type {cd.get('type')!r} is not webauthn.get")
    want = b64url(hashlib.sha256(pae(p.payload_type, p.payload)).digest())
    if cd.get("challenge") != want:
        raise _fail("bad_signature", "the challenge is not SHA-256 of this envelope's PAE")
    origin = cd.get("origin")
    if not isinstance(origin, str) or origin not in origins:
        raise _fail("bad_signature", f"origin {origin!r} is not one of the enrolled origins")
    if "crossOrigin" in cd and cd["crossOrigin"] is not False:
        raise _fail("bad_signature", "crossOrigin is not false")
    if "topOrigin" in cd:
        raise _fail("bad_signature", "client data has a topOrigin")
    if len(ad) < 37:
        raise _fail("bad_signature", f"authenticator data is {len(ad)} bytes, fewer than 37")
    if ad[:32] != hashlib.sha256(rp_id.encode()).digest():
        raise _fail("bad_signature", f"authenticator data is not for rp_id {rp_id!r}")
    flags = ad[32]
    if not flags & _UP:
        raise _fail("bad_signature", "user presence is not set")
    if not flags & _UV:
        raise _fail("bad_signature", "user verification is not set")
    if flags & _AT:
        raise _fail("bad_signature", "the attested-credential-data flag is set")
    if flags & _BS and not flags & _BE:
        raise _fail("bad_signature", "backup state is set without backup eligibility")
    if len(ad) > 37 and not flags & _ED:
        raise _fail("bad_signature", "authenticator data has trailing bytes without the extension-data flag")
    signed = ad + hashlib.sha256(cdj).digest()
    if isinstance(pub, ec.EllipticCurvePublicKey):
        try:
            r, s = decode_dss_signature(sig)
        except ValueError:
            raise _fail("bad_signature", "the ES256 signature is not ASN.1 DER") from None
        if encode_dss_signature(r, s) != sig:
            raise _fail("bad_signature", "the ES256 signature is not strict DER")
        try:
            pub.verify(sig, signed, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise _fail("bad_signature", "the ES256 signature does not verify") from None
    else:
        if len(sig) != 64:
            raise _fail("bad_signature", "an Ed25519 passkey signature is 64 bytes")
        try:
            pub.verify(sig, signed)
        except InvalidSignature:
            raise _fail("bad_signature", "the Ed25519 signature does not verify") from None
