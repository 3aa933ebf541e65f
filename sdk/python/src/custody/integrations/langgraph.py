"""custody for LangGraph: a ``ToolNode`` whose tool calls are receipted steps under a grant.

    from custody.integrations.langgraph import custody_tool_node
    tools = custody_tool_node(gate, [book_flight])          # a langgraph.prebuilt.ToolNode
    graph.add_node("tools", tools)                          # compile with a checkpointer

A gated call runs only after its pending receipt is durable and verified. A
refused call becomes the call's ToolMessage with ``status="error"`` and a
text starting with the reason code; the tool never runs. A call a rule
holds for approval (DESIGN §7) becomes a LangGraph **interrupt** whose
value describes it (``{"custody": "held", "receipt_id", "tool", "args",
"expires_at", "rules"}``); resume the graph (``Command(resume=...)``) once
approvers have signed: the node checks the APPROVALs itself from a verified
bundle (the resume value is never trusted) and runs the call, interrupts
again while it is still held, or answers ``approval_rejected``,
``approval_expired`` or ``approval_closed``. The held call is remembered by
its tool call id in the gate, so resuming must happen in the same process.
Use the graph asynchronously (``ainvoke``/``astream``).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from langchain_core.messages import ToolMessage
from langgraph.prebuilt import ToolNode
from langgraph.types import interrupt

from ..errors import HTTPError, UnverifiedError
from ..runtime import NotExecutedError, Outcome, StepContext
from .gate import CODE_UNAVAILABLE, Refusal, ToolGate

__all__ = ["custody_tool_node", "gate_wrapper", "ToolGate"]


def gate_wrapper(gate: ToolGate) -> Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]:
    """An ``awrap_tool_call`` for ``ToolNode`` that gates each call."""

    async def awrap(request: Any, execute: Callable[[Any], Awaitable[Any]]) -> Any:
        call = request.tool_call
        name, args, cid = call["name"], call.get("args") or {}, call.get("id")

        def refused(text: str) -> ToolMessage:
            return ToolMessage(content=text, name=name, tool_call_id=cid, status="error")

        if name in gate.passthrough:
            return await execute(request)
        try:
            run = await gate.begin(name, args, cid)
            while run.held:
                try:
                    st = await run.approval()
                except (HTTPError, UnverifiedError, OSError) as e:
                    raise Refusal(CODE_UNAVAILABLE, f"could not verify the approval of {run.receipt_id}: {e}") from None
                if st.state == "approved":
                    break
                if st.state in ("rejected", "expired", "closed"):
                    gate.held.pop(cid, None)
                    try:
                        await run.abandon(f"approval_{st.state}", st.reason)
                    except NotExecutedError as e:
                        raise Refusal(e.reason_code, st.reason) from None
                # Held: hand the decision to a person. The resume value is not trusted; the loop looks again.
                interrupt({"custody": "held", "receipt_id": run.receipt_id, "tool": name, "args": args,
                           "tool_call_id": cid, "workflow_id": run.step.workflow, "index": run.index,
                           "expires_at": run.execution.pending.expires_at if run.execution.pending else "",
                           "rules": [{"grant": r.get("grant"), "rule_id": r.get("rule_id"), "approvers": r.get("approvers"),
                                      "quorum": r.get("quorum")} for r in st.rules]})
            got: dict[str, Any] = {}

            async def body(ctx: StepContext) -> Any:
                m = await execute(request)
                got["m"] = m
                if isinstance(m, ToolMessage) and m.status == "error":
                    return Outcome(result="failure", error=str(m.content)[:2000] or "the tool failed")
                return None

            await gate.run(run, args, body, cid)
            return got["m"]
        except Refusal as r:
            return refused(r.text)

    return awrap


def custody_tool_node(gate: ToolGate, tools: Sequence[Any], **kwargs: Any) -> ToolNode:
    """A ``ToolNode`` over tools whose calls go through the gate (kwargs go to ToolNode)."""
    return ToolNode(tools, awrap_tool_call=gate_wrapper(gate), **kwargs)
