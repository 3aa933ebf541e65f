"""An MCP client session (the MCP Python SDK) whose call_tool is gated by custody.

A call is sent to the MCP server only after its pending receipt is durable
and verified; a refused call is answered locally with isError and a text
starting with the reason code, and never reaches the server. The grant must
allow capability "notes.write" on "notes/*".

    python examples/mcp_example.py
"""

import asyncio
import sys
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from custody.integrations import ToolGate
from custody.integrations.mcp import GatedSession
from _env import runtime


async def main() -> int:
    rt, grant = runtime()
    gate = ToolGate(rt, grant, {"write_note": {"capability": "notes.write", "target": "notes/{name}"}})
    server = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).with_name("notes_server.py"))])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            gated = GatedSession(session, gate)
            for args in ({"name": "todo", "text": "buy milk"}, {"name": "../../etc/passwd", "text": "x"}):
                res = await gated.call_tool("write_note", args)
                print("error:" if res.is_error else "ok:", " ".join(getattr(c, "text", "") for c in res.content))
    await rt.client.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
