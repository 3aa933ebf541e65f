"""Client and AsyncClient: a verified connection to one custody log over HTTP.

Nothing the server says is trusted that can be checked: an append answer
is returned only once the checkpoint's signature (a C2SP signed note by the
log's key), the inclusion proof of the leaf and the leaf's content (the
exact envelope submitted, or a DENIAL of exactly it signed by the log's
DENIAL key) all verify. Each request is written once, sans-IO, as a
generator of requests; :class:`Client` runs it with ``httpx.Client`` and
:class:`AsyncClient` with ``httpx.AsyncClient``, so both verify the same way.

What a verified answer does not prove: that the server shows every client
the same tree (use :meth:`prove_consistency` between checkpoints you keep,
or witnesses), nor that the decision was right (``custody verify``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Generator, Iterator, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlsplit

import httpx

from ._encoding import b64, b64decode_strict
from .bundle import BundleVerdict, verify_bundle
from .canonical import canonicalize
from .envelope import ParsedEnvelope, envelope_bytes, envelope_verifies, parse_envelope, same_submission
from .errors import CustodyFormatError, HTTPError, NotWitnessedError, RefusedError, UnverifiedError
from .leaf import ReadLeaf, parse_leaf
from .merkle import leaf_hash, verify_consistency, verify_inclusion
from .note import Checkpoint, KeySet
from .witness import WitnessEvaluation, WitnessPolicy

MAX_ANSWER = 256 << 10
MAX_DOC = 256 << 20


@dataclass
class AppendResult:
    """The verified answer to an append."""

    #: "accepted", "denied" or "held" (DESIGN §7: logged, waiting for approval).
    verdict: str
    #: The index of the entry: the statement, or the DENIAL of it.
    index: int
    leaf: bytes
    entry: ReadLeaf
    checkpoint: Checkpoint
    checkpoint_text: str
    proof: list[bytes]
    duplicate: bool = False
    notes: list[str] = field(default_factory=list)
    reason_code: str = ""
    reason: str = ""
    #: Held only: the deadline (RFC 3339) and the matched rules, as the server reported them (advisory).
    expires_at: str = ""
    rules: list[dict] = field(default_factory=list)
    witnessed: Optional[WitnessEvaluation] = None

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    @property
    def held(self) -> bool:
        return self.verdict == "held"

    @property
    def statement(self) -> dict:
        return self.entry.statement


@dataclass
class Entry:
    """One leaf of the log as the read API serves it, read and checked from the leaf itself."""

    index: int
    kind: str
    logged_at: str
    leaf: bytes
    read: ReadLeaf
    raw: dict

    @property
    def statement(self) -> dict:
        return self.read.statement

    @property
    def workflow_id(self) -> str:
        return self.raw.get("workflow_id", "")


def check_entry(e: Any) -> Entry:
    """Checks an entry's leaf_hash against its leaf and reads the leaf; only the leaf is trusted."""
    if not isinstance(e, dict):
        raise UnverifiedError("an entry is not a JSON object")
    idx = e.get("index")
    try:
        leaf = b64decode_strict(e.get("leaf"))
    except (ValueError, TypeError):
        raise UnverifiedError(f"entry {idx}: the leaf is not base64") from None
    if b64(leaf_hash(leaf)) != e.get("leaf_hash"):
        raise UnverifiedError(f"entry {idx}: leaf_hash is not the hash of its leaf")
    try:
        read = parse_leaf(leaf)
    except ValueError as err:
        raise UnverifiedError(f"entry {idx}: {err}") from None
    if read.envelope.kind != e.get("kind"):
        raise UnverifiedError(f"entry {idx}: kind {e.get('kind')}, the leaf holds a {read.envelope.kind}")
    if type(idx) is not int or idx < 0:
        raise UnverifiedError(f"entry index {idx!r}")
    return Entry(idx, read.envelope.kind, read.leaf["logged_at"], leaf, read, e)


def _hashes(lst: Any, what: str) -> list[bytes]:
    if not isinstance(lst, list):
        raise UnverifiedError(f"{what}: not a list of hashes")
    out = []
    for h in lst:
        try:
            b = b64decode_strict(h)
        except (ValueError, TypeError):
            raise UnverifiedError(f"{what}: {h!r} is not base64") from None
        if len(b) != 32:
            raise UnverifiedError(f"{what}: a hash of {len(b)} bytes")
        out.append(b)
    return out


def parse_servers(url: Union[str, Sequence[str]]) -> list[str]:
    """Splits and checks a comma-separated list (or a list) of server URLs."""
    items = url.split(",") if isinstance(url, str) else list(url)
    out = []
    for raw in items:
        b = raw.strip()
        u = urlsplit(b)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"ledger URL {b!r}: want http://host:port or https://host (several: separated by commas)")
        out.append(b.rstrip("/"))
    if not out:
        raise ValueError("no ledger URL given")
    return out


