"""LangGraph and langchain-core from PyPI: a graph whose model is langchain-core's
GenericFakeChatModel (scripted, no network) and whose tools run in custody's
ToolNode against a real custody server."""

from __future__ import annotations

from typing import Annotated, Any, Iterator

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

import custody
from custody.integrations import ToolGate
from custody.integrations.langgraph import custody_tool_node
from harness import Ledger

SENT: list[str] = []


@tool
def send_invoice(customer: str, amount: int) -> str:
    """Sends an invoice to a customer."""
    SENT.append(f"{customer}:{amount}")
    return f"sent {amount} to {customer}"


@tool
def broken(customer: str) -> str:
    """Always fails."""
    raise ValueError("mail server down")


RULES = {
    "send_invoice": {"capability": "invoice", "target": "customers/{customer}", "reserve": {"invoices": 1}},
    "broken": {"capability": "invoice", "target": "customers/{customer}"},
}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def ai_calls(*calls: tuple[str, dict, str]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls])


def build(gate: ToolGate, script: list[AIMessage]) -> Any:
    model = GenericFakeChatModel(messages=iter(script))

    async def agent(state: State) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", custody_tool_node(gate, [send_invoice, broken], handle_tool_errors=True))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


def tool_messages(state: dict) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_tool_node_gates_calls(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    SENT.clear()
    alice = await ledger.principal("user:alice", aclient)
    rt, gid = await ledger.agent(alice, "agent:biller", "wf_lg", targets=["customers/acme"], capabilities=["invoice"], limits={"invoices": 5})
    gate = ToolGate(rt, gid, RULES, )
    graph = build(gate, [
        ai_calls(("send_invoice", {"customer": "acme", "amount": 100}, "t1"), ("send_invoice", {"customer": "globex", "amount": 5}, "t2")),
        ai_calls(("broken", {"customer": "acme"}, "t3"), ("delete_all", {}, "t4")),
        AIMessage(content="done"),
    ])
    out = await graph.ainvoke({"messages": [HumanMessage("bill acme")]}, {"configurable": {"thread_id": "1"}})
    msgs = {m.tool_call_id: m for m in tool_messages(out)}
    assert msgs["t1"].status != "error" and msgs["t1"].content == "sent 100 to acme"
    assert msgs["t2"].status == "error" and str(msgs["t2"].content).startswith("out_of_scope: ")
    assert msgs["t3"].status == "error" and "mail server down" in str(msgs["t3"].content)
    assert msgs["t4"].status == "error" and str(msgs["t4"].content).startswith("unmapped_tool: ")
    assert SENT == ["acme:100"]
    wf = await aclient.workflow("wf_lg")
    outcomes = sorted(e.statement["result"] for e in wf if e.kind == "RECEIPT" and e.statement["result"] != "pending")
    assert outcomes == ["failure", "success"]


async def test_stopped_workflow_refuses(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    SENT.clear()
    alice = await ledger.principal("user:alice", aclient)
    rt, gid = await ledger.agent(alice, "agent:biller", "wf_lg_stop", targets=["customers/acme"], capabilities=["invoice"], limits={"invoices": 5})
    await alice.stop(workflow="wf_lg_stop", reason="audit")
    gate = ToolGate(rt, gid, RULES, )
    graph = build(gate, [ai_calls(("send_invoice", {"customer": "acme", "amount": 1}, "t1")), AIMessage(content="ok")])
    out = await graph.ainvoke({"messages": [HumanMessage("bill")]}, {"configurable": {"thread_id": "1"}})
    (m,) = tool_messages(out)
    assert m.status == "error" and str(m.content).startswith("workflow_stopped: ")
    assert SENT == []
