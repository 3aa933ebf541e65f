"""A passkey principal end to end: the admin enrolls a WebAuthn (ES256) credential,
a software authenticator signs a STOP as that passkey, the Go ledger accepts
it, and the Python SDK verifies the answer and the STOP's bundle; a tampered
assertion is refused by both."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

import custody
from harness import Ledger

RP = "custody.example.com"
ORIGIN = "https://custody.example.com"


def b64u(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class SoftPasskey:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.spki = self.key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.key_id = hashlib.sha256(self.spki).hexdigest()

    def enrollment(self, name: str) -> dict:
        return {"key_type": "webauthn-es256", "public_key": base64.b64encode(self.spki).decode(), "credential_id": base64.b64encode(b"cred-1").decode(),
                "rp_id": RP, "origins": [ORIGIN], "name": name}

    def sign(self, st: dict, origin: str = ORIGIN, flags: int = 0x05) -> dict:
        payload = custody.canonicalize(st)
        pt = custody.payload_type(st["type"])
        challenge = b64u(hashlib.sha256(custody.pae(pt, payload)).digest())
        cdj = json.dumps({"type": "webauthn.get", "challenge": challenge, "origin": origin, "crossOrigin": False}).encode()
        ad = hashlib.sha256(RP.encode()).digest() + bytes([flags]) + b"\x00\x00\x00\x00"
        sig = self.key.sign(ad + hashlib.sha256(cdj).digest(), ec.ECDSA(hashes.SHA256()))
        obj = {"authenticator_data": b64u(ad), "client_data_json": b64u(cdj), "signature": b64u(sig)}
        return {"payload": base64.b64encode(payload).decode(), "payloadType": pt,
                "signatures": [{"keyid": self.key_id, "sig": base64.b64encode(custody.canonicalize(obj)).decode()}]}


def test_passkey_stop_accepted_and_verified(ledger: Ledger) -> None:
    c = ledger.client()
    pk = SoftPasskey()
    enroll = dict(pk.enrollment("user:pat"), allowed_types=["CONFIRM", "STOP"])
    seq = c.key_seq(ledger.admin_key.key_id)["next_seq"]
    st = {"type": "PRINCIPAL", "principal_id": "p_pat", "op": "enroll", **{k: v for k, v in enroll.items()},
          "timestamp": custody.format_time(), "log": ledger.origin, "actor": ledger.info["admin_name"], "seq": seq}
    a = c.append(custody.sign_statement(st, ledger.admin_key))
    assert a.accepted, a.reason
    # The passkey confirms a workflow (the admin allowed CONFIRM), then stops it.
    grantee = custody.generate_key()
    confirm = custody.seal({"type": "CONFIRM", "confirm_id": "confirm_pk", "grantee": {"name": "agent:pk", "public_key": grantee.public_key_base64},
                            "scope": {"workflow_id": "wf_pk", "capabilities": ["act"], "targets": ["t/*"]}, "ttl_seconds": 600,
                            "revocable": True, "scope_hash": "", "timestamp": custody.format_time(), "log": ledger.origin,
                            "actor": "user:pat", "seq": c.key_seq(pk.key_id)["next_seq"]})
    custody.validate_statement(confirm)
    assert c.append(pk.sign(confirm)).accepted
    stop = {"type": "STOP", "request_id": "stop_pk", "workflow_id": "wf_pk", "stop_scope": "chain", "takeover_mode": "human",
            "reason": "from my phone", "timestamp": custody.format_time(), "log": ledger.origin, "actor": "user:pat",
            "seq": c.key_seq(pk.key_id)["next_seq"]}
    # A wrong origin: the ledger refuses it (nothing logged) and so does the SDK.
    bad = pk.sign(stop, origin="https://evil.example")
    with pytest.raises(custody.SignatureError):
        custody.verify_envelope(bad, enroll)
    with pytest.raises(custody.RefusedError):
        c.append(bad)
    env = pk.sign(stop)
    custody.verify_envelope(env, enroll)
    a = c.append(env)
    assert a.accepted and a.statement["request_id"] == "stop_pk"
    # A second assertion over the same payload is the same submission: the first decision, verified.
    again = c.append(pk.sign(stop))
    assert again.index == a.index and again.duplicate
    v = c.verify_bundle("stop_pk")
    assert v.valid and v.principals[pk.key_id] == "user:pat"
    c.close()
