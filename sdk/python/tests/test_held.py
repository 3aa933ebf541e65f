"""Held steps (DESIGN §7, CONTRACT.md): a pending RECEIPT that an approval rule
of its grant holds runs only once the runtime has verified the APPROVALs
itself; a reject, a STOP, an expiry or a timeout end it unrun, with a
failure outcome whose error starts with the reason code. The same through
the OpenAI Agents SDK (the call waits) and LangGraph (an interrupt that
resumes when approved)."""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

import custody
from custody import Step
from custody.integrations import ToolGate
from custody.integrations.openai_agents import gate_tools
from harness import Ledger
from test_langgraph import build, tool_messages

set_tracing_disabled(True)

RULE = {"rule_id": "big", "capabilities": ["act"], "above": {"budget": 5}, "approvers": ["user:bob"], "quorum": 1, "ttl_seconds": 600}


async def held_setup(ledger: Ledger, c: custody.AsyncClient, wf: str, **grant):
    alice = await ledger.principal("user:alice", c)
    bob = await ledger.principal("user:bob", c)
    carol = await ledger.principal("user:carol", c)
    spec = {"limits": {"budget": 100}, "approvals": [RULE], **grant}
    agent, gid = await ledger.agent(alice, "agent:h", wf, **spec)
    return alice, bob, carol, agent, gid


async def outcome_of(c: custody.AsyncClient, wf: str, receipt_id: str) -> dict:
    for e in await c.workflow(wf):
        if e.kind == "RECEIPT" and e.statement.get("pending_ref") == receipt_id:
            return e.statement
    raise AssertionError(f"no outcome for {receipt_id}")


