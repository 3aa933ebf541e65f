"""custody inside agent frameworks: each module gates a framework's tool calls
with a :class:`~custody.Runtime` under one grant, mapped as the MCP gate maps
them (capability, target and step templates, reserve).

- :mod:`custody.integrations.openai_agents`: OpenAI Agents SDK function tools.
- :mod:`custody.integrations.langgraph`: a LangGraph ``ToolNode`` whose held steps become interrupts.
- :mod:`custody.integrations.mcp`: an MCP Python SDK ``ClientSession`` whose ``call_tool`` is gated.

The frameworks are optional dependencies: importing a module needs its framework.
"""

from .gate import Refusal, Template, ToolGate, ToolRule

__all__ = ["Refusal", "Template", "ToolGate", "ToolRule"]
