"""Runtime: an agent (or a person) with a key and a name, writing to one log
(the Go client.Runtime's and the TypeScript Runtime's counterpart, for asyncio).

It fills statement headers (timestamp, log, actor, seq), seals grants,
signs and appends, and :meth:`Runtime.execute` gates an irreversible step.
It fails closed: the step runs only once its pending receipt is durable and
verified, the workflow's event stream is connected (so a STOP reaches it)
and, when a rule holds the receipt (DESIGN §7), once the runtime itself has
verified the APPROVALs that approve it from a bundle it checked. A STOP
covering the step cancels it; its outcome receipt is always written.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import os
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Optional, Union

from .approval import ApprovalState, decide
from .canonical import canonicalize
from .client import AppendResult, AsyncClient, Entry, NoBatchError
from .envelope import envelope_bytes
from .errors import CustodyError, HTTPError, NotWitnessedError, RefusedError, UnverifiedError
from .keys import PrivateKey
from .scope import canonical_set, format_time, optional_set
from .statement import seal, sign_statement


#: The most statements a Runtime sends in one batch.
MAX_BATCH = 128


@dataclass
class _Queued:
    st: dict
    fut: "asyncio.Future[Any]"
    tries: int = 0


def new_id(prefix: str) -> str:
    """A fresh statement id: ``<prefix>_<16 random hex digits>``."""
    return f"{prefix}_{os.urandom(8).hex()}"


def params_sha256(params: Any) -> str:
    """SHA-256 of the JCS of a call's parameters (a pending RECEIPT's params_sha256)."""
    return hashlib.sha256(canonicalize(params)).hexdigest()


@dataclass
class Step:
    """A step :meth:`Runtime.execute` gates."""

    step_id: str
    action: str
    target: str
    #: The id of the grant (CONFIRM or DELEGATE) the agent acts under.
    auth: str
    workflow: Optional[str] = None
    scope_hash: Optional[str] = None
    receipt_id: Optional[str] = None
    #: Every limit key in force on the chain must be reserved (0 is allowed).
    reserve: Optional[dict[str, int]] = None
    #: The exact call (e.g. a tool's arguments): its JCS hash is bound into the pending receipt.
    params: Any = None


@dataclass
class Outcome:
    """What a step did. Returning None records success; an exception records failure."""

    result: str = "success"
    consumed: Optional[dict[str, int]] = None
    side_effects: Optional[dict[str, str]] = None
    evidence: Optional[list[str]] = None
    error: Optional[str] = None


@dataclass
class Execution:
    """What execute did."""

    pending: Optional[AppendResult] = None
    ran: bool = False
    outcome: Optional[AppendResult] = None
    stopped: Optional["StoppedError"] = None
    approval: Optional[ApprovalState] = None
    value: Any = None


class StoppedError(CustodyError):
    """A STOP covering the step arrived while it ran (or before it started)."""

    code = "stopped"

    def __init__(self, stop: dict, index: int) -> None:
        where = f"step {stop['step_id']} of " if stop.get("stop_scope") == "step" else ""
        super().__init__(f"stopped: {where}workflow {stop['workflow_id']} by STOP {stop['request_id']} at index {index} "
                         f"(takeover {stop['takeover_mode']}): {stop['reason']}")
        self.stop = stop
        self.index = index


class DeniedError(CustodyError):
    """The ledger denied a statement (a DENIAL of it is logged and verified)."""

    code = "denied"

    def __init__(self, answer: AppendResult) -> None:
        super().__init__(f"denied: {answer.reason_code}: {answer.reason} (DENIAL at index {answer.index})")
        self.answer = answer
        self.reason_code = answer.reason_code


class NotExecutedError(CustodyError):
    """execute never ran the step. ``reason_code`` is the ledger's code for a denial, or one of
    approval_rejected, approval_expired, approval_closed, approval_timeout, ledger_unavailable, params_mismatch,
    stopped, vetoed, unverified, refused."""

    code = "not_executed"

    def __init__(self, reason_code: str, message: str, execution: Execution) -> None:
        super().__init__(f"{reason_code}: the step was not executed: {message}")
        self.reason_code = reason_code
        self.execution = execution


@dataclass
class Hooks:
    """Hook points (all optional). A before_* hook vetoes by raising: nothing is written."""

    before_confirm: Optional[Callable[[dict], Any]] = None
    after_confirm: Optional[Callable[[AppendResult], Any]] = None
    before_execute: Optional[Callable[[Step], Any]] = None
    after_execute: Optional[Callable[[Step, Outcome, Optional[BaseException]], Any]] = None
    on_held: Optional[Callable[[Step, AppendResult], Any]] = None
    on_stop: Optional[Callable[[dict, int], Any]] = None
    on_takeover: Optional[Callable[[dict, int], Any]] = None
    emit_receipt: Optional[Callable[[AppendResult], Any]] = None


@dataclass
class StepContext:
    """Handed to a step's function: ``stopped`` is set (and an async step cancelled) when a STOP covers it."""

    step: Step
    pending: Optional[AppendResult]
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    stop: Optional[StoppedError] = None


