"""Ed25519 keys (DESIGN §1).

PKCS#8 PEM private keys (as ``custody key`` and ``openssl genpkey -algorithm
ed25519`` write them), optionally passphrase-encrypted; public keys as the
standard base64 of their raw 32 bytes inside statements; a key id is the
lowercase hex SHA-256 of the raw public key. Wherever a key is bound the
ledger refuses small-order and non-canonical public keys:
:func:`check_public_key` applies the same test before a runtime signs.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional, Union

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._encoding import b64, b64decode_strict
from .errors import CustodyKeyError


def key_id(public_key: bytes) -> str:
    """The lowercase hex SHA-256 of a raw 32-byte public key (or of a passkey's SPKI DER)."""
    return hashlib.sha256(public_key).hexdigest()


class PrivateKey:
    """An Ed25519 private key with its public half."""

    __slots__ = ("_key", "public_key", "key_id")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        if not isinstance(key, Ed25519PrivateKey):
            raise CustodyKeyError(f"want an Ed25519 private key, got {type(key).__name__}")
        self._key = key
        self.public_key: bytes = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id: str = key_id(self.public_key)

    @property
    def public_key_base64(self) -> str:
        """The public key as statements carry it: standard base64 of the raw 32 bytes."""
        return b64(self.public_key)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of message."""
        return self._key.sign(message)

    def to_pem(self, passphrase: Optional[Union[str, bytes]] = None) -> bytes:
        """PKCS#8 PEM; with a passphrase, an encrypted PKCS#8 block that ``custody`` and ``openssl pkcs8`` read."""
        enc: serialization.KeySerializationEncryption = serialization.NoEncryption()
        if passphrase is not None:
            enc = serialization.BestAvailableEncryption(passphrase.encode() if isinstance(passphrase, str) else passphrase)
        return self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)

    def public_key_pem(self) -> bytes:
        """The public key as PKIX (SubjectPublicKeyInfo) PEM, as ``custody key`` writes public key files."""
        return self._key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def __repr__(self) -> str:
        return f"PrivateKey(key_id={self.key_id[:16]}…)"


_BLOCK = re.compile(r"-----BEGIN [A-Z ]+-----")


def load_private_key(pem: Union[str, bytes], passphrase: Optional[Union[str, bytes]] = None) -> PrivateKey:
    """Reads a PKCS#8 PEM Ed25519 private key; an encrypted one needs its passphrase."""
    text = pem.decode("utf-8", "replace") if isinstance(pem, (bytes, bytearray)) else pem
    blocks = _BLOCK.findall(text)
    if len(blocks) != 1:
        raise CustodyKeyError(f"want exactly one PEM block, found {len(blocks)}")
    if blocks[0] not in ("-----BEGIN PRIVATE KEY-----", "-----BEGIN ENCRYPTED PRIVATE KEY-----"):
        raise CustodyKeyError(f'want a PKCS#8 "PRIVATE KEY" or "ENCRYPTED PRIVATE KEY" PEM block, got {blocks[0]}')
    encrypted = "ENCRYPTED" in blocks[0]
    if encrypted and passphrase is None:
        raise CustodyKeyError("the private key is passphrase-encrypted: give its passphrase")
    pw = passphrase.encode() if isinstance(passphrase, str) else passphrase
    try:
        key = serialization.load_pem_private_key(text.encode(), password=pw if encrypted else None)
    except (ValueError, TypeError) as e:
        raise CustodyKeyError(f"not a usable PKCS#8 private key{' (or a wrong passphrase)' if encrypted else ''}: {e}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CustodyKeyError(f"want an Ed25519 private key, got {type(key).__name__}")
    return PrivateKey(key)


def private_key_from_seed(seed32: bytes) -> PrivateKey:
    """The Ed25519 key of a 32-byte seed (RFC 8032), as in the known-answer vectors."""
    if len(seed32) != 32:
        raise CustodyKeyError(f"an Ed25519 seed is 32 bytes, got {len(seed32)}")
    return PrivateKey(Ed25519PrivateKey.from_private_bytes(bytes(seed32)))


def generate_key() -> PrivateKey:
    """A fresh Ed25519 key."""
    return PrivateKey(Ed25519PrivateKey.generate())


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether signature is a valid Ed25519 signature of message by the raw 32-byte public key."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
        return True
    except (InvalidSignature, ValueError):
        return False


def parse_public_key(text: str) -> bytes:
    """Reads a statement's public key (standard base64 of 32 raw bytes) and checks it."""
    try:
        raw = b64decode_strict(text)
    except ValueError as e:
        raise CustodyKeyError(f"public key {text!r}: {e}") from None
    check_public_key(raw)
    return raw


def encode_public_key(public_key: bytes) -> str:
    return b64(public_key)


# Edwards25519 arithmetic for check_public_key only (never for signing).
_P = (1 << 255) - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_L = (1 << 252) + 27742317777372353535851937790883648493


def _add(p: tuple[int, int, int, int], q: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    x1, y1, z1, t1 = p
    x2, y2, z2, t2 = q
    a = (y1 - x1) * (y2 - x2) % _P
    b = (y1 + x1) * (y2 + x2) % _P
    c = t1 * 2 * _D * t2 % _P
    d = z1 * 2 * z2 % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(p: tuple[int, int, int, int], n: int) -> tuple[int, int, int, int]:
    r = (0, 1, 1, 0)
    while n:
        if n & 1:
            r = _add(r, p)
        p = _add(p, p)
        n >>= 1
    return r


def _is_identity(p: tuple[int, int, int, int]) -> bool:
    return p[0] % _P == 0 and (p[1] - p[2]) % _P == 0


_checked: dict[bytes, str] = {}


def _check_point(pub: bytes) -> str:
    sign = pub[31] >> 7
    y = int.from_bytes(pub[:31] + bytes([pub[31] & 0x7F]), "little")
    if y >= _P:
        return "public key: non-canonical point encoding (y >= p)"
    y2 = y * y % _P
    u = (y2 - 1) % _P
    v = (_D * y2 + 1) % _P
    x = u * pow(v, 3, _P) * pow(u * pow(v, 7, _P), (_P - 5) // 8, _P) % _P
    vx2 = v * x * x % _P
    if vx2 != u:
        if vx2 == (-u) % _P:
            x = x * _SQRT_M1 % _P
        else:
            return "public key: not a point on the Ed25519 curve"
    if x == 0 and sign == 1:
        return "public key: non-canonical point encoding (x = 0 with the sign bit set)"
    if (x & 1) != sign:
        x = _P - x
    pt = (x, y, 1, x * y % _P)
    if _is_identity(_mul(pt, 8)):
        return "public key: small-order point (order divides 8)"
    if not _is_identity(_mul(pt, _L)):
        return "public key: point has a small-order component (not in the prime-order subgroup)"
    return ""


def check_public_key(public_key: bytes) -> None:
    """Raises :class:`CustodyKeyError` unless public_key is a canonical point of the prime-order subgroup."""
    if len(public_key) != 32:
        raise CustodyKeyError(f"an Ed25519 public key is 32 bytes, got {len(public_key)}")
    pub = bytes(public_key)
    verdict = _checked.get(pub)
    if verdict is None:
        verdict = _check_point(pub)
        if len(_checked) >= 1 << 16:
            _checked.clear()
        _checked[pub] = verdict
    if verdict:
        raise CustodyKeyError(verdict)