class NoBatchError(HTTPError):
    """The server has no batch endpoint (an older one): append one at a time."""

    def __init__(self, message: str) -> None:
        super().__init__(404, "", message)


def _env_bytes(envelope: Union[str, bytes, Mapping[str, Any]]) -> bytes:
    if isinstance(envelope, Mapping):
        return envelope_bytes(envelope)
    if isinstance(envelope, str):
        return envelope.encode("utf-8")
    return bytes(envelope)


# The sans-IO protocol between a request flow and its driver.
@dataclass
class _Req:
    method: str
    server: int
    path: str
    body: Optional[bytes] = None
    limit: int = MAX_DOC
    timeout: Optional[float] = None
    #: With several servers, what the driver does every stall_wait without
    #: an answer (see _Core._stall_probes and _Core._stalled): "leader" (an
    #: append) asks the others who leads and gives up on this server
    #: (_MovedOn) once another does; "alive" (a read) asks this server's
    #: /readyz and gives up on it (_Frozen) when that has no answer either.
    #: "": not watched.
    watch: str = ""


@dataclass
class _MovedOn:
    """A stalled request was given up: another server of the list leads."""

    leader: str


class _Frozen(Exception):
    """A stalled read was given up: its server does not answer /readyz either (frozen or cut off)."""


@dataclass
class _Resp:
    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass
class _Sleep:
    seconds: float


Flow = Generator[Union[_Req, _Sleep], Any, Any]


def _http_error(r: _Resp) -> HTTPError:
    text = r.body.decode("utf-8", "replace")
    code, reason, leader = "", text.strip()[:1000], r.headers.get("custody-leader", "")
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            if isinstance(doc.get("reason_code"), str):
                code = doc["reason_code"]
            if isinstance(doc.get("reason"), str):
                reason = doc["reason"]
            if isinstance(doc.get("leader"), str) and doc["leader"]:
                leader = doc["leader"]
    except ValueError:
        pass
    ra = r.headers.get("retry-after", "")
    return HTTPError(r.status, code, reason, float(ra) if ra.isdigit() else 0.0, leader)


def _json(body: bytes, what: str) -> Any:
    try:
        return json.loads(body)
    except ValueError as e:
        raise UnverifiedError(f"{what}: not JSON: {e}") from None


