"""The MCP Python SDK from PyPI: a stdio server (MCPServer) and a ClientSession wrapped
so that call_tool is gated by a real custody server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import custody
from custody.integrations import ToolGate
from custody.integrations.mcp import GatedSession
from harness import Ledger

RULES = {
    "write_note": {"capability": "notes.write", "target": "notes/{name}", "reserve": {"writes": 1}},
    "fail_note": {"capability": "notes.write", "target": "notes/{name}"},
}


def text(res) -> str:
    return " ".join(getattr(c, "text", "") for c in res.content)


async def test_call_tool_is_gated(ledger: Ledger, aclient: custody.AsyncClient, tmp_path: Path) -> None:
    alice = await ledger.principal("user:alice", aclient)
    rt, gid = await ledger.agent(alice, "agent:scribe", "wf_mcp", targets=["notes/*"], capabilities=["notes.write"], limits={"writes": 2})
    gate = ToolGate(rt, gid, RULES, passthrough=["list_notes"], )
    out = tmp_path / "notes.txt"
    params = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).parent / "mcp_server.py")],
                                   env={"MCP_TEST_OUT": str(out), "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    async with stdio_client(params, errlog=open(tmp_path / "server.log", "w")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            gated = GatedSession(session, gate)
            ok = await gated.call_tool("write_note", {"name": "a", "text": "hello"})
            assert not ok.is_error and text(ok) == "wrote a"
            bad = await gated.call_tool("write_note", {"name": "../etc", "text": "x"})
            assert bad.is_error and text(bad).startswith("bad_arguments: ")
            fail = await gated.call_tool("fail_note", {"name": "b"})
            assert fail.is_error
            over = await gated.call_tool("write_note", {"name": "c", "text": "3rd"})  # limit writes=2: 1 + 0 + 1 ok, then over
            assert not over.is_error
            over2 = await gated.call_tool("write_note", {"name": "d", "text": "4th"})
            assert over2.is_error and text(over2).startswith("limit_exceeded: ")
            unmapped = await gated.call_tool("delete_all", {})
            assert unmapped.is_error and text(unmapped).startswith("unmapped_tool: ")
            assert text(await gated.call_tool("list_notes", {})) == "none"
            tools = await gated.list_tools()  # the rest is the session's
            assert {t.name for t in tools.tools} >= {"write_note", "fail_note"}
    assert out.read_text() == "a=hello\nc=3rd\n"
    wf = await aclient.workflow("wf_mcp")
    outcomes = [e.statement for e in wf if e.kind == "RECEIPT" and e.statement["result"] != "pending"]
    assert [o["result"] for o in outcomes] == ["success", "failure", "success"]
    assert all(o["evidence_refs"][0].startswith("sha256:") for o in outcomes)
    assert "fail_note" in outcomes[1]["error"]  # the server reports its error text, recorded as the outcome's error
