"""The same adversarial JSON fed to Go (canon, through tests/canonhelper),
TypeScript (the SDK's parseCanonical) and Python: identical bytes or
identical refusals, input by input.

Go is the reference. Strict readings (bytes that must be canonical) must
agree in all three; the relaxed reading (canonicalise any spelling) is
compared between Go and Python, since the TypeScript SDK reads relaxed JSON
with JSON.parse, which keeps the last of duplicate keys by design.
TS_KNOWN lists cases where TypeScript's answer may differ from Go's (Go
is right): for them the TypeScript answer must be Go's or the one recorded
there, nothing else. It is empty: the leading byte order mark and nesting
deeper than Go's 32 levels, which TypeScript once accepted, it now refuses
as Go does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import custody
from conftest import require

REPO = Path(__file__).resolve().parents[3]

BOM = b"\xef\xbb\xbf"


def _nest(n: int, inner: bytes = b"1") -> bytes:
    return b"[" * n + inner + b"]" * n


def _nest_obj(n: int) -> bytes:
    return b'{"a":' * n + b"1" + b"}" * n


CASES: dict[str, bytes] = {
    "plain object": b'{"a":1,"b":"x"}',
    "leading BOM": BOM + b'{"a":1}',
    "BOM inside a string": b'{"a":"\xef\xbb\xbf"}',
    "BOM after whitespace": b" " + BOM + b'{"a":1}',
    "trailing whitespace": b'{"a":1} ',
    "leading whitespace": b' {"a":1}',
    "nesting 32 arrays": _nest(32),
    "nesting 33 arrays": _nest(33),
    "nesting 1000 arrays": _nest(1000),
    "nesting 100000 arrays": _nest(100000),
    "nesting 32 objects": _nest_obj(32),
    "nesting 33 objects": _nest_obj(33),
    "lone high surrogate escape": b'{"a":"\\ud800"}',
    "lone low surrogate escape": b'{"a":"\\udc00"}',
    "high surrogate then letter": b'{"a":"\\ud800x"}',
    "reversed surrogate pair": b'{"a":"\\udc00\\ud800"}',
    "surrogate pair escaped": b'{"a":"\\ud83d\\ude00"}',
    "surrogate pair literal": '{"a":"\U0001f600"}'.encode(),
    "raw encoded surrogate": b'{"a":"\xed\xa0\x80"}',
    "lone surrogate in a key": b'{"\\ud800":1}',
    "max safe integer": b'{"a":9007199254740991}',
    "min safe integer": b'{"a":-9007199254740991}',
    "two to the 53": b'{"a":9007199254740992}',
    "minus two to the 53": b'{"a":-9007199254740992}',
    "huge integer": b'{"a":123456789012345678901234567890}',
    "1e400": b'{"a":1e400}',
    "negative zero": b'{"a":-0}',
    "negative zero fraction": b'{"a":-0.0}',
    "zero": b'{"a":0}',
    "leading zero": b'{"a":01}',
    "fraction": b'{"a":1.5}',
    "whole fraction": b'{"a":1.0}',
    "exponent": b'{"a":1e3}',
    "minus alone": b'{"a":-}',
    "NaN": b'{"a":NaN}',
    "Infinity": b'{"a":Infinity}',
    "null": b'{"a":null}',
    "empty array": b'{"a":[]}',
    "empty object": b'{"a":{}}',
    "top-level empty object": b"{}",
    "duplicate keys": b'{"a":1,"a":1}',
    "duplicate keys differing": b'{"a":1,"a":2}',
    "duplicate key via escape": b'{"a":1,"\\u0061":2}',
    "duplicate keys nested": b'{"x":{"a":1,"a":2}}',
    "unsorted keys": b'{"b":1,"a":2}',
    "keys in UTF-16 order": '{"\U0001f600":1,"\ufb01":2}'.encode(),
    "keys in code point order": '{"\ufb01":2,"\U0001f600":1}'.encode(),
    "escaped solidus": b'{"a":"\\/"}',
    "needless escape": b'{"a":"\\u0041"}',
    "uppercase hex escape": b'{"a":"\\u001F"}',
    "lowercase control escape": b'{"a":"\\u001f"}',
    "short escapes": b'{"a":"\\b\\f\\n\\r\\t"}',
    "long form of a short escape": b'{"a":"\\u000a"}',
    "raw control character": b'{"a":"\x01"}',
    "DEL literal": b'{"a":"\x7f"}',
    "DEL escaped": b'{"a":"\\u007f"}',
    "non-ASCII literal": '{"a":"é"}'.encode(),
    "non-ASCII escaped": b'{"a":"\\u00e9"}',
    "invalid UTF-8": b'{"a":"\xff"}',
    "overlong UTF-8": b'{"a":"\xc0\xaf"}',
    "truncated UTF-8": b'{"a":"\xe2\x82"}',
    "U+FFFE": '{"a":"\ufffe"}'.encode(),
    "top-level string": b'"x"',
    "top-level integer": b"7",
    "top-level true": b"true",
    "top-level array": b"[1,2]",
    "trailing comma": b'{"a":1,}',
    "trailing data": b'{"a":1}{"b":2}',
    "unterminated": b'{"a":1',
    "empty input": b"",
    "single quote": b"{'a':1}",
    "invalid escape": b'{"a":"\\x41"}',
    "truncated unicode escape": b'{"a":"\\u00"}',
    "NUL escaped": b'{"a":"\\u0000"}',
    "UTF-16 input": '{"a":1}'.encode("utf-16"),
    "true prefix": b'{"a":truex}',
}

# Where the TypeScript SDK's strict reading disagreed with Go's (Go is right): the TypeScript answer then.
TS_KNOWN: dict[str, str] = {}


def python_answers(data: bytes) -> tuple[str, str]:
    try:
        custody.parse_canonical(data)
        strict = "ok " + data.hex()
    except custody.CustodyFormatError as e:
        strict = "err " + e.code
    try:
        relaxed = "ok " + custody.canonicalize_json(data).hex()
    except custody.CustodyFormatError as e:
        relaxed = "err " + e.code
    return strict, relaxed


def _run(cmd: list[str], inputs: list[bytes]) -> list[tuple[str, str]]:
    r = subprocess.run(cmd, input="".join(x.hex() + "\n" for x in inputs), capture_output=True, text=True, timeout=300, check=True)
    lines = r.stdout.split("\n")[: len(inputs)]
    assert len(lines) == len(inputs), r.stderr
    return [tuple(line.split("\t")) for line in lines]  # type: ignore[misc]


def go_helper() -> str:
    env = os.environ.get("CUSTODY_CANONHELPER")
    if env:
        return env
    require("a Go toolchain", shutil.which("go") is not None)
    out = REPO / ".cache/python/canonhelper"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out), "./sdk/python/tests/canonhelper"], cwd=REPO, check=True)
    return str(out)


NAMES = list(CASES)


@pytest.fixture(scope="module")
def go_answers() -> dict[str, tuple[str, str]]:
    return dict(zip(NAMES, _run([go_helper()], [CASES[n] for n in NAMES])))


@pytest.fixture(scope="module")
def ts_answers() -> dict[str, tuple[str, str]]:
    dist = REPO / "sdk/typescript/dist/index.js"
    require("node", shutil.which("node") is not None)
    require("the TypeScript SDK built (sdk/typescript: npm ci && npm run build)", dist.exists())
    return dict(zip(NAMES, _run(["node", str(Path(__file__).parent / "ts_canon.mjs"), str(dist)], [CASES[n] for n in NAMES])))


@pytest.mark.parametrize("name", NAMES)
def test_python_agrees_with_go(name: str, go_answers: dict) -> None:
    assert python_answers(CASES[name]) == go_answers[name]


@pytest.mark.parametrize("name", NAMES)
def test_typescript_strict_agrees_with_go(name: str, go_answers: dict, ts_answers: dict) -> None:
    if name in TS_KNOWN and ts_answers[name][0] == TS_KNOWN[name]:
        return  # the recorded disagreement (Go is right); see the module docstring
    assert ts_answers[name][0] == go_answers[name][0]


def test_the_cases_cover_both_verdicts(go_answers: dict) -> None:
    strict = [a[0] for a in go_answers.values()]
    assert sum(a.startswith("ok") for a in strict) >= 10
    assert sum(a.startswith("err") for a in strict) >= 40
