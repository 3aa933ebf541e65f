"""A small MCP server (the MCP Python SDK's MCPServer, over stdio) for the integration test:
it appends what it is asked to write to the file named by $MCP_TEST_OUT."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("custody-test")


@server.tool()
def write_note(name: str, text: str) -> str:
    """Writes a note."""
    with open(os.environ["MCP_TEST_OUT"], "a") as f:
        f.write(f"{name}={text}\n")
    return f"wrote {name}"


@server.tool()
def fail_note(name: str) -> str:
    """Always fails."""
    raise RuntimeError("disk full")


@server.tool()
def list_notes() -> str:
    """Lists nothing, ungated."""
    return "none"


if __name__ == "__main__":
    server.run("stdio")
