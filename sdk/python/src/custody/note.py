"""C2SP signed notes and tlog-checkpoints as custody writes them (DESIGN §5),
and the checkpoint key set of a log that rotated its checkpoint key
(one verifier key a line; a retired key followed by ``max_size=N [root=R]``,
vouching alone only for the head it was retired at).

A note verifies when at least one signature by a key of the set verifies
and no signature claiming to be by a key of the set fails; signatures by
other keys (witness cosignatures) are ignored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from ._encoding import b64decode_strict
from .keys import verify_signature

MAX_KEY_SET_KEYS = 16


@dataclass(frozen=True)
class VerifierKey:
    """A signed-note verifier key ``<name>+<hash>+<base64(0x01 || key)>``."""

    text: str
    name: str
    hash: int
    public_key: bytes
    max_size: Optional[int] = None
    root: Optional[bytes] = field(default=None)


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes


def _valid_name(name: str) -> bool:
    return name != "" and not re.search(r"\s", name) and "+" not in name


def _key_hash(name: str, pub: bytes) -> int:
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n\x01" + pub).digest()[:4], "big")


def parse_verifier_key(text: str) -> VerifierKey:
    """Reads an Ed25519 signed-note verifier key and checks its key hash (raises ValueError)."""
    parts = text.split("+", 2)
    if len(parts) != 3:
        raise ValueError(f"{text!r} is not <name>+<hash>+<key>")
    name, hh, b = parts
    if not _valid_name(name):
        raise ValueError(f"{text!r}: invalid key name")
    if not re.fullmatch(r"[0-9a-f]{8}", hh):
        raise ValueError(f"{text!r}: the key hash is not 8 hex digits")
    try:
        raw = b64decode_strict(b)
    except ValueError:
        raise ValueError(f"{text!r}: the key is not standard base64") from None
    if len(raw) != 33 or raw[0] != 1:
        raise ValueError(f"{text!r} is not an Ed25519 verifier key")
    pub = raw[1:]
    h = int(hh, 16)
    if _key_hash(name, pub) != h:
        raise ValueError(f"{text!r}: the key hash does not match the key")
    return VerifierKey(text, name, h, pub)


def verifier_key_of(name: str, public_key: bytes) -> str:
    """The verifier key of an Ed25519 public key under a name."""
    enc = base64.b64encode(b"\x01" + public_key).decode()
    return f"{name}+{_key_hash(name, public_key):08x}+{enc}"


class KeySet:
    """The set of checkpoint keys trusted for one log."""

    def __init__(self, origin: str, keys: list[VerifierKey]) -> None:
        self.origin = origin
        self.keys = tuple(keys)

    @classmethod
    def parse(cls, text: str) -> "KeySet":
        """One verifier key, or a key set one key a line (``#`` comments and blank lines ignored)."""
        keys: list[VerifierKey] = []
        origin = ""
        for i, raw in enumerate(text.split("\n")):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            f = line.split()
            if len(f) > 3:
                raise ValueError(f"checkpoint key set, line {i + 1}: want a verifier key and at most max_size=N root=R")
            k = parse_verifier_key(f[0])
            max_size = None
            root = None
            if len(f) >= 2:
                m = re.fullmatch(r"max_size=(0|[1-9][0-9]*)", f[1])
                if not m or int(m.group(1)) > (1 << 53) - 1:
                    raise ValueError(f"checkpoint key set, line {i + 1}: {f[1]!r} is not max_size=<decimal tree size>")
                max_size = int(m.group(1))
            if len(f) == 3:
                try:
                    root = b64decode_strict(f[2][5:]) if f[2].startswith("root=") else b""
                except ValueError:
                    root = b""
                if len(root) != 32:
                    raise ValueError(f"checkpoint key set, line {i + 1}: {f[2]!r} is not root=<base64 SHA-256 root hash>")
            k = VerifierKey(k.text, k.name, k.hash, k.public_key, max_size, root)
            if not origin:
                origin = k.name
            elif k.name != origin:
                raise ValueError(f"checkpoint key set, line {i + 1}: key {k.text} is for log {k.name!r}, the set's first key for {origin!r}")
            if any(o.public_key == k.public_key for o in keys):
                raise ValueError(f"checkpoint key set, line {i + 1}: key {k.text} is listed twice")
            if len(keys) == MAX_KEY_SET_KEYS:
                raise ValueError(f"checkpoint key set holds more than {MAX_KEY_SET_KEYS} keys")
            keys.append(k)
        if not keys:
            raise ValueError("no checkpoint verifier key given")
        return cls(origin, keys)

    def current(self) -> list[str]:
        return [k.text for k in self.keys if k.max_size is None]

    def has(self, public_key: bytes) -> bool:
        return any(k.public_key == public_key for k in self.keys)

    def contains(self, vkey: str) -> bool:
        return any(k.text == vkey for k in self.keys)

    def __str__(self) -> str:
        if len(self.keys) == 1 and self.keys[0].max_size is None:
            return self.keys[0].text
        out = []
        for k in self.keys:
            line = k.text
            if k.max_size is not None:
                line += f" max_size={k.max_size}"
            if k.root:
                line += f" root={base64.b64encode(k.root).decode()}"
            out.append(line + "\n")
        return "".join(out)

    def open_checkpoint(self, note: Union[str, bytes]) -> Checkpoint:
        """Verifies a signed checkpoint of this log and returns its content (raises ValueError)."""
        text, sigs = open_note(note, self)
        lines = text.split("\n")
        if len(lines) != 4 or lines[3] != "":
            raise ValueError(f"checkpoint body is not three lines: {text!r}")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        if origin != self.origin:
            raise ValueError(f"checkpoint origin {origin!r}, want {self.origin!r}")
        if not re.fullmatch(r"0|[1-9][0-9]*", size_text) or int(size_text) > (1 << 63) - 1:
            raise ValueError(f"checkpoint size {size_text!r} is not a canonical decimal")
        try:
            root = b64decode_strict(root_text)
        except ValueError:
            raise ValueError(f"checkpoint root {root_text!r} is not canonical base64") from None
        if len(root) != 32:
            raise ValueError(f"checkpoint root is {len(root)} bytes, want 32")
        size = int(size_text)
        retired = []
        for k in sigs:
            if k.max_size is None:
                return Checkpoint(origin, size, root)
            if k.root and size == k.max_size and root == k.root:
                return Checkpoint(origin, size, root)
            retired.append(f"{k.name}+{k.hash:08x} (retired at size {k.max_size})")
        raise ValueError(f"a checkpoint of size {size} is signed only by {', '.join(retired)}, which vouches only for the head it was retired at")


_CTRL = re.compile(r"[\x00-\x09\x0b-\x1f]")


def open_note(note: Union[str, bytes], keys: KeySet) -> tuple[str, list[VerifierKey]]:
    """Checks a signed note against a key set; returns its text and the keys whose signatures verified."""
    if isinstance(note, (bytes, bytearray)):
        try:
            msg = bytes(note).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("malformed note: not UTF-8") from None
    else:
        msg = note
        try:
            msg.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("malformed note: invalid UTF-8") from None
    if _CTRL.search(msg):
        raise ValueError("malformed note: control characters")
    split = msg.rfind("\n\n")
    if split < 0:
        raise ValueError("malformed note: no signature block")
    text = msg[: split + 1]
    block = msg[split + 2 :]
    if not block or not block.endswith("\n"):
        raise ValueError("malformed note: the signature block does not end in a newline")
    tb = text.encode("utf-8")
    verified: list[VerifierKey] = []
    seen: set[tuple[str, int]] = set()
    n = 0
    for line in block[:-1].split("\n"):
        if not line.startswith("\u2014 "):
            raise ValueError("malformed note: a signature line does not start with an em dash")
        line = line[2:]
        name, _, sb = line.partition(" ")
        sig = b""
        if sb and re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", sb):
            try:
                sig = base64.b64decode(sb)
            except (binascii.Error, ValueError):
                sig = b""
        if not _valid_name(name) or len(sig) < 5:
            raise ValueError("malformed note: bad signature line")
        n += 1
        if n > 100:
            raise ValueError("malformed note: more than 100 signatures")
        h = int.from_bytes(sig[:4], "big")
        k = next((x for x in keys.keys if x.name == name and x.hash == h), None)
        if k is None or (name, h) in seen:
            continue
        seen.add((name, h))
        if not verify_signature(k.public_key, tb, sig[4:]):
            raise ValueError(f"invalid signature by {name}+{h:08x}")
        verified.append(k)
    if not verified:
        raise ValueError("the note is not signed by " + " or ".join("+".join(k.text.split("+")[:2]) for k in keys.keys))
    return text, verified
