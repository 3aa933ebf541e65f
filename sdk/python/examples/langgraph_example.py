"""A LangGraph agent whose tools run in custody's ToolNode.

Each tool call is a receipted step under the grant; a refused call comes
back as an error ToolMessage starting with the reason code. A call a rule
holds for approval interrupts the graph: the example prints the interrupt
and resumes it once you press Enter (after approvers ran `custody approve
--receipt ID ...`); the node checks the APPROVALs itself before the call
runs. The grant must allow capability "invoice" on "customers/acme" with an
"invoices" limit.

The model is langchain-core's GenericFakeChatModel (scripted, no API key).

    python examples/langgraph_example.py
"""

import asyncio
from typing import Annotated

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from typing_extensions import TypedDict

from custody.integrations import ToolGate
from custody.integrations.langgraph import custody_tool_node
from _env import runtime


@tool
def send_invoice(customer: str, amount: int) -> str:
    """Sends an invoice to a customer."""
    return f"invoice of {amount} sent to {customer}"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


async def main() -> int:
    rt, grant = runtime()
    gate = ToolGate(rt, grant, {"send_invoice": {"capability": "invoice", "target": "customers/{customer}", "reserve": {"invoices": 1}}})
    model = GenericFakeChatModel(messages=iter([
        AIMessage(content="", tool_calls=[{"name": "send_invoice", "args": {"customer": "acme", "amount": 1200}, "id": "call_1", "type": "tool_call"}]),
        AIMessage(content="Invoice sent."),
    ]))

    async def agent(state: State) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    g = StateGraph(State)
    g.add_node("agent", agent)
    g.add_node("tools", custody_tool_node(gate, [send_invoice]))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    graph = g.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "invoice-1"}}
    out = await graph.ainvoke({"messages": [HumanMessage("Invoice acme for 1200.")]}, config)
    while out.get("__interrupt__"):
        held = out["__interrupt__"][0].value
        print(f"held for approval: receipt {held['receipt_id']} ({held['tool']} {held['args']}), until {held['expires_at']}")
        await asyncio.to_thread(input, "press Enter once it is approved (or rejected) ")
        out = await graph.ainvoke(Command(resume="look again"), config)
    for m in out["messages"]:
        if isinstance(m, ToolMessage):
            print("tool:", m.status, m.content)
    print("agent:", out["messages"][-1].content)
    await rt.client.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