class _Core:
    """What Client and AsyncClient share: the servers, the keys and every check."""

    def __init__(
        self,
        url: Union[str, Sequence[str]],
        log_key: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        max_retry_wait: float = 2.0,
        failover_wait: float = 15.0,
        stall_wait: float = 1.0,
        witness_policy: Union[str, WitnessPolicy, None] = None,
        witness_wait: float = 10.0,
    ) -> None:
        self.servers = parse_servers(url)
        if not isinstance(log_key, str):
            raise TypeError("Client needs log_key: the log's checkpoint verifier key")
        try:
            self.keys = KeySet.parse(log_key)
        except ValueError as e:
            raise ValueError(f"checkpoint verifier key: {e}") from None
        self.origin = self.keys.origin
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self.failover_wait = failover_wait
        self.stall_wait = stall_wait
        self.witness_wait = witness_wait
        self.witness_policy = WitnessPolicy.parse(witness_policy) if isinstance(witness_policy, str) else witness_policy
        self._cur = 0
        self._checkpoints: dict[str, Checkpoint] = {}
        self._denial_keys = {hashlib.sha256(k.public_key).hexdigest(): k.public_key for k in self.keys.keys}

    @property
    def url(self) -> str:
        """The server tried first."""
        return self.servers[self._cur % len(self.servers)]

    def _next(self, i: int) -> None:
        if self._cur == i:
            self._cur = (i + 1) % len(self.servers)

    def _follow(self, leader: str) -> bool:
        leader = leader.rstrip("/")
        if leader in self.servers:
            self._cur = self.servers.index(leader)
            return True
        return False

    def _readyz_leader(self, base: str, body: bytes) -> str:
        """The leader a server's /readyz names: itself (role leader), or the URL on its leader line."""
        leader = ""
        for line in body[:4096].decode("utf-8", "replace").split("\n"):
            if line == "role leader":
                leader = base
            elif line.startswith("leader ") and not leader and "://" in line:
                leader = line[len("leader "):].strip().rstrip("/")
        return leader

    def _pick_leader(self, i: int, found: Sequence[str]) -> str:
        """The first leader found that is a server of the list other than server i, or ""."""
        for leader in found:
            if leader and leader != self.servers[i] and leader in self.servers:
                return leader
        return ""

    def _stall_probes(self, req: _Req) -> list[int]:
        """The servers whose /readyz a stalled request asks: the others (an append), or its own (a read)."""
        if req.watch == "alive":
            return [req.server]
        return [j for j in range(len(self.servers)) if j != req.server]

    def _stalled(self, req: _Req, answers: Mapping[int, bytes]) -> Union[None, _MovedOn, _Frozen]:
        """What the /readyz answers that came within stall_wait (by server) mean for a stalled
        request: keep waiting (None), or give it up (_MovedOn: another server leads; _Frozen: a
        read's server answers nothing). A slow but live server is left alone."""
        if req.watch == "alive":
            if req.server in answers:
                return None
            return _Frozen(f"{self.servers[req.server]} gives no answer in {self.stall_wait} s, nor to /readyz (frozen or cut off)")
        leader = self._pick_leader(req.server, [self._readyz_leader(self.servers[j], b) for j, b in sorted(answers.items())])
        return _MovedOn(leader) if leader else None

    def open_checkpoint(self, text: str) -> Checkpoint:
        """Verifies a signed checkpoint by the log's keys and returns its content (raises UnverifiedError)."""
        hit = self._checkpoints.get(text)
        if hit is not None:
            return hit
        try:
            cp = self.keys.open_checkpoint(text)
        except (ValueError, TypeError) as e:
            raise UnverifiedError(f"checkpoint: {e}") from None
        if len(self._checkpoints) >= 64:
            self._checkpoints.clear()
        self._checkpoints[text] = cp
        return cp

    # --- flows -------------------------------------------------------------

    def _get(self, path: str, limit: int = MAX_DOC) -> Flow:
        """GETs path and returns the body of a 200 answer. With several servers, a transport
        failure or a 503 moves on to the next one, and so does a server that gives no answer in
        stall_wait and does not answer /readyz either (frozen or cut off); after each round of
        the list a pause (0.1 s doubling to 1 s) and another, until failover_wait has passed (a
        follower answers 503 while it takes over a dead leader's lease)."""
        start = time.monotonic()
        n = len(self.servers)
        attempt = 0
        pause = 0.1
        while True:
            i = self._cur % n
            round_end = (attempt + 1) % n == 0
            more = n > 1 and self.failover_wait > 0 and time.monotonic() - start < self.failover_wait
            last = round_end and not more
            r = yield _Req("GET", i, path, limit=limit, watch="alive" if not last and self.stall_wait > 0 else "")
            if isinstance(r, BaseException) or (r.status == 503 and not last):
                if last:
                    raise HTTPError(0, "", f"GET {path}: {r}") from r
                self._next(i)
                attempt += 1
                if round_end:
                    yield _Sleep(pause)
                    pause = min(2 * pause, 1.0)
                continue
            if r.status != 200:
                raise _http_error(r)
            return r.body

    def _get_json(self, path: str) -> Flow:
        body = yield from self._get(path)
        return _json(body, path)

    def _post(self, path: str, body: bytes) -> Flow:
        start = time.monotonic()
        n = len(self.servers)
        attempt = 0
        while True:
            i = self._cur % n
            more = attempt < self.retries or (n > 1 and self.failover_wait > 0 and time.monotonic() - start < self.failover_wait)
            r = yield _Req("POST", i, path, body, limit=MAX_ANSWER, watch="leader" if n > 1 and self.stall_wait > 0 else "")
            if isinstance(r, _MovedOn):
                # Server i gave no answer in stall_wait and another leads:
                # go there now (resending is safe: the ledger answers the
                # same bytes with their first decision).
                self._follow(r.leader)
                attempt += 1
                continue
            if isinstance(r, BaseException):
                if not more:
                    raise HTTPError(0, "", f"POST {path}: {r}") from r
                self._next(i)
                wait = min(0.05 * 2 ** min(attempt, 6), 0.5)
                if n > 1 and attempt % n != n - 1:
                    wait = 0.0
            else:
                if r.status != 503 or not more:
                    return r
                he = _http_error(r)
                wait = max(he.retry_after, 0.05 * 2 ** min(attempt, 6))
                if n > 1:
                    if he.reason_code == "not_leader" and he.leader and he.leader.rstrip("/") != self.servers[i] and self._follow(he.leader):
                        wait = 0.0
                    else:
                        self._next(i)
                        wait = min(wait, 0.2)
            attempt += 1
            if wait > 0:
                yield _Sleep(min(wait, self.max_retry_wait) * (0.75 + random.random() / 2))

    def _append(self, envelope: Union[str, bytes, Mapping[str, Any]]) -> Flow:
        body = _env_bytes(envelope)
        own: Optional[ParsedEnvelope] = None
        own_err: Optional[Exception] = None
        try:
            own = parse_envelope(body)
        except CustodyFormatError as e:
            own_err = e
        r = yield from self._post("/v1/entries", body)
        if r.status in (400, 413, 429):
            he = _http_error(r)
            raise RefusedError(he.status, he.reason_code, he.reason)
        if r.status not in (200, 202, 403):
            raise _http_error(r)
        doc = _json(r.body, "the append answer")
        if not isinstance(doc, dict):
            raise UnverifiedError("the answer is not an append response")
        if own is None:
            raise UnverifiedError(f"the server logged a decision for an envelope that does not parse ({own_err})")
        res = yield from self._verify_answer(doc, own, r.status)
        if res.accepted and self.witness_policy is not None and own.kind == "RECEIPT" and res.statement.get("result") == "pending":
            yield from self._require_witnessed(res)
        return res

    def _append_batch(self, envelopes: Sequence[bytes]) -> Flow:
        """Appends envelopes in one request (POST /v1/entries/batch); the ledger decides them in order.
        Returns, per envelope, its verified AppendResult or the error it got (RefusedError ``withdrawn``
        for a statement after one that was not accepted). Raises NoBatchError when the server has no
        batch endpoint."""
        owns: list[Optional[ParsedEnvelope]] = []
        for e in envelopes:
            try:
                owns.append(parse_envelope(e))
            except CustodyFormatError:
                owns.append(None)
        body = b'{"envelopes":[' + b",".join(envelopes) + b"]}"
        r = yield from self._post_limited("/v1/entries/batch", body, MAX_ANSWER * len(envelopes) + 4096)
        if r.status in (404, 405):
            raise NoBatchError("the server has no batch endpoint")
        if r.status != 200:
            raise _http_error(r)
        doc = _json(r.body, "the batch answer")
        answers = doc.get("answers") if isinstance(doc, dict) else None
        if not isinstance(answers, list) or len(answers) != len(envelopes):
            raise UnverifiedError(f"{len(answers) if isinstance(answers, list) else 'no'} answers to a batch of {len(envelopes)}")
        out: list[Any] = []
        for own, a in zip(owns, answers):
            status = a.get("status") if isinstance(a, dict) else None
            raw = json.dumps(a.get("body")).encode() if isinstance(a, dict) else b""
            if status in (200, 202, 403):
                if own is None:
                    out.append(UnverifiedError("the server decided an envelope that does not parse"))
                    continue
                try:
                    res = yield from self._verify_answer(a["body"] if isinstance(a.get("body"), dict) else {}, own, status)
                    if res.accepted and self.witness_policy is not None and own.kind == "RECEIPT" and res.statement.get("result") == "pending":
                        yield from self._require_witnessed(res)
                    out.append(res)
                except (UnverifiedError, NotWitnessedError) as e:
                    out.append(e)
            else:
                ra = str(a.get("retry_after", "")) if isinstance(a, dict) else ""
                he = _http_error(_Resp(int(status or 0), {"retry-after": ra}, raw))
                if he.status in (400, 409, 413, 429):
                    out.append(RefusedError(he.status, he.reason_code, he.reason))
                else:
                    out.append(he)
        return out

    def _post_limited(self, path: str, body: bytes, limit: int) -> Flow:
        gen = self._post(path, body)
        item = next(gen)
        try:
            while True:
                if isinstance(item, _Req):
                    item.limit = limit
                item = gen.send((yield item))
        except StopIteration as s:
            return s.value

    def _verify_answer(self, doc: dict, own: ParsedEnvelope, status: int) -> Flow:
        verdict = doc.get("verdict")
        if not ((verdict == "accepted" and status == 200) or (verdict == "denied" and status == 403) or (verdict == "held" and status == 202)):
            raise UnverifiedError(f"verdict {verdict!r} with HTTP {status}")
        if not isinstance(doc.get("checkpoint"), str):
            raise UnverifiedError("the answer has no checkpoint")
        cp = self.open_checkpoint(doc["checkpoint"])
        index = doc.get("index")
        if type(index) is not int or index < 0:
            raise UnverifiedError(f"index {index!r}")
        if index >= cp.size:
            raise UnverifiedError(f"index {index} is not under the checkpoint of size {cp.size}")
        proof = _hashes(doc.get("inclusion_proof") or [], "inclusion proof")
        try:
            leaf = b64decode_strict(doc.get("leaf"))
        except (ValueError, TypeError):
            raise UnverifiedError("the leaf is not base64") from None
        try:
            verify_inclusion(index, cp.size, leaf_hash(leaf), proof, cp.root)
        except ValueError as e:
            raise UnverifiedError(str(e)) from None
        try:
            entry = parse_leaf(leaf)
        except ValueError as e:
            raise UnverifiedError(f"leaf {index}: {e}") from None
        res = AppendResult(verdict, index, leaf, entry, cp, doc["checkpoint"], proof, duplicate=doc.get("duplicate") is True,
                           notes=[str(x) for x in doc.get("notes") or []])
        if verdict in ("accepted", "held"):
            if not same_submission(entry.envelope, own):
                raise UnverifiedError(f"leaf {index} holds another envelope than the one submitted")
            if verdict == "held":
                if own.kind != "RECEIPT" or entry.statement.get("result") != "pending":
                    raise UnverifiedError(f"a {own.kind} answered held: only a pending RECEIPT is held")
                res.expires_at = str(doc.get("expires_at", ""))
                res.rules = [x for x in doc.get("rules") or [] if isinstance(x, dict)]
            return res
        if doc.get("denial_index") != index:
            raise UnverifiedError("a denial without its denial_index")
        if entry.envelope.kind != "DENIAL":
            raise UnverifiedError(f"leaf {index} is a {entry.envelope.kind}, not a DENIAL")
        signer = self._denial_keys.get(entry.envelope.key_id)
        if signer is None or not envelope_verifies(entry.envelope, signer):
            yield from self._prove_denial_key(index, leaf)
        d = entry.statement
        if d.get("envelope_sha256") != hashlib.sha256(canonicalize(own.envelope)).hexdigest():
            raise UnverifiedError(f"DENIAL {index} names another submission")
        if d.get("reason_code") != doc.get("reason_code") or d.get("reason") != doc.get("reason"):
            raise UnverifiedError(f"DENIAL {index} says {d.get('reason_code')}, the answer {doc.get('reason_code')}")
        res.reason_code = d["reason_code"]
        res.reason = d["reason"]
        return res

    def _prove_denial_key(self, index: int, leaf: bytes) -> Flow:
        try:
            b = yield from self._get_json(f"/v1/bundle?index={index}")
        except (HTTPError, UnverifiedError) as e:
            raise UnverifiedError(f"DENIAL {index} is not signed by a checkpoint key, and its bundle could not be fetched: {e}") from None
        v = verify_bundle(b, self.keys)
        if not v.valid:
            raise UnverifiedError(f"DENIAL {index} is not signed by a checkpoint key, and its bundle does not verify: {v.failure}")
        if b.get("subject") != index or not any(e.get("index") == index and e.get("leaf") == b64(leaf) for e in b["entries"]):
            raise UnverifiedError(f"DENIAL {index}: its bundle proves another leaf")

    def _require_witnessed(self, r: AppendResult) -> Flow:
        p = self.witness_policy
        assert p is not None
        own = p.evaluate(r.checkpoint_text)
        if own.satisfied:
            r.witnessed = own
            return
        deadline = time.monotonic() + self.witness_wait
        wait = 0.02
        last = ""
        while True:
            try:
                wait_ms = int(max(0.0, min(deadline - time.monotonic(), self.timeout - 1)) * 1000)
                body = yield from self._get(f"/v1/checkpoint/witnessed?size={r.index + 1}&wait={wait_ms}", 64 << 10)
                text = body.decode("utf-8")
                cp = self.open_checkpoint(text)
                ev = p.evaluate(text)
                if not ev.satisfied:
                    last = f"the server's newest witnessed checkpoint does not meet the policy ({ev.quorum}): missing {', '.join(ev.missing)}"
                elif cp.size > r.index:
                    inc = yield from self._get_json(f"/v1/proof/inclusion?index={r.index}&size={cp.size}")
                    proof = _hashes(inc.get("proof"), "inclusion proof")
                    try:
                        verify_inclusion(r.index, cp.size, leaf_hash(r.leaf), proof, cp.root)
                    except ValueError as e:
                        raise UnverifiedError(f"inclusion under the witnessed checkpoint: {e}") from None
                    r.checkpoint, r.checkpoint_text, r.proof, r.witnessed = cp, text, proof, ev
                    return
                else:
                    last = f"the newest witnessed checkpoint has {cp.size} entries"
            except HTTPError as e:
                last = str(e)
            if time.monotonic() + wait > deadline:
                nw = NotWitnessedError(f"entry {r.index} is logged, but no checkpoint that includes it met the witness quorum ({p}) "
                                       f"within {self.witness_wait} s: {last}")
                nw.result = r
                raise nw
            yield _Sleep(wait)
            wait = min(2 * wait, 0.5)

    def _head(self) -> Flow:
        body = yield from self._get("/checkpoint", 64 << 10)
        text = body.decode("utf-8", "replace")
        return self.open_checkpoint(text), text

    def _log(self) -> Flow:
        out = yield from self._get_json("/v1/log")
        good = isinstance(out, dict) and out.get("origin") == self.origin
        try:
            good = good and any(self.keys.contains(k) for k in KeySet.parse(out["verifier_key"]).current())
        except (ValueError, KeyError, TypeError):
            good = False
        if not good:
            raise UnverifiedError(f"the server serves another log than {self.keys}")
        return out

    def _entry(self, index: int) -> Flow:
        e = yield from self._get_json(f"/v1/entries/{index}")
        if not isinstance(e, dict) or e.get("index") != index:
            raise UnverifiedError(f"asked for entry {index}, got another")
        return check_entry(e)

    def _statement(self, sid: str) -> Flow:
        e = yield from self._get_json(f"/v1/statements/{quote(sid, safe='')}")
        return check_entry(e)

    def _inclusion(self, index: int, size: Optional[int]) -> Flow:
        out = yield from self._get_json(f"/v1/proof/inclusion?index={index}" + (f"&size={size}" if size else ""))
        proof = _hashes(out.get("proof"), "inclusion proof")
        lh, root = _hashes([out.get("leaf_hash"), out.get("root")], "inclusion proof")
        if out.get("index") != index or (size and out.get("size") != size):
            raise UnverifiedError(f"asked for {index} in {size or 'the latest'}, got {out.get('index')} in {out.get('size')}")
        if out.get("checkpoint"):
            cp = self.open_checkpoint(out["checkpoint"])
            if cp.size != out.get("size") or cp.root != root:
                raise UnverifiedError("the proof's root is not the checkpoint's")
        try:
            verify_inclusion(index, out["size"], lh, proof, root)
        except (ValueError, KeyError) as e:
            raise UnverifiedError(str(e)) from None
        return out

    def _prove_consistency(self, older: Union[str, Checkpoint], newer: Union[str, Checkpoint, None]) -> Flow:
        a = self.open_checkpoint(older) if isinstance(older, str) else older
        if newer is None:
            b, _ = yield from self._head()
        else:
            b = self.open_checkpoint(newer) if isinstance(newer, str) else newer
        if b.size < a.size:
            raise UnverifiedError(f"the newer checkpoint (size {b.size}) is smaller than the older (size {a.size}): a log never shrinks")
        proof: list[bytes] = []
        if 0 < a.size < b.size:
            out = yield from self._get_json(f"/v1/proof/consistency?from={a.size}&to={b.size}")
            proof = _hashes(out.get("proof"), "consistency proof")
        try:
            verify_consistency(a.size, b.size, proof, a.root, b.root)
        except ValueError as e:
            raise UnverifiedError(f"checkpoints of size {a.size} and {b.size}: {e}") from None
        return b

    def _workflow(self, wid: str, after: int) -> Flow:
        out: list[Entry] = []
        for _ in range(1_000_000):
            w = yield from self._get_json(f"/v1/workflows/{quote(wid, safe='')}?after={after}")
            ents = w.get("entries") or []
            for e in ents:
                ce = check_entry(e)
                if ce.index <= after:
                    raise UnverifiedError(f"workflow {wid}: entries out of order")
                after = ce.index
                out.append(ce)
            if not w.get("more") or not ents:
                return out
        raise UnverifiedError(f"workflow {wid}: too many pages")

    def _key_seq(self, kid: str) -> Flow:
        out = yield from self._get_json(f"/v1/keys/{quote(kid, safe='')}/seq")
        if not isinstance(out, dict) or out.get("key_id") != kid or type(out.get("next_seq")) is not int or out["next_seq"] < 1:
            raise UnverifiedError(f"key {kid}: malformed answer")
        return out

    def _bundle(self, sid: str, whole: bool) -> Flow:
        return (yield from self._get_json(f"/v1/bundle/{quote(sid, safe='')}" + ("?workflow=1" if whole else "")))

    def _verify_bundle(self, sid: str, whole: bool) -> Flow:
        b = yield from self._bundle(sid, whole)
        v = verify_bundle(b, self.keys)
        if not v.valid:
            raise UnverifiedError(f"bundle of {sid}: {v.failure}")
        return v

    def _approval(self, receipt_id: str, wait_ms: int) -> Flow:
        path = f"/v1/approvals/{quote(receipt_id, safe='')}" + (f"?wait={wait_ms}" if wait_ms > 0 else "")
        body = yield from self._get(path, 1 << 20)
        return _json(body, path)


