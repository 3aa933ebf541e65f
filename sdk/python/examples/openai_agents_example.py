"""An OpenAI Agents SDK agent whose function tool is gated by custody.

Every call of book_flight is a receipted step under the grant: the tool runs
only after its pending receipt is durable and verified (a held call waits
for approval); a refused call reaches the model as a tool output starting
with the reason code. The grant must allow capability "purchase" on
"airline/acct_1" with a budget_usd limit.

The model here is the SDK's own ScriptedModel, so the example runs with no
API key; drop `model=` to use a real model.

    python examples/openai_agents_example.py
"""

import asyncio

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from custody.integrations import ToolGate
from custody.integrations.openai_agents import gate_tools
from _env import runtime


@function_tool
def book_flight(account: str, flight: str, price_usd: int) -> str:
    """Books a flight on an airline account."""
    return f"booked {flight} on {account} for {price_usd} USD"


async def main() -> int:
    set_tracing_disabled(True)
    rt, grant = runtime()
    gate = ToolGate(rt, grant, {"book_flight": {"capability": "purchase", "target": "airline/{account}", "reserve": {"budget_usd": 400}}})
    model = ScriptedModel([
        [function_call("book_flight", {"account": "acct_1", "flight": "LH400", "price_usd": 380}, call_id="call_1")],
        [function_call("book_flight", {"account": "acct_9", "flight": "LH402", "price_usd": 380}, call_id="call_2")],
        [assistant_message("Booked LH400; acct_9 is not mine to use.")],
    ])
    agent = Agent(name="booker", instructions="Book flights.", model=model, tools=gate_tools(gate, [book_flight]))
    result = await Runner.run(agent, "Book LH400 on acct_1, and LH402 on acct_9.")
    for item in result.new_items:
        if getattr(item, "type", "") == "tool_call_output_item":
            print("tool:", item.output)
    print("agent:", result.final_output)
    await rt.client.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
