"""RFC 6962 / RFC 9162 Merkle trees as custody's log uses them (DESIGN §5)."""

from __future__ import annotations

import hashlib
from typing import Sequence


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 || leaf)."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _index(n: object, what: str) -> int:
    if type(n) is not int or n < 0:
        raise ValueError(f"{what} {n!r} is not a tree index")
    return n


def root_from_inclusion(index: int, size: int, leaf_hash_: bytes, proof: Sequence[bytes]) -> bytes:
    """The root an inclusion proof leads to; raises if its length does not fit the index and size."""
    fn = _index(index, "index")
    sn = _index(size, "size") - 1
    if fn > sn:
        raise ValueError(f"index {index} is beyond the tree of size {size}")
    r = leaf_hash_
    for p in proof:
        if len(p) != 32:
            raise ValueError("a proof hash is not 32 bytes")
        if sn == 0:
            raise ValueError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("the inclusion proof is too short")
    return r


def verify_inclusion(index: int, size: int, leaf_hash_: bytes, proof: Sequence[bytes], root: bytes) -> None:
    """Raises ValueError unless proof shows leaf_hash_ at index in the tree of size with root."""
    if root_from_inclusion(index, size, leaf_hash_, proof) != root:
        raise ValueError(f"the inclusion proof of leaf {index} in the tree of size {size} leads to another root")


def verify_consistency(size1: int, size2: int, proof: Sequence[bytes], root1: bytes, root2: bytes) -> None:
    """Raises ValueError unless proof shows the tree of size1 (root1) is a prefix of the tree of size2 (root2)."""
    s1, s2 = _index(size1, "size"), _index(size2, "size")
    if s2 < s1:
        raise ValueError(f"size {s2} is smaller than size {s1}: a log never shrinks")
    if s1 == s2:
        if proof:
            raise ValueError("a consistency proof between equal sizes must be empty")
        if root1 != root2:
            raise ValueError(f"two different roots for the tree of size {s1}")
        return
    if s1 == 0:
        if proof:
            raise ValueError("a consistency proof from the empty tree must be empty")
        return
    if not proof:
        raise ValueError("empty consistency proof")
    for p in proof:
        if len(p) != 32:
            raise ValueError("a proof hash is not 32 bytes")
    path = list(proof)
    if s1 & (s1 - 1) == 0:
        path = [root1] + path
    fn, sn = s1 - 1, s2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ValueError("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ValueError("the consistency proof is too short")
    if fr != root1:
        raise ValueError(f"the consistency proof does not lead to the root of size {s1}")
    if sr != root2:
        raise ValueError(f"the consistency proof does not lead to the root of size {s2}")
