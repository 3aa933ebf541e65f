"""The OpenAI Agents SDK from PyPI, driven by its own ScriptedModel (no network,
no API key), with function tools gated by a real custody server."""

from __future__ import annotations

import asyncio

import pytest

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import custody  # noqa: E402
from custody.integrations.openai_agents import gate_tools  # noqa: E402
from custody.integrations import ToolGate  # noqa: E402
from harness import Ledger  # noqa: E402

set_tracing_disabled(True)  # no trace export: no network, no API key

BOOKED: list[dict] = []


@function_tool
def book_flight(account: str, flight: str, price_usd: int) -> str:
    """Books a flight on an airline account."""
    BOOKED.append({"account": account, "flight": flight, "price_usd": price_usd})
    return f"booked {flight} for {price_usd} USD"


@function_tool
def cancel_everything(account: str) -> str:
    """Cancels every booking."""
    BOOKED.clear()
    return "cancelled"


@function_tool
def failing_tool(account: str) -> str:
    """Always fails."""
    raise RuntimeError("the airline is down")


RULES = {
    "book_flight": {"capability": "purchase", "target": "airline/{account}", "reserve": {"budget_usd": 300}},
    "failing_tool": {"capability": "purchase", "target": "airline/{account}"},
}


async def setup(ledger: Ledger, client: custody.AsyncClient, workflow: str, **grant):
    alice = await ledger.principal("user:alice", client)
    agent_rt, gid = await ledger.agent(alice, "agent:booker", workflow, targets=["airline/acct_1"], capabilities=["purchase"],
                                       limits={"budget_usd": 1000}, **grant)
    return alice, agent_rt, gid


def tool_outputs(result) -> list[str]:
    return [str(i.output) for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"]


async def test_gated_call_is_receipted(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    BOOKED.clear()
    alice, rt, gid = await setup(ledger, aclient, "wf_oa")
    gate = ToolGate(rt, gid, RULES, )
    model = ScriptedModel([
        [function_call("book_flight", {"account": "acct_1", "flight": "LH400", "price_usd": 250}, call_id="c1")],
        [function_call("book_flight", {"account": "acct_2", "flight": "LH401", "price_usd": 250}, call_id="c2")],
        [function_call("cancel_everything", {"account": "acct_1"}, call_id="c3")],
        [function_call("failing_tool", {"account": "acct_1"}, call_id="c4")],
        [assistant_message("done")],
    ])
    agent = Agent(name="booker", model=model, tools=gate_tools(gate, [book_flight, cancel_everything, failing_tool]))
    result = await Runner.run(agent, "book LH400")
    assert result.final_output == "done"
    outs = tool_outputs(result)
    assert outs[0] == "booked LH400 for 250 USD"
    assert outs[1].startswith("out_of_scope: ")  # another account: the ledger denies, the tool never runs
    assert outs[2].startswith("unmapped_tool: ")
    assert outs[3].startswith("tool_error: ") and "the airline is down" in outs[3]
    assert BOOKED == [{"account": "acct_1", "flight": "LH400", "price_usd": 250}]
    wf = await aclient.workflow("wf_oa")
    receipts = [e.statement for e in wf if e.kind == "RECEIPT"]
    pend = [r for r in receipts if r["result"] == "pending"]
    assert [(r["action"], r["target"], r["reserve"]) for r in pend] == [("purchase", "airline/acct_1", {"budget_usd": 300}), ("purchase", "airline/acct_1", {"budget_usd": 0})]
    outcomes = [r["result"] for r in receipts if r["result"] != "pending"]
    assert outcomes == ["success", "failure"]
    denials = [e.statement for e in wf if e.kind == "DENIAL"]
    assert [d["reason_code"] for d in denials] == ["out_of_scope"]


async def test_stop_refuses_later_calls(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    BOOKED.clear()
    alice, rt, gid = await setup(ledger, aclient, "wf_oa_stop")
    await alice.stop(workflow="wf_oa_stop", reason="fraud suspected")
    gate = ToolGate(rt, gid, RULES, )
    model = ScriptedModel([
        [function_call("book_flight", {"account": "acct_1", "flight": "LH400", "price_usd": 250}, call_id="c1")],
        [assistant_message("stopped")],
    ])
    agent = Agent(name="booker", model=model, tools=gate_tools(gate, [book_flight]))
    result = await Runner.run(agent, "book")
    assert tool_outputs(result)[0].startswith("workflow_stopped: ")
    assert BOOKED == []