async def _call(f: Optional[Callable[..., Any]], *args: Any) -> Any:
    if f is None:
        return None
    r = f(*args)
    if inspect.isawaitable(r):
        r = await r
    return r


class Runtime:
    """Signs as one key and appends through one :class:`AsyncClient`; appends are made one at a time,
    so each carries the next seq."""

    def __init__(self, client: AsyncClient, key: PrivateKey, *, name: str = "", hooks: Optional[Hooks] = None,
                 now: Optional[Callable[[], float]] = None, watch_timeout: float = 10.0, approval_timeout: Optional[float] = None) -> None:
        self.client = client
        self.key = key
        self.hooks = hooks or Hooks()
        self.now = now or time.time
        self.watch_timeout = watch_timeout
        #: How long a held step waits for approval (None: until its deadline).
        self.approval_timeout = approval_timeout
        self._name = name
        self._next = 0
        self._queue: list[_Queued] = []
        self._watches: dict[str, _Watch] = {}
        self._sending = False
        self._no_batch = False
        # An accepted grant's scope_hash and workflow never change: read once, by grant id.
        self._grants: dict[str, tuple[str, str]] = {}

    @property
    def name(self) -> str:
        return self._name

    async def append(self, st: dict) -> AppendResult:
        """Fills a statement's header, seals, signs and appends it; returns the verified answer.

        Concurrent appends go together, with consecutive seqs, in one batch
        request (POST /v1/entries/batch), which the ledger decides in order,
        as the Go runtime does. A statement the ledger withdrew because one
        before it in its batch was not accepted is signed again with the
        right seq and sent again, so each caller sees its own decision.
        """
        fut: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(st, fut))
        if not self._sending:
            self._sending = True
            asyncio.ensure_future(self._drive())
        return await fut

    async def _drive(self) -> None:
        try:
            while self._queue:
                n = 1 if self._no_batch else MAX_BATCH
                rnd, self._queue = self._queue[:n], self._queue[n:]
                try:
                    requeue = await self._send(rnd)
                except BaseException as e:  # never leave a caller waiting
                    for q in rnd:
                        if not q.fut.done():
                            q.fut.set_exception(e if isinstance(e, Exception) else RuntimeError(str(e)))
                    requeue = []
                self._queue = requeue + self._queue
        finally:
            self._sending = False

    async def _send(self, rnd: list["_Queued"]) -> list["_Queued"]:
        live = [q for q in rnd if not q.fut.done()]
        if not live:
            return []

        def finish(q: _Queued, res: Any) -> None:
            if q.fut.done():
                return
            if isinstance(res, BaseException):
                q.fut.set_exception(res)
            else:
                q.fut.set_result(res)

        if self._next == 0 or not self._name:
            try:
                ks = await self.client.key_seq(self.key.key_id)
                if not self._name and (not ks.get("bound") or not ks.get("name")):
                    raise ValueError(f"key {self.key.key_id} is not bound in the log: give the runtime its name")
            except Exception as e:
                for q in live:
                    finish(q, e)
                return []
            self._next = ks["next_seq"]
            if not self._name:
                self._name = ks["name"]
        now = format_time(self.now())
        sent: list[_Queued] = []
        envs: list[bytes] = []
        for q in live:
            st = q.st
            st["timestamp"] = now
            st["log"] = self.client.origin
            st["actor"] = self._name
            st["seq"] = self._next + len(sent)
            try:
                seal(st)
                envs.append(envelope_bytes(sign_statement(st, self.key)))
            except Exception as e:
                finish(q, e)
                continue
            sent.append(q)
        if not sent:
            return []
        results: list[Any]
        if len(sent) == 1:
            try:
                results = [await self.client.append(envs[0])]
            except RefusedError as e:
                results = [e]
            except Exception as e:
                self._next = 0  # the outcome is unknown: ask the ledger next time
                finish(sent[0], e)
                return []
        else:
            try:
                results = await self.client.append_batch(envs)
            except NoBatchError:
                self._no_batch = True
                return sent  # one at a time from now on
            except Exception as e:
                self._next = 0
                for q in sent:
                    finish(q, e)
                return []
        requeue: list[_Queued] = []
        broken = False
        for q, res in zip(sent, results):
            if isinstance(res, NotWitnessedError):
                self._next = q.st["seq"] + 1  # logged (accepted), only not witnessed in time
                finish(q, res)
                continue
            withdrawn = isinstance(res, RefusedError) and res.reason_code == "withdrawn"
            mismatch = isinstance(res, AppendResult) and res.verdict == "denied" and res.reason_code == "seq_mismatch"
            if withdrawn and broken:
                requeue.append(q)  # not decided: signed again with the right seq in the next round
                continue
            if isinstance(res, AppendResult) and res.verdict in ("accepted", "held"):
                self._next = q.st["seq"] + 1
            elif (mismatch or isinstance(res, RefusedError)) and broken and q.tries < 3:
                q.tries += 1
                requeue.append(q)
                continue
            elif mismatch:
                self._next = 0
                broken = True
            elif isinstance(res, (AppendResult, RefusedError)):
                broken = True
            else:
                self._next = 0
                broken = True
            if isinstance(res, AppendResult):
                try:
                    await _call(self.hooks.emit_receipt, res)
                except Exception:
                    pass
            finish(q, res)
        return requeue

    async def append_or_raise(self, st: dict) -> AppendResult:
        a = await self.append(st)
        if a.verdict == "denied":
            raise DeniedError(a)
        return a

    @staticmethod
    def _grant(workflow: str, grantee: str, grantee_key: Union[bytes, str], capabilities: list[str], targets: list[str],
               ttl_seconds: int, steps: Optional[list[str]], principals: Optional[list[str]], limits: Optional[dict[str, int]],
               revocable: bool, approvals: Optional[list[dict]]) -> dict:
        from ._encoding import b64

        key = grantee_key if isinstance(grantee_key, str) else b64(grantee_key)
        scope: dict[str, Any] = {"workflow_id": workflow, "capabilities": canonical_set(capabilities), "targets": canonical_set(targets)}
        s, p = optional_set(steps), optional_set(principals)
        if s:
            scope["step_ids"] = s
        if p:
            scope["principals"] = p
        g: dict[str, Any] = {"grantee": {"name": grantee, "public_key": key}, "scope": scope, "ttl_seconds": ttl_seconds,
                             "revocable": revocable, "scope_hash": ""}
        if limits:
            g["limits"] = dict(limits)
        if approvals:
            g["approvals"] = sorted((dict(r) for r in approvals), key=lambda r: r["rule_id"])
        return g

    async def confirm(self, *, workflow: str, grantee: str, grantee_key: Union[bytes, str], capabilities: list[str], targets: list[str],
                      ttl_seconds: int, id: Optional[str] = None, steps: Optional[list[str]] = None, principals: Optional[list[str]] = None,
                      limits: Optional[dict[str, int]] = None, revocable: bool = False, risk: Optional[str] = None,
                      approvals: Optional[list[dict]] = None) -> AppendResult:
        """Grants an agent authority (this runtime's key must be an enrolled principal's)."""
        doc = {"type": "CONFIRM", "confirm_id": id or new_id("confirm"),
               **self._grant(workflow, grantee, grantee_key, capabilities, targets, ttl_seconds, steps, principals, limits, revocable, approvals)}
        if risk:
            doc["risk_level"] = risk
        await _call(self.hooks.before_confirm, doc)
        a = await self.append_or_raise(doc)
        await _call(self.hooks.after_confirm, a)
        return a

    async def grant_of(self, grant_id: str) -> dict:
        """An accepted CONFIRM or DELEGATE by id, read from its leaf."""
        st = (await self.client.statement(grant_id)).statement
        if st["type"] not in ("CONFIRM", "DELEGATE"):
            raise ValueError(f"{grant_id} is a {st['type']}, not a grant")
        return st

    async def delegate(self, parent_id: str, *, grantee: str, grantee_key: Union[bytes, str], capabilities: list[str], targets: list[str],
                       ttl_seconds: int, id: Optional[str] = None, workflow: Optional[str] = None, steps: Optional[list[str]] = None,
                       principals: Optional[list[str]] = None, limits: Optional[dict[str, int]] = None, revocable: bool = False,
                       approvals: Optional[list[dict]] = None) -> AppendResult:
        """Hands a sub-agent part of the grant parent_id (this runtime's key must be its grantee)."""
        parent = await self.grant_of(parent_id)
        doc = {"type": "DELEGATE", "delegation_id": id or new_id("delegate"), "parent_ref": parent_id, "parent_scope_hash": parent["scope_hash"],
               **self._grant(workflow or parent["scope"]["workflow_id"], grantee, grantee_key, capabilities, targets, ttl_seconds, steps,
                             principals, limits, revocable, approvals)}
        return await self.append_or_raise(doc)

    async def stop(self, *, workflow: str, reason: str, step: Optional[str] = None, takeover: str = "human",
                   takeover_to: Optional[str] = None, id: Optional[str] = None) -> AppendResult:
        """Halts a step (and the steps below it) or, with no step, the whole workflow."""
        doc: dict[str, Any] = {"type": "STOP", "request_id": id or new_id("stop"), "workflow_id": workflow,
                               "stop_scope": "step" if step else "chain", "takeover_mode": takeover, "reason": reason}
        if step:
            doc["step_id"] = step
        if takeover_to:
            doc["takeover_to"] = takeover_to
        return await self.append_or_raise(doc)

    async def revoke(self, *, target: str, reason: str, workflow: Optional[str] = None, id: Optional[str] = None) -> AppendResult:
        wf = workflow or (await self.grant_of(target))["scope"]["workflow_id"]
        return await self.append_or_raise({"type": "REVOKE", "revoke_id": id or new_id("revoke"), "workflow_id": wf, "target_ref": target, "reason": reason})

    async def resume(self, *, workflow: str, stop: str, id: Optional[str] = None) -> AppendResult:
        return await self.append_or_raise({"type": "RESUME", "resume_id": id or new_id("resume"), "workflow_id": workflow, "stop_ref": stop})

    async def approve(self, receipt_id: str, *, reject: bool = False, reason: Optional[str] = None, id: Optional[str] = None) -> AppendResult:
        """Approves (or rejects) a held pending RECEIPT: the exact payload bytes the log holds (DESIGN §7)."""
        e = await self.client.statement(receipt_id)
        st = e.statement
        if st["type"] != "RECEIPT" or st["result"] != "pending":
            raise ValueError(f"{receipt_id} is not a pending RECEIPT")
        doc: dict[str, Any] = {"type": "APPROVAL", "approval_id": id or new_id("approval"), "workflow_id": st["workflow_id"],
                               "receipt_ref": receipt_id, "receipt_sha256": hashlib.sha256(e.read.envelope.payload).hexdigest(),
                               "decision": "reject" if reject else "approve"}
        if reason:
            doc["reason"] = reason
        return await self.append_or_raise(doc)

    async def receipt(self, doc: dict) -> AppendResult:
        """Appends a RECEIPT; a missing receipt_id gets a fresh one, a missing scope_hash or workflow_id is read from its grant."""
        doc.setdefault("receipt_id", new_id("receipt"))
        if not doc.get("scope_hash") or not doc.get("workflow_id"):
            ref = doc["authorization_ref"]
            if ref not in self._grants:
                g = await self.grant_of(ref)
                if len(self._grants) >= 4096:
                    self._grants.clear()
                self._grants[ref] = (g["scope_hash"], g["scope"]["workflow_id"])
            sh, wf = self._grants[ref]
            if not doc.get("scope_hash"):
                doc["scope_hash"] = sh
            if not doc.get("workflow_id"):
                doc["workflow_id"] = wf
        return await self.append({"type": "RECEIPT", **doc})

    # --- execute -----------------------------------------------------------

    async def execute(self, step: Step, fn: Callable[[StepContext], Any]) -> Execution:
        """Gates an irreversible step; see the module docstring.

        fn receives a :class:`StepContext`; it may be a coroutine function (a
        STOP cancels it) or a plain function (run in a thread; a STOP sets
        ``ctx.stopped``). It returns an :class:`Outcome`, None (success) or
        any value (kept in ``Execution.value``; success). Raises
        :class:`NotExecutedError` when the step never ran (its pending
        receipt, if logged, is then closed with a failure outcome whose
        error starts with the reason code), or fn's exception after its
        failure outcome is written. A held step waits for approval
        (``approval_timeout``, default: its deadline).
        """
        run = await self.begin(step)
        if run.held:
            await run.await_approval(self.approval_timeout)
        return await run.run(fn)

    async def begin(self, step: Step) -> "StepRun":
        """Writes a step's pending receipt and returns its :class:`StepRun` (not yet run).

        Raises :class:`NotExecutedError` when the ledger does not accept it
        (a denial: its reason code) or gives no verified answer.
        """
        ex = Execution()
        try:
            await _call(self.hooks.before_execute, step)
        except Exception as e:
            raise NotExecutedError("vetoed", f"before_execute: {e}", ex) from e
        rid = step.receipt_id or new_id("receipt")
        pending: dict[str, Any] = {"receipt_id": rid, "step_id": step.step_id, "action": step.action, "target": step.target,
                                   "authorization_ref": step.auth, "result": "pending"}
        if step.workflow:
            pending["workflow_id"] = step.workflow
        if step.scope_hash:
            pending["scope_hash"] = step.scope_hash
        if step.reserve:
            pending["reserve"] = dict(step.reserve)
        if step.params is not None:
            pending["params_sha256"] = params_sha256(step.params)
        try:
            answer = await self.receipt(pending)
        except NotWitnessedError as e:
            # Logged, but not under a checkpoint the witness policy accepts: never run; close it.
            ex.pending = e.result if isinstance(e.result, AppendResult) else None
            if ex.pending is not None:
                s = Step(**{**step.__dict__, "workflow": pending["workflow_id"], "scope_hash": pending["scope_hash"], "receipt_id": rid})
                await StepRun(self, s, ex, ex.pending.index, ex.pending.statement, False).abandon("not_witnessed", str(e))
            raise NotExecutedError("not_witnessed", str(e), ex) from e
        except RefusedError as e:
            raise NotExecutedError("refused", str(e), ex) from e
        except UnverifiedError as e:
            raise NotExecutedError("unverified", str(e), ex) from e
        except (HTTPError, OSError) as e:
            raise NotExecutedError("ledger_unavailable", str(e), ex) from e
        if answer.verdict == "denied":
            d = DeniedError(answer)
            raise NotExecutedError(answer.reason_code, str(d), ex) from d
        ex.pending = answer
        s = Step(**{**step.__dict__, "workflow": pending["workflow_id"], "scope_hash": pending["scope_hash"], "receipt_id": rid})
        run = StepRun(self, s, ex, answer.index, answer.statement, answer.held)
        if answer.held:
            await _call(self.hooks.on_held, s, answer)
        return run

    async def adopt(self, step: Step, receipt_id: str) -> "StepRun":
        """The :class:`StepRun` of a pending receipt written earlier (e.g. before a LangGraph interrupt),
        read from its verified leaf; it must be this step's (same workflow, step, action, target, grant)."""
        e = await self.client.statement(receipt_id)
        st = e.statement
        want = {"step_id": step.step_id, "action": step.action, "target": step.target, "authorization_ref": step.auth}
        if st["type"] != "RECEIPT" or st["result"] != "pending" or any(st[k] != v for k, v in want.items()):
            raise NotExecutedError("params_mismatch", f"{receipt_id} is not this step's pending receipt", Execution())
        if step.params is not None and st.get("params_sha256") != params_sha256(step.params):
            raise NotExecutedError("params_mismatch", f"{receipt_id} was written for other parameters", Execution())
        s = Step(**{**step.__dict__, "workflow": st["workflow_id"], "scope_hash": st["scope_hash"], "receipt_id": receipt_id})
        return StepRun(self, s, Execution(), e.index, st, True)

    async def _subscribe(self, sub: "_Sub") -> "_Watch":
        """Registers a running step with its workflow's STOP watch: one event stream per workflow,
        shared by the runtime's steps, so that a STOP logged after the step's pending receipt
        reaches it. STOPs the stream saw before the step registered, and (when the stream started
        after the step's pending receipt) those between the two, are checked at once."""
        wf = sub.step.workflow or ""
        w = self._watches.get(wf)
        if w is None or w.task.done():
            w = _Watch(self, wf, sub.after)
            self._watches[wf] = w
        w.subs.add(sub)
        if w.close_handle is not None:
            w.close_handle.cancel()
            w.close_handle = None
        for idx, st in list(w.stops):
            if idx > sub.after:
                await sub.deliver(st, idx)
        if w.start_after > sub.after:
            # The shared stream started after this step's pending receipt: read the gap once.
            for e in await self.client.workflow(wf, sub.after):
                if e.index > w.start_after:
                    break
                if e.statement["type"] == "STOP":
                    await sub.deliver(e.statement, e.index)
        return w

    def _unsubscribe(self, w: "_Watch", sub: "_Sub") -> None:
        w.subs.discard(sub)
        if not w.subs and not w.task.done():
            # Kept a moment for the next step of the workflow, then closed.
            w.close_handle = asyncio.get_running_loop().call_later(WATCH_LINGER, w.close)

    async def _outcome(self, s: Step, ex: Execution, out: Outcome) -> None:
        doc: dict[str, Any] = {"workflow_id": s.workflow, "step_id": s.step_id, "action": s.action, "target": s.target,
                               "authorization_ref": s.auth, "result": out.result or "success", "scope_hash": s.scope_hash,
                               "pending_ref": s.receipt_id}
        if out.consumed:
            doc["consumed"] = dict(out.consumed)
        if out.side_effects:
            doc["side_effects"] = dict(out.side_effects)
        if out.evidence:
            doc["evidence_refs"] = list(out.evidence)
        if out.error and doc["result"] != "success":
            doc["error"] = out.error
        last: Optional[BaseException] = None
        for attempt in range(5):  # the outcome is always recorded: retried through a failover
            try:
                a = await self.receipt(dict(doc))
                if a.verdict == "denied":
                    raise DeniedError(a)
                ex.outcome = a
                return
            except (HTTPError, OSError) as e:
                last = e
                await asyncio.sleep(0.2 * (attempt + 1))
        assert last is not None
        raise last


