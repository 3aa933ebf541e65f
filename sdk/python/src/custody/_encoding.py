"""Strict encodings: base64 and hex as custody writes them."""

from __future__ import annotations

import base64
import binascii
import re

_B64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?\Z")
_B64URL = re.compile(r"^[A-Za-z0-9_-]*\Z")
_HEX64 = re.compile(r"^[0-9a-f]{64}\Z")


def b64decode_strict(s: str) -> bytes:
    """Standard base64 with padding and nothing else; no stray bits in the last character."""
    if not isinstance(s, str) or not _B64.match(s):
        raise ValueError("invalid standard base64")
    b = base64.b64decode(s)
    if base64.b64encode(b).decode("ascii") != s:
        raise ValueError("non-canonical base64 (stray padding bits)")
    return b


def b64url_decode_strict(s: str) -> bytes:
    """Unpadded base64url (RFC 4648 §5) and nothing else; no stray bits."""
    if not isinstance(s, str) or not _B64URL.match(s) or len(s) % 4 == 1:
        raise ValueError("invalid unpadded base64url")
    try:
        b = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"invalid unpadded base64url: {e}") from None
    if b64url(b) != s:
        raise ValueError("non-canonical base64url (stray bits)")
    return b


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode("ascii").rstrip("=")


def is_lower_hex64(s: object) -> bool:
    return isinstance(s, str) and _HEX64.match(s) is not None
