"""The framework-neutral part of the integrations: how a tool call becomes a
receipted step (the MCP gate's mapping, gate/config.go), and the refusal a
framework shows the model.

A tool in ``tools`` is gated: each call writes a pending RECEIPT with the
rule's capability (action), the target and step its templates give for the
call's arguments, the rule's reserve (limit keys in force on the grant's
chain that it does not name are reserved at 0) and, unless
``bind_params=False``, the SHA-256 of the call's arguments (params_sha256),
so an approval approves exactly this call. A tool in ``passthrough`` runs
ungated. Any other tool is refused (``unmapped_tool``).

Refusals reach the model as tool errors whose text starts with the reason
code: the ledger's (``out_of_scope``, ``limit_exceeded``,
``workflow_stopped``...) or the gate's own (``unmapped_tool``,
``bad_arguments``, ``ledger_unavailable``, ``approval_rejected``,
``approval_expired``, ``approval_closed``, ``approval_timeout``, ``stopped``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence, Union

from ..runtime import NotExecutedError, Outcome, Runtime, Step, StepContext, StepRun, StoppedError
from ..scope import identifier_problem

CODE_UNMAPPED = "unmapped_tool"
CODE_BAD_ARGUMENTS = "bad_arguments"
CODE_UNAVAILABLE = "ledger_unavailable"
CODE_TOOL_ERROR = "tool_error"


class Refusal(Exception):
    """A gated call that did not run; ``text`` (``"<code>: <message>"``) is what the model sees."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def text(self) -> str:
        return f"{self.code}: {self.message}"


_PLACEHOLDER = re.compile(r"[A-Za-z0-9_.-]+")


class Template:
    """A target or step template: literal identifier text with ``{arg}`` placeholders, each
    replaced by that argument's value (a string or an integer) with its leading '/'s dropped."""

    def __init__(self, src: str) -> None:
        if not src:
            raise ValueError("empty template")
        self.src = src
        self.parts: list[tuple[str, bool]] = []
        i = 0
        while i < len(src):
            o = src.find("{", i)
            c = src.find("}", i)
            if c >= 0 and (o < 0 or c < o):
                raise ValueError(f"template {src!r}: '}}' without '{{'")
            if o < 0:
                self.parts.append((src[i:], False))
                break
            if o > i:
                self.parts.append((src[i:o], False))
            c = src.find("}", o)
            if c < 0:
                raise ValueError(f"template {src!r}: '{{' without '}}'")
            name = src[o + 1 : c]
            if not _PLACEHOLDER.fullmatch(name):
                raise ValueError(f"template {src!r}: placeholder {{{name}}}: an argument name is [A-Za-z0-9_.-]+")
            self.parts.append((name, True))
            i = c + 1
        probe = "".join("x" if is_arg else lit for lit, is_arg in self.parts)
        prob = identifier_problem(probe)
        if prob:
            raise ValueError(f"template {src!r} can never make an identifier: {prob}")

    @property
    def args(self) -> list[str]:
        return [p for p, is_arg in self.parts if is_arg]

    def render(self, args: Mapping[str, Any]) -> str:
        out = []
        for p, is_arg in self.parts:
            if not is_arg:
                out.append(p)
                continue
            if p not in args:
                raise ValueError(f"argument {p!r} is missing")
            v = args[p]
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                raise ValueError(f"argument {p!r} is {type(v).__name__}; a template takes a string or an integer")
            out.append(str(v).lstrip("/"))
        s = "".join(out)
        prob = identifier_problem(s)
        if prob:
            raise ValueError(f"{s!r} {prob}")
        return s

    def __str__(self) -> str:
        return self.src


@dataclass
class ToolRule:
    """How one tool's calls become steps (the gate's ``tools`` entry)."""

    capability: str
    target: str
    step: str = ""
    reserve: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        prob = identifier_problem(self.capability)
        if prob:
            raise ValueError(f"capability {self.capability!r} {prob}")
        self._target = Template(self.target)
        self._step = Template(self.step) if self.step else None
        for k, v in self.reserve.items():
            if identifier_problem(k) or type(v) is not int or not 0 <= v <= (1 << 53) - 1:
                raise ValueError(f"reserve {k} = {v!r}: want an identifier key and 0..2^53-1")