class StepRun:
    """One gated step between its pending receipt and its outcome (:meth:`Runtime.begin`).

    ``held`` says a rule holds it for approval (DESIGN §7): :meth:`approval`
    verifies the APPROVALs itself from a bundle it checked, never taking the
    server's word. :meth:`run` runs it at most once, and only when it is
    not held or verified approved; :meth:`abandon` closes it unrun.
    """

    def __init__(self, rt: Runtime, step: Step, ex: Execution, index: int, statement: dict, held: bool) -> None:
        self.rt = rt
        self.step = step
        self.execution = ex
        self.index = index
        self.statement = statement
        self.held = held
        self._done = False

    @property
    def receipt_id(self) -> str:
        return self.step.receipt_id or ""

    async def approval(self) -> ApprovalState:
        """The held receipt's state, decided here from its verified whole-workflow bundle."""
        v = await self.rt.client.verify_bundle(self.receipt_id, True)
        st = decide(v, self.index, int(self.rt.now()))
        self.execution.approval = st
        return st

    async def await_approval(self, timeout: Optional[float] = None) -> ApprovalState:
        """Waits until the held receipt is approved (verified here) or closes it unrun:
        NotExecutedError approval_rejected/expired/closed/timeout, ledger_unavailable or unverified."""
        start = time.monotonic()
        failures = 0
        while True:
            try:
                st = await self.approval()
                failures = 0
            except UnverifiedError as e:
                await self.abandon("unverified", str(e))
                raise AssertionError("unreachable")
            except (HTTPError, OSError) as e:
                failures += 1
                if failures >= 5:
                    await self.abandon("ledger_unavailable", f"the ledger did not answer while the step was held: {e}")
                await asyncio.sleep(0.2 * failures)
                continue
            if st.state == "approved":
                return st
            if st.state in ("rejected", "expired", "closed"):
                await self.abandon(f"approval_{st.state}", st.reason)
            elapsed = time.monotonic() - start
            if timeout is not None and elapsed >= timeout:
                await self.abandon("approval_timeout", f"not approved within {timeout} s")
            wait_ms = 5000
            if st.deadline is not None:
                wait_ms = max(50, min(wait_ms, int((st.deadline - self.rt.now()) * 1000) + 50))
            if timeout is not None:
                wait_ms = max(50, min(wait_ms, int((timeout - elapsed) * 1000) + 50))
            try:
                # Advisory only: it says when to look again; the decision is made above.
                await self.rt.client.approval(self.receipt_id, wait_ms)
            except (HTTPError, UnverifiedError, OSError):
                await asyncio.sleep(min(1.0, wait_ms / 1000))

    async def abandon(self, code: str, msg: str) -> None:
        """Closes the step unrun: a failure outcome whose error starts with code; raises NotExecutedError."""
        if not self._done:
            self._done = True
            with contextlib.suppress(Exception):
                await self.rt._outcome(self.step, self.execution, Outcome(result="failure", error=f"{code}: not executed: {msg}"))
        raise NotExecutedError(code, msg, self.execution)

    async def run(self, fn: Callable[[StepContext], Any], params: Any = None) -> Execution:
        """Runs the step (at most once) under a connected STOP watch, then writes its outcome."""
        rt, s, ex = self.rt, self.step, self.execution
        if self._done:
            raise NotExecutedError("already_run", f"step {s.step_id} (receipt {self.receipt_id}) was run or closed already", ex)
        if params is not None and self.statement.get("params_sha256") is not None and self.statement["params_sha256"] != params_sha256(params):
            await self.abandon("params_mismatch", "the call about to be made is not the one the pending receipt names (params_sha256)")
        ctx = StepContext(s, ex.pending)
        sub = _Sub(rt, s, self.index, ex, ctx)
        out = Outcome()
        ferr: Optional[BaseException] = None
        watch: Optional[_Watch] = None
        try:
            try:
                watch = await asyncio.wait_for(rt._subscribe(sub), rt.watch_timeout)
                await asyncio.wait_for(watch.connected.wait(), rt.watch_timeout)
            except (asyncio.TimeoutError, HTTPError, UnverifiedError, OSError):
                await self.abandon("ledger_unavailable", f"no event stream for workflow {s.workflow} within {rt.watch_timeout} s, so a STOP could not reach the step")
            if self.held:
                # Immediately before running: a fresh verified look that it is approved, not closed, not past its deadline.
                try:
                    st = await self.approval()
                except (HTTPError, OSError, UnverifiedError) as e:
                    await self.abandon("ledger_unavailable", f"could not verify the approval before running: {e}")
                if st.state != "approved":
                    await self.abandon(f"approval_{st.state}" if st.state != "held" else "approval_timeout", st.reason or "not approved")
                if st.deadline is not None and rt.now() >= st.deadline:
                    await self.abandon("approval_expired", "approved, but the deadline has passed")
            if ex.stopped is not None:
                await self.abandon("stopped", str(ex.stopped))
            self._done = True
            ex.ran = True
            if inspect.iscoroutinefunction(fn):
                task = asyncio.ensure_future(fn(ctx))
            else:
                task = asyncio.ensure_future(asyncio.to_thread(fn, ctx))
            sub.task = task
            if ex.stopped is not None:
                task.cancel()
            try:
                value = await task
                if isinstance(value, Outcome):
                    out = value
                else:
                    ex.value = value
            except asyncio.CancelledError:
                if ex.stopped is None:
                    raise
                ferr = ex.stopped
            except Exception as e:  # the step's own failure: recorded, then raised
                ferr = e
        finally:
            if watch is not None:
                rt._unsubscribe(watch, sub)
        if ferr is not None:
            msg = str(ferr) or type(ferr).__name__
            if ex.stopped is not None and ferr is not ex.stopped:
                msg = f"{msg}; {ex.stopped}"
            out = Outcome(result="failure", consumed=out.consumed, side_effects=out.side_effects, evidence=out.evidence, error=msg)
        oerr: Optional[BaseException] = None
        try:
            await rt._outcome(s, ex, out)
        except Exception as e:
            oerr = e
        await _call(rt.hooks.after_execute, s, out, ferr or oerr)
        if ferr is not None:
            raise ferr
        if oerr is not None:
            raise oerr
        return ex


