"""Canonical JSON: RFC 8785 (JCS) under custody's strict profile (DESIGN §1).

The rules are the Go package canon's, checked so that what this SDK signs
is what the ledger accepts and what it refuses the ledger refuses:

- valid UTF-8 (no byte order mark, no lone surrogates), no duplicate keys;
- numbers are integers with ``|n| <= 2**53 - 1`` (no fraction, exponent or ``-0``);
- no ``null`` (``None``), no empty arrays or objects (omit the field);
- nesting at most 32 levels below the top;
- :func:`parse_canonical` also requires the bytes to equal the canonical
  form of what they parse to, byte for byte.

Python values map as ``dict`` (``str`` keys), ``list``/``tuple``, ``str``,
``bool`` and ``int``; a ``float`` is refused even when whole, so nothing is
serialised in a way the caller did not see.
"""

from __future__ import annotations

import json
from typing import Any, Union

from .errors import CustodyFormatError

MAX_SAFE_INTEGER = (1 << 53) - 1
MAX_DEPTH = 32

JSONValue = Union[str, int, bool, list, dict]

try:  # the C accelerator when present: the same output
    from json.encoder import c_encode_basestring as _enc_str  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _enc_str = None
if _enc_str is None:  # pragma: no cover
    from json.encoder import py_encode_basestring as _enc_str  # type: ignore[attr-defined,no-redef]


def _fail(path: str, msg: str) -> CustodyFormatError:
    return CustodyFormatError("non_canonical", path, msg)


def _key_order(k: str) -> bytes:
    # RFC 8785 §3.2.3: by UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    return k.encode("utf-16-be", "surrogatepass")


def _check_str(s: str, path: str) -> None:
    if s.isascii():
        return
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(path, "string holds a lone surrogate (not valid UTF-8)") from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _write(v: Any, path: str, depth: int, out: list[str]) -> None:
    if depth > MAX_DEPTH:
        raise _fail(path, f"nesting deeper than {MAX_DEPTH}")
    t = type(v)
    if t is str:
        _check_str(v, path)
        out.append(_enc_str(v))
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int:
        if v > MAX_SAFE_INTEGER or v < -MAX_SAFE_INTEGER:
            raise _fail(path, f"{v} is outside ±(2^53-1)")
        out.append(str(v))
    elif t is dict:
        if not v:
            raise _fail(path, "an empty object is not allowed (omit the field)")
        for k in v:
            if type(k) is not str:
                raise _fail(path, f"object key {k!r} is not a string")
        keys = sorted(v) if all(k.isascii() for k in v) else sorted(v, key=_key_order)
        out.append("{")
        first = True
        for k in keys:
            p = _join(path, k)
            _check_str(k, p)
            if not first:
                out.append(",")
            first = False
            out.append(_enc_str(k))
            out.append(":")
            _write(v[k], p, depth + 1, out)
        out.append("}")
    elif t is list or t is tuple:
        if not v:
            raise _fail(path, "an empty array is not allowed (omit the field)")
        out.append("[")
        for i, e in enumerate(v):
            if i:
                out.append(",")
            _write(e, f"{path}[{i}]", depth + 1, out)
        out.append("]")
    elif v is None:
        raise _fail(path, "null is not allowed (absent means absent: omit the field)")
    elif t is float:
        raise _fail(path, f"{v!r} is a float; only integers are allowed")
    elif isinstance(v, bool):
        out.append("true" if v else "false")
    elif isinstance(v, int):
        _write(int(v), path, depth, out)
    elif isinstance(v, str):
        _write(str(v), path, depth, out)
    elif isinstance(v, dict):
        _write(dict(v), path, depth, out)
    else:
        raise _fail(path, f"a {t.__name__} is not a JSON value")


def canonicalize_text(value: Any) -> str:
    """The canonical JSON text of value; raises :class:`CustodyFormatError` (``non_canonical``)."""
    out: list[str] = []
    _write(value, "", 0, out)
    return "".join(out)


def canonicalize(value: Any) -> bytes:
    """The canonical JSON bytes (UTF-8) of value under the strict profile."""
    return canonicalize_text(value).encode("utf-8")


def check_profile(value: Any) -> None:
    """Raises :class:`CustodyFormatError` naming the first place where value breaks the strict profile."""
    canonicalize_text(value)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise _fail(k, f"duplicate key {k!r}")
        d[k] = v
    return d


def _int(lit: str) -> int:
    neg = lit.startswith("-")
    digits = lit[1:] if neg else lit
    if neg and digits == "0":
        raise _fail("", "-0 is not allowed")
    if len(digits) > 16:
        raise _fail("", f"number {lit} is outside ±(2^53-1)")
    n = int(lit)
    if abs(n) > MAX_SAFE_INTEGER:
        raise _fail("", f"number {lit} is outside ±(2^53-1)")
    return n


def _float(lit: str) -> Any:
    raise _fail("", f"number {lit} is not an integer (no fractions or exponents)")


def _const(lit: str) -> Any:
    raise _fail("", f"{lit} is not JSON")


_decoder = json.JSONDecoder(object_pairs_hook=_pairs, parse_int=_int, parse_float=_float, parse_constant=_const, strict=True)


def _decode_text(data: Union[bytes, bytearray, memoryview, str], what: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise _fail("", f"{what} is not valid UTF-8") from None


def _parse(text: str, what: str) -> Any:
    if text.startswith("\ufeff"):
        raise _fail("", f"{what} starts with a byte order mark")
    try:
        v = _decoder.decode(text)
    except CustodyFormatError:
        raise
    except RecursionError:
        raise _fail("", f"{what}: nesting deeper than {MAX_DEPTH}") from None
    except ValueError as e:
        raise _fail("", f"{what} is not JSON: {e}") from None
    return v


def parse_relaxed(data: Union[bytes, str], what: str = "JSON") -> Any:
    """Reads JSON under the strict profile, allowing any whitespace, key order and escape spelling."""
    v = _parse(_decode_text(data, what), what)
    check_profile(v)
    return v


def canonicalize_json(data: Union[bytes, str], what: str = "JSON") -> bytes:
    """Parses JSON (relaxed) and returns its canonical bytes, as Go's canon.Canonicalize."""
    return canonicalize(parse_relaxed(data, what))


def parse_canonical(data: Union[bytes, str], what: str = "JSON") -> Any:
    """Reads bytes that must be canonical JSON under the strict profile.

    Valid UTF-8, and equal byte for byte to the canonical form of what they
    parse to: duplicate keys, numbers beyond 2**53-1, whitespace, a byte
    order mark and every other spelling of the same value are refused with
    a :class:`CustodyFormatError` (``non_canonical``).
    """
    text = _decode_text(data, what)
    v = _parse(text, what)
    if canonicalize_text(v) != text:
        raise _fail("", f"{what} is not in canonical form (RFC 8785 under the strict profile)")
    return v
