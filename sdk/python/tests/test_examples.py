"""Every example under examples/ runs against a real server, with a grant made for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import custody
from harness import Ledger

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

CASES = {
    "gated_step.py": ({"targets": ["airline_portal/*"], "capabilities": ["purchase"], "limits": {"budget_usd": 1000}},
                      ["done; outcome at index"]),
    "openai_agents_example.py": ({"targets": ["airline/acct_1"], "capabilities": ["purchase"], "limits": {"budget_usd": 1000}},
                                 ["tool: booked LH400 on acct_1 for 380 USD", "tool: out_of_scope: "]),
    "langgraph_example.py": ({"targets": ["customers/acme"], "capabilities": ["invoice"], "limits": {"invoices": 3}},
                             ["tool: success invoice of 1200 sent to acme"]),
    "mcp_example.py": ({"targets": ["notes/*"], "capabilities": ["notes.write"]}, ["ok: wrote todo", "error: bad_arguments: "]),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_example_runs(name: str, ledger: Ledger, aclient: custody.AsyncClient, tmp_path: Path) -> None:
    grant, want = CASES[name]
    alice = await ledger.principal("user:alice", aclient)
    rt, gid = await ledger.agent(alice, "agent:example", "wf_" + name.split(".")[0], ttl_seconds=600, **grant)
    key = tmp_path / "agent.key"
    key.write_bytes(rt.key.to_pem())
    env = dict(os.environ, CUSTODY_URL=ledger.url, CUSTODY_LOG_KEY=ledger.log_key, CUSTODY_AGENT_KEY=str(key),
               CUSTODY_AGENT_NAME="agent:example", CUSTODY_GRANT=gid)
    r = subprocess.run([sys.executable, str(EXAMPLES / name)], env=env, capture_output=True, text=True, timeout=120, cwd=EXAMPLES,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    for w in want:
        assert w in r.stdout, r.stdout + r.stderr