#: How long a workflow's STOP watch stays open after its last step ends (seconds).
WATCH_LINGER = 2.0


class _Sub:
    """A running step, as its workflow's watch sees it."""

    def __init__(self, rt: Runtime, step: Step, after: int, ex: Execution, ctx: StepContext) -> None:
        self.rt, self.step, self.after, self.ex, self.ctx = rt, step, after, ex, ctx
        self.task: Optional["asyncio.Task[Any]"] = None

    def covers(self, st: dict) -> bool:
        sid = st.get("step_id")
        return st["workflow_id"] == self.step.workflow and (
            st["stop_scope"] == "chain" or self.step.step_id == sid or self.step.step_id.startswith(f"{sid}/"))

    async def deliver(self, st: dict, index: int) -> None:
        if index <= self.after or not self.covers(st):
            return
        await _call(self.rt.hooks.on_stop, st, index)
        if self.ex.stopped is None:
            self.ex.stopped = StoppedError(st, index)
            self.ctx.stop = self.ex.stopped
        self.ctx.stopped.set()
        if self.task is not None:
            self.task.cancel()


class _Watch:
    """One event stream of a workflow, reading only its STOPs, shared by the runtime's running steps."""

    def __init__(self, rt: Runtime, workflow: str, after: int) -> None:
        self.rt = rt
        self.workflow = workflow
        self.start_after = after
        self.subs: set[_Sub] = set()
        self.stops: list[tuple[int, dict]] = []
        self.connected = asyncio.Event()
        self.close_handle: Optional[asyncio.TimerHandle] = None
        self.task = asyncio.ensure_future(self._run())

    def close(self) -> None:
        if not self.subs:
            self.task.cancel()
            if self.rt._watches.get(self.workflow) is self:
                del self.rt._watches[self.workflow]

    async def _run(self) -> None:
        rt = self.rt
        try:
            async for e in rt.client.events(self.workflow, self.start_after, kinds=("STOP",),
                                             on_connect=lambda _: self.connected.set(),
                                             on_disconnect=lambda _: self.connected.clear()):
                st = e.statement
                if len(self.stops) >= 4096:
                    del self.stops[:2048]
                self.stops.append((e.index, st))
                if st.get("takeover_to") and st["takeover_to"] == rt.name:
                    await _call(rt.hooks.on_takeover, st, e.index)
                for sub in list(self.subs):
                    await sub.deliver(st, e.index)
        except asyncio.CancelledError:
            raise
        except Exception:
            pass  # an answer that does not verify ends the watch: steps not yet run will not run
        finally:
            self.connected.clear()
            if rt._watches.get(self.workflow) is self:
                del rt._watches[self.workflow]