class ToolGate:
    """Gates tool calls as steps of one grant, through one :class:`~custody.Runtime`.

    ``tools`` maps a tool name to a :class:`ToolRule` (or its dict:
    ``{"capability","target","step"?,"reserve"?}``). A held call waits for
    approval up to ``approval_timeout`` seconds (None: until its deadline).
    """

    def __init__(self, runtime: Runtime, grant: str, tools: Mapping[str, Union[ToolRule, Mapping[str, Any]]], *,
                 passthrough: Sequence[str] = (), bind_params: bool = True, approval_timeout: Optional[float] = None) -> None:
        self.runtime = runtime
        self.grant = grant
        self.rules: dict[str, ToolRule] = {}
        for name, r in tools.items():
            try:
                self.rules[name] = r if isinstance(r, ToolRule) else ToolRule(**dict(r))
            except (TypeError, ValueError) as e:
                raise ValueError(f"tool {name!r}: {e}") from None
        self.passthrough = set(passthrough)
        both = self.passthrough & set(self.rules)
        if both:
            raise ValueError(f"tools {sorted(both)} are both gated and passed through")
        self.bind_params = bind_params
        self.approval_timeout = approval_timeout
        self._counter = itertools.count(1)
        self._limits: Optional[set[str]] = None
        #: Held runs by tool call id, kept across a framework's interrupt and resume.
        self.held: dict[str, StepRun] = {}

    async def _limit_keys(self) -> set[str]:
        if self._limits is None:
            keys: set[str] = set()
            gid: Optional[str] = self.grant
            while gid:
                g = await self.runtime.grant_of(gid)
                keys |= set(g.get("limits") or {})
                gid = g.get("parent_ref")
            self._limits = keys
        return self._limits

    def gated(self, tool: str) -> bool:
        return tool in self.rules

    async def step_for(self, tool: str, args: Mapping[str, Any], call_id: Optional[str] = None) -> Step:
        """The step a call is (raises :class:`Refusal` for an unmapped tool or arguments that make no identifier)."""
        rule = self.rules.get(tool)
        if rule is None:
            raise Refusal(CODE_UNMAPPED, f"tool {tool!r} has no custody mapping and is not passed through")
        if not isinstance(args, Mapping):
            raise Refusal(CODE_BAD_ARGUMENTS, f"the arguments of {tool} are not a JSON object")
        try:
            target = rule._target.render(args)
            step = rule._step.render(args) if rule._step else f"{tool}/{next(self._counter)}"
        except ValueError as e:
            raise Refusal(CODE_BAD_ARGUMENTS, f"{tool}: {e}") from None
        try:
            limits = await self._limit_keys()
        except Exception as e:  # no grant to read: the ledger is not there
            raise Refusal(CODE_UNAVAILABLE, f"could not read grant {self.grant}: {e}") from None
        reserve = {k: 0 for k in limits}
        reserve.update(rule.reserve)
        params = dict(args) if self.bind_params and args else None
        return Step(step_id=step, action=rule.capability, target=target, auth=self.grant, reserve=reserve or None, params=params)

    async def begin(self, tool: str, args: Mapping[str, Any], call_id: Optional[str] = None) -> StepRun:
        """Writes the pending receipt of a call (or finds the held one of this call id)."""
        if call_id and call_id in self.held:
            return self.held[call_id]
        step = await self.step_for(tool, args, call_id)
        try:
            run = await self.runtime.begin(step)
        except NotExecutedError as e:
            raise Refusal(e.reason_code, str(e).split(": ", 1)[1]) from None
        if run.held and call_id:
            self.held[call_id] = run
        return run

    async def run(self, run: StepRun, args: Mapping[str, Any], invoke: Callable[[StepContext], Awaitable[Any]],
                  call_id: Optional[str] = None) -> Any:
        """Runs an accepted (or verified-approved) call; returns invoke's value. A STOP or a refusal
        raises :class:`Refusal`; the tool's own exception is re-raised after its failure outcome."""
        if call_id:
            self.held.pop(call_id, None)
        try:
            ex = await run.run(invoke, params=dict(args) if self.bind_params and args else None)
        except NotExecutedError as e:
            raise Refusal(e.reason_code, str(e).split(": ", 1)[1]) from None
        except StoppedError as e:
            raise Refusal("stopped", str(e)) from None
        return ex.value

    async def wait_approved(self, run: StepRun, call_id: Optional[str] = None) -> None:
        """Waits for a held call's approval (verified), or raises :class:`Refusal`."""
        try:
            await run.await_approval(self.approval_timeout)
        except NotExecutedError as e:
            if call_id:
                self.held.pop(call_id, None)
            raise Refusal(e.reason_code, str(e).split(": ", 1)[1]) from None

    async def call(self, tool: str, args: Mapping[str, Any], invoke: Callable[[], Awaitable[Any]], call_id: Optional[str] = None) -> Any:
        """Gates one call: refuses (:class:`Refusal`), or runs ``invoke()`` once the pending receipt is
        durable and verified (and, when held, approved) and returns its value."""
        if tool in self.passthrough:
            return await invoke()
        run = await self.begin(tool, args, call_id)
        if run.held:
            await self.wait_approved(run, call_id)

        async def body(ctx: StepContext) -> Any:
            return await invoke()

        return await self.run(run, args, body, call_id)


def outcome_of_error(message: str) -> Outcome:
    return Outcome(result="failure", error=message[:2000] or "the tool failed")