class Client(_Core):
    """A verified connection to one log (synchronous; safe to share between threads).

    ``url`` may list several servers of one log separated by commas: appends
    follow the sequencer through a failover, reads go to any. An append that
    has no answer after ``stall_wait`` seconds (default 1.0; 0 turns it off)
    asks the other servers' ``/readyz`` who leads, and goes there if another
    does, as often as it stalls; a read asks its own server's ``/readyz``
    and, if that has no answer in ``stall_wait`` either, goes to the next
    server. So a frozen or cut-off server does not hold a call until
    ``timeout``, and a slow but live one is left alone. Reads go round the
    list, a pause apart, for up to ``failover_wait``.
    """

    def __init__(self, url: Union[str, Sequence[str]], log_key: str, *, http: Optional[httpx.Client] = None, **options: Any) -> None:
        super().__init__(url, log_key, **options)
        self._http = http or httpx.Client(timeout=self.timeout, limits=httpx.Limits(max_connections=64, max_keepalive_connections=64))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _do(self, req: _Req) -> Union[_Resp, _MovedOn, BaseException]:
        if not req.watch:
            return self._send(req)
        # The request runs in a thread of its own, so that this one can ask
        # the servers' /readyz while it waits; an abandoned request ends by
        # itself (its answer, if any, is dropped).
        box: list[tuple[Any, Optional[BaseException]]] = []
        done = threading.Event()

        def send() -> None:
            try:
                box.append((self._send(req), None))
            except BaseException as e:  # raised again in the caller's thread
                box.append((None, e))
            done.set()

        threading.Thread(target=send, daemon=True).start()
        while not done.wait(self.stall_wait):
            given_up = self._stalled(req, self._readyz(self._stall_probes(req)))
            if given_up is not None and not done.is_set():
                return given_up
        r, err = box[0]
        if err is not None:
            raise err
        return r

    def _readyz(self, servers: Sequence[int]) -> dict[int, bytes]:
        """Asks these servers' /readyz at once; the answers that came within stall_wait, by server."""
        found: list[Optional[bytes]] = [None] * len(servers)

        def ask(k: int) -> None:
            try:
                found[k] = self._http.get(self.servers[servers[k]] + "/readyz", timeout=self.stall_wait).content
            except httpx.HTTPError:
                pass

        threads = [threading.Thread(target=ask, args=(k,), daemon=True) for k in range(len(servers))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + self.stall_wait
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return {j: b for j, b in zip(servers, list(found)) if b is not None}

    def _send(self, req: _Req) -> Union[_Resp, BaseException]:
        try:
            with self._http.stream(req.method, self.servers[req.server] + req.path, content=req.body,
                                   headers={"content-type": "application/json"} if req.body is not None else None) as r:
                n = int(r.headers.get("content-length") or 0)
                if n > req.limit:
                    raise UnverifiedError(f"the answer is {n} bytes, more than {req.limit}")
                chunks, total = [], 0
                for c in r.iter_bytes():
                    total += len(c)
                    if total > req.limit:
                        raise UnverifiedError(f"the answer exceeds {req.limit} bytes")
                    chunks.append(c)
                return _Resp(r.status_code, r.headers, b"".join(chunks))
        except httpx.TransportError as e:
            return e

    def _run(self, flow: Flow) -> Any:
        try:
            item = next(flow)
            while True:
                if isinstance(item, _Sleep):
                    time.sleep(item.seconds)
                    item = flow.send(None)
                else:
                    item = flow.send(self._do(item))
        except StopIteration as s:
            return s.value

    def append(self, envelope: Union[str, bytes, Mapping[str, Any]]) -> AppendResult:
        """Submits one signed envelope; returns the verified decision (accepted, denied or held).

        Raises :class:`RefusedError` (nothing logged), :class:`UnverifiedError`
        (never trust the server), :class:`HTTPError` (no decision came).
        """
        return self._run(self._append(envelope))

    def append_batch(self, envelopes: Sequence[Union[str, bytes, Mapping[str, Any]]]) -> list[Any]:
        """Appends envelopes in one request (decided in order); per envelope its verified AppendResult
        or its error. Raises NoBatchError when the server has no batch endpoint."""
        return self._run(self._append_batch([_env_bytes(e) for e in envelopes]))

    def head(self) -> tuple[Checkpoint, str]:
        """The latest checkpoint, verified, and its text."""
        return self._run(self._head())

    def log(self) -> dict:
        return self._run(self._log())

    def entry(self, index: int) -> Entry:
        return self._run(self._entry(index))

    def statement(self, statement_id: str) -> Entry:
        return self._run(self._statement(statement_id))

    def inclusion(self, index: int, size: Optional[int] = None) -> dict:
        return self._run(self._inclusion(index, size))

    def prove_consistency(self, older: Union[str, Checkpoint], newer: Union[str, Checkpoint, None] = None) -> Checkpoint:
        return self._run(self._prove_consistency(older, newer))

    def workflow(self, workflow_id: str, after: int = 0) -> list[Entry]:
        return self._run(self._workflow(workflow_id, after))

    def key_seq(self, key_id: str) -> dict:
        return self._run(self._key_seq(key_id))

    def bundle(self, statement_id: str, whole_workflow: bool = False) -> dict:
        return self._run(self._bundle(statement_id, whole_workflow))

    def verify_bundle(self, statement_id: str, whole_workflow: bool = False) -> BundleVerdict:
        return self._run(self._verify_bundle(statement_id, whole_workflow))

    def approval(self, receipt_id: str, wait_ms: int = 0) -> dict:
        """The server's advisory view of a held receipt (never act on it alone)."""
        return self._run(self._approval(receipt_id, wait_ms))

    def events(self, workflow_id: str, after: int = 0, *, idle_timeout: float = 45.0,
               on_connect: Optional[Callable[[int], None]] = None, stop: Optional[Callable[[], bool]] = None,
               kinds: Optional[Sequence[str]] = None) -> Iterator[Entry]:
        """Follows a workflow's entries after index ``after``, reconnecting with the last index seen
        (``kinds``: only entries of those kinds are read and yielded)."""
        from .events import sync_events

        return sync_events(self, workflow_id, after, idle_timeout=idle_timeout, on_connect=on_connect, stop=stop, kinds=kinds)


class AsyncClient(_Core):
    """:class:`Client` for asyncio: the same checks, with ``httpx.AsyncClient``."""

    def __init__(self, url: Union[str, Sequence[str]], log_key: str, *, http: Optional[httpx.AsyncClient] = None, **options: Any) -> None:
        super().__init__(url, log_key, **options)
        self._http = http or httpx.AsyncClient(timeout=self.timeout, limits=httpx.Limits(max_connections=256, max_keepalive_connections=256))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _do(self, req: _Req) -> Union[_Resp, _MovedOn, BaseException]:
        if not req.watch:
            return await self._send(req)
        task = asyncio.ensure_future(self._send(req))
        while True:
            done, _ = await asyncio.wait({task}, timeout=self.stall_wait)
            if done:
                return task.result()
            given_up = self._stalled(req, await self._readyz(self._stall_probes(req)))
            if given_up is not None and not task.done():
                task.cancel()
                return given_up

    async def _readyz(self, servers: Sequence[int]) -> dict[int, bytes]:
        """Asks these servers' /readyz at once; the answers that came within stall_wait, by server."""

        async def ask(j: int) -> Optional[bytes]:
            try:
                r = await asyncio.wait_for(self._http.get(self.servers[j] + "/readyz", timeout=self.stall_wait), self.stall_wait)
                return r.content
            except (httpx.HTTPError, asyncio.TimeoutError):
                return None

        found = await asyncio.gather(*(ask(j) for j in servers))
        return {j: b for j, b in zip(servers, found) if b is not None}

    async def _send(self, req: _Req) -> Union[_Resp, BaseException]:
        try:
            async with self._http.stream(req.method, self.servers[req.server] + req.path, content=req.body,
                                         headers={"content-type": "application/json"} if req.body is not None else None) as r:
                n = int(r.headers.get("content-length") or 0)
                if n > req.limit:
                    raise UnverifiedError(f"the answer is {n} bytes, more than {req.limit}")
                chunks, total = [], 0
                async for c in r.aiter_bytes():
                    total += len(c)
                    if total > req.limit:
                        raise UnverifiedError(f"the answer exceeds {req.limit} bytes")
                    chunks.append(c)
                return _Resp(r.status_code, r.headers, b"".join(chunks))
        except httpx.TransportError as e:
            return e

    async def _run(self, flow: Flow) -> Any:
        try:
            item = next(flow)
            while True:
                if isinstance(item, _Sleep):
                    await asyncio.sleep(item.seconds)
                    item = flow.send(None)
                else:
                    item = flow.send(await self._do(item))
        except StopIteration as s:
            return s.value

    async def append(self, envelope: Union[str, bytes, Mapping[str, Any]]) -> AppendResult:
        return await self._run(self._append(envelope))

    async def append_batch(self, envelopes: Sequence[Union[str, bytes, Mapping[str, Any]]]) -> list[Any]:
        """Appends envelopes in one request; per envelope its verified AppendResult or its error."""
        return await self._run(self._append_batch([_env_bytes(e) for e in envelopes]))

    async def head(self) -> tuple[Checkpoint, str]:
        return await self._run(self._head())

    async def log(self) -> dict:
        return await self._run(self._log())

    async def entry(self, index: int) -> Entry:
        return await self._run(self._entry(index))

    async def statement(self, statement_id: str) -> Entry:
        return await self._run(self._statement(statement_id))

    async def inclusion(self, index: int, size: Optional[int] = None) -> dict:
        return await self._run(self._inclusion(index, size))

    async def prove_consistency(self, older: Union[str, Checkpoint], newer: Union[str, Checkpoint, None] = None) -> Checkpoint:
        return await self._run(self._prove_consistency(older, newer))

    async def workflow(self, workflow_id: str, after: int = 0) -> list[Entry]:
        return await self._run(self._workflow(workflow_id, after))

    async def key_seq(self, key_id: str) -> dict:
        return await self._run(self._key_seq(key_id))

    async def bundle(self, statement_id: str, whole_workflow: bool = False) -> dict:
        return await self._run(self._bundle(statement_id, whole_workflow))

    async def verify_bundle(self, statement_id: str, whole_workflow: bool = False) -> BundleVerdict:
        return await self._run(self._verify_bundle(statement_id, whole_workflow))

    async def approval(self, receipt_id: str, wait_ms: int = 0) -> dict:
        return await self._run(self._approval(receipt_id, wait_ms))

    def events(self, workflow_id: str, after: int = 0, *, idle_timeout: float = 45.0,
               on_connect: Optional[Callable[[int], None]] = None, kinds: Optional[Sequence[str]] = None,
               on_disconnect: Optional[Callable[[BaseException], None]] = None) -> AsyncIterator[Entry]:
        """Follows a workflow's entries after index ``after`` (an async iterator), reconnecting with the
        last index seen (``kinds``: only entries of those kinds are read and yielded)."""
        from .events import async_events

        return async_events(self, workflow_id, after, idle_timeout=idle_timeout, on_connect=on_connect, kinds=kinds,
                            on_disconnect=on_disconnect)