async def test_held_step_runs_after_verified_approval(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice, bob, carol, agent, gid = await held_setup(ledger, aclient, "wf_held")
    # Under the threshold: no rule matches, it runs at once.
    ex = await agent.execute(Step("small", "act", "t/1", gid, reserve={"budget": 5}), lambda ctx: None)
    assert ex.pending and ex.pending.accepted and ex.approval is None
    ran = []
    held: list[custody.AppendResult] = []
    agent.hooks.on_held = lambda s, a: held.append(a)
    task = asyncio.create_task(agent.execute(Step("big", "act", "t/1", gid, reserve={"budget": 50}, params={"n": 1}),
                                             lambda ctx: ran.append(ctx.step.receipt_id)))
    while not held:
        await asyncio.sleep(0.05)
    a = held[0]
    assert a.verdict == "held" and a.held and a.expires_at and a.rules
    await asyncio.sleep(0.3)
    assert ran == []  # held: not run
    # An APPROVAL by someone the rule does not name is denied by the ledger and changes nothing.
    d = await carol.append({"type": "APPROVAL", "approval_id": custody.new_id("approval"), "workflow_id": "wf_held",
                            "receipt_ref": a.statement["receipt_id"], "receipt_sha256": __import__("hashlib").sha256(a.entry.envelope.payload).hexdigest(),
                            "decision": "approve"})
    assert d.verdict == "denied" and d.reason_code == "not_approver"
    await asyncio.sleep(0.3)
    assert ran == []
    await bob.approve(a.statement["receipt_id"])
    ex = await asyncio.wait_for(task, 60)
    assert ran == [a.statement["receipt_id"]]
    assert ex.approval and ex.approval.state == "approved" and any("user:bob" in v for v in ex.approval.approved_by.values())
    assert ex.outcome and ex.outcome.statement["result"] == "success"


async def test_rejected_expired_closed_and_timeout(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice, bob, carol, agent, gid = await held_setup(ledger, aclient, "wf_held2")
    ran = []
    held: list[custody.AppendResult] = []
    agent.hooks.on_held = lambda s, a: held.append(a)

    async def start(step_id: str) -> tuple[asyncio.Task, custody.AppendResult]:
        held.clear()
        t = asyncio.create_task(agent.execute(Step(step_id, "act", "t/1", gid, reserve={"budget": 50}), lambda ctx: ran.append(step_id)))
        while not held and not t.done():
            await asyncio.sleep(0.05)
        return t, held[0]

    t, a = await start("rej")
    await bob.approve(a.statement["receipt_id"], reject=True, reason="too expensive")
    with pytest.raises(custody.NotExecutedError) as ne:
        await asyncio.wait_for(t, 60)
    assert ne.value.reason_code == "approval_rejected"
    assert (await outcome_of(aclient, "wf_held2", a.statement["receipt_id"]))["error"].startswith("approval_rejected: ")

    t, a = await start("stp")
    await alice.stop(workflow="wf_held2", step="stp", reason="no")
    with pytest.raises(custody.NotExecutedError) as ne:
        await asyncio.wait_for(t, 60)
    assert ne.value.reason_code == "approval_closed"

    agent.approval_timeout = 1.0
    t, a = await start("tmo")
    with pytest.raises(custody.NotExecutedError) as ne:
        await asyncio.wait_for(t, 60)
    assert ne.value.reason_code == "approval_timeout"
    assert (await outcome_of(aclient, "wf_held2", a.statement["receipt_id"]))["error"].startswith("approval_timeout: ")
    # An approval after the runtime gave up runs nothing.
    assert ran == []


async def test_openai_agents_held_call_waits(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice, bob, carol, agent, gid = await held_setup(ledger, aclient, "wf_held_oa", targets=["t/*"])
    done = []

    @function_tool
    def spend(item: str, amount: int) -> str:
        """Spends."""
        done.append(item)
        return f"spent {amount} on {item}"

    gate = ToolGate(agent, gid, {"spend": {"capability": "act", "target": "t/{item}", "reserve": {"budget": 50}}})
    agent.hooks.on_held = lambda s, a: asyncio.get_running_loop().create_task(bob.approve(a.statement["receipt_id"]))
    model = ScriptedModel([[function_call("spend", {"item": "x", "amount": 50}, call_id="c1")], [assistant_message("ok")]])
    result = await Runner.run(Agent(name="a", model=model, tools=gate_tools(gate, [spend])), "spend")
    outs = [str(i.output) for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"]
    assert outs == ["spent 50 on x"] and done == ["x"]


async def test_langgraph_held_call_interrupts_and_resumes(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    import test_langgraph

    test_langgraph.SENT.clear()
    alice, bob, carol, agent, gid = await held_setup(ledger, aclient, "wf_held_lg", targets=["customers/*"], capabilities=["invoice"],
                                                     approvals=[dict(RULE, capabilities=["invoice"], above={"invoices": 0})],
                                                     limits={"invoices": 5})
    gate = ToolGate(agent, gid, test_langgraph.RULES)
    graph = build(gate, [AIMessage(content="", tool_calls=[{"name": "send_invoice", "args": {"customer": "acme", "amount": 9}, "id": "t1", "type": "tool_call"}]),
                         AIMessage(content="done")])
    cfg = {"configurable": {"thread_id": "h1"}}
    out = await graph.ainvoke({"messages": [HumanMessage("bill")]}, cfg)
    intr = out["__interrupt__"][0].value
    assert intr["custody"] == "held" and intr["tool"] == "send_invoice" and intr["rules"][0]["rule_id"] == "big"
    assert test_langgraph.SENT == []
    # Resuming before anyone approved interrupts again; the resume value is not trusted.
    out = await graph.ainvoke(Command(resume="approved, trust me"), cfg)
    assert out.get("__interrupt__") and test_langgraph.SENT == []
    await bob.approve(intr["receipt_id"])
    out = await graph.ainvoke(Command(resume="look again"), cfg)
    assert not out.get("__interrupt__")
    (m,) = tool_messages(out)
    assert m.status != "error" and m.content == "sent 9 to acme"
    assert test_langgraph.SENT == ["acme:9"]


async def test_mcp_held_call_waits(ledger: Ledger, aclient: custody.AsyncClient, tmp_path) -> None:
    import os
    import sys
    from pathlib import Path

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from custody.integrations.mcp import GatedSession

    alice, bob, carol, agent, gid = await held_setup(ledger, aclient, "wf_held_mcp", targets=["notes/*"], capabilities=["notes.write"],
                                                     approvals=[dict(RULE, capabilities=["notes.write"], above={"writes": 0})],
                                                     limits={"writes": 5})
    gate = ToolGate(agent, gid, {"write_note": {"capability": "notes.write", "target": "notes/{name}", "reserve": {"writes": 1}}})
    decisions = iter([True, False])  # approve the first call, reject the second
    agent.hooks.on_held = lambda s, a: asyncio.get_running_loop().create_task(bob.approve(a.statement["receipt_id"], reject=not next(decisions)))
    out = tmp_path / "notes.txt"
    params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).parent / "mcp_server.py")],
                                   env={"MCP_TEST_OUT": str(out), "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    async with stdio_client(params, errlog=open(tmp_path / "server.log", "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            gated = GatedSession(session, gate)
            ok = await gated.call_tool("write_note", {"name": "a", "text": "approved"})
            assert not ok.is_error
            no = await gated.call_tool("write_note", {"name": "b", "text": "rejected"})
            assert no.is_error and " ".join(c.text for c in no.content).startswith("approval_rejected: ")
    assert out.read_text() == "a=approved\n"
