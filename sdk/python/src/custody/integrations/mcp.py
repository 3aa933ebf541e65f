"""custody for the MCP Python SDK: a client session whose ``call_tool`` is gated.

    from custody.integrations.mcp import GatedSession
    async with ClientSession(read, write) as session:
        await session.initialize()
        gated = GatedSession(session, gate)
        result = await gated.call_tool("write_file", {"path": "/notes.txt", "content": "hi"})

A gated call is sent to the server only after its pending receipt is
durable and verified (and, when held, approved: the call waits). A refused
call never reaches the server: it is answered locally as a
``CallToolResult`` with ``isError`` set and a text starting with the reason
code, as the Go gate answers. A result with ``isError`` is recorded as a
failure outcome; its SHA-256 goes into the outcome's evidence_refs. A STOP
cancels a call in flight. Everything else is the wrapped session's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

from mcp import ClientSession, types

from ..canonical import canonicalize
from ..runtime import Outcome, StepContext
from .gate import Refusal, ToolGate

__all__ = ["GatedSession", "ToolGate", "refusal_result"]


def refusal_result(r: Refusal) -> types.CallToolResult:
    """The tool result a refused call is answered with (isError, text starting with the reason code)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=r.text)], is_error=True)


def _evidence(result: Any) -> str:
    try:
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    except Exception:
        body = repr(result).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


class GatedSession:
    """Wraps a ``ClientSession``: ``call_tool`` goes through the gate, the rest is passed on."""

    def __init__(self, session: ClientSession, gate: ToolGate) -> None:
        self.session = session
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def call_tool(self, name: str, arguments: Optional[dict[str, Any]] = None, *args: Any, **kwargs: Any) -> types.CallToolResult:
        args_ = arguments or {}
        if name in self.gate.passthrough:
            return await self.session.call_tool(name, arguments, *args, **kwargs)
        got: dict[str, Any] = {}
        try:
            run = await self.gate.begin(name, args_)
            if run.held:
                await self.gate.wait_approved(run)

            async def body(ctx: StepContext) -> Outcome:
                res = await self.session.call_tool(name, arguments, *args, **kwargs)
                got["r"] = res
                failed = bool(getattr(res, "is_error", False))
                text = " ".join(getattr(c, "text", "") for c in getattr(res, "content", []) or [])[:2000]
                return Outcome(result="failure" if failed else "success", evidence=[_evidence(res)],
                               error=(text or "the tool reported an error") if failed else None)

            await self.gate.run(run, args_, body)
            return got["r"]
        except Refusal as r:
            return refusal_result(r)
