"""A small MCP server (the MCP Python SDK's MCPServer, over stdio) for mcp_example.py."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")
NOTES: dict[str, str] = {}


@server.tool()
def write_note(name: str, text: str) -> str:
    """Writes a note."""
    NOTES[name] = text
    return f"wrote {name}"


if __name__ == "__main__":
    server.run("stdio")
