"""custody for the OpenAI Agents SDK (``openai-agents``): function tools whose
every call is a receipted step under a grant.

    from custody.integrations.openai_agents import gate_tools
    gate = ToolGate(runtime, grant, {"book_flight": {"capability": "purchase", "target": "airline/{account}"}})
    agent = Agent(name="booker", tools=gate_tools(gate, [book_flight]))

A gated call runs only after its pending receipt is durable and verified
(and, when a rule holds it, approved: the call waits); a refused call
reaches the model as the tool's output, a text starting with the reason
code (``out_of_scope: ...``), and the tool never runs. A STOP cancels a
call in flight. The tool's own exception is recorded as a failure outcome
and shown to the model as ``tool_error: ...``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from agents import FunctionTool, Tool
from agents.tool_context import ToolContext

from .gate import CODE_BAD_ARGUMENTS, CODE_TOOL_ERROR, Refusal, ToolGate

__all__ = ["gate_tool", "gate_tools", "ToolGate"]


def gate_tool(gate: ToolGate, tool: FunctionTool) -> FunctionTool:
    """A copy of a function tool whose calls go through the gate."""
    # The decorated tool's raw invoker raises the tool's own errors (its public
    # invoker turns them into text), so that the gate can record a failure.
    raw = getattr(tool.on_invoke_tool, "_invoke_tool_impl", tool.on_invoke_tool)

    async def on_invoke_tool(ctx: ToolContext[Any], input: str) -> Any:
        try:
            args = json.loads(input) if input else {}
        except ValueError as e:
            return Refusal(CODE_BAD_ARGUMENTS, f"{tool.name}: the arguments are not JSON: {e}").text
        call_id = getattr(ctx, "tool_call_id", None)
        try:
            return await gate.call(tool.name, args, lambda: raw(ctx, input), call_id=call_id)
        except Refusal as r:
            return r.text
        except Exception as e:  # the tool's own failure, already recorded as a failure outcome
            return f"{CODE_TOOL_ERROR}: {e}"

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def gate_tools(gate: ToolGate, tools: Sequence[Tool]) -> list[Tool]:
    """Every function tool gated (or passed through, as the gate says); other tools are refused,
    since the gate cannot see their calls."""
    out: list[Tool] = []
    for t in tools:
        if not isinstance(t, FunctionTool):
            raise TypeError(f"tool {getattr(t, 'name', t)!r} is not a FunctionTool: custody can gate function tools only")
        if t.name in gate.passthrough:
            out.append(t)
        else:
            out.append(gate_tool(gate, t))
    return out
