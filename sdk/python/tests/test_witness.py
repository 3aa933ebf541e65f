"""Witness finality with real witnesses: two omniwitness processes (built by
scripts/witness.sh, run by sdk/typescript/test/witnessd through
internal/witnessproc) cosign a custody server's checkpoints (serve
--witness-policy --witness-finality). A client holding the policy accepts a
pending receipt only under a checkpoint both cosigned; a client whose policy
also needs a witness that never cosigns does not run the step, and closes
its logged pending receipt with a failure outcome."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import custody
from conftest import require
from harness import REPO, Ledger


@pytest.fixture
def witnessed():
    bin_dir = Path(os.environ.get("CUSTODY_WITNESS_BIN") or REPO / ".cache/bin")
    require(f"omniwitness in {bin_dir} (scripts/witness.sh builds it)", (bin_dir / "omniwitness").exists())
    d = Path(tempfile.mkdtemp(prefix="custody-py-witness-"))
    lg = Ledger(origin="example.com/py-witness", serve=False)
    helper = os.environ.get("CUSTODY_WITNESSD")
    cmd = [helper] if helper else ["go", "run", "./sdk/typescript/test/witnessd"]
    wd = subprocess.Popen([*cmd, "-origin", lg.origin, "-vkey", lg.log_key, "-dir", str(d), "-bin", str(bin_dir)], cwd=REPO,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert wd.stdout is not None
        policy = json.loads(wd.stdout.readline())["policy"]
        (d / "witnesses.policy").write_text(policy)
        lg.server.args += ["--witness-policy", str(d / "witnesses.policy"), "--witness-finality"]
        lg.server.start()
        yield lg, policy
    finally:
        lg.close()
        if wd.stdin:
            wd.stdin.close()
        wd.wait(30)
        shutil.rmtree(d, ignore_errors=True)


async def test_pending_receipt_stands_under_cosigned_checkpoint(witnessed) -> None:
    lg, policy = witnessed
    c = lg.aclient(witness_policy=policy)
    alice = await lg.principal("user:alice", c)
    agent, grant = await lg.agent(alice, "agent:w", "wf_w", limits={"budget": 10})
    ex = await agent.execute(custody.Step("s", "act", "t/x", grant, reserve={"budget": 1}), lambda ctx: None)
    assert ex.pending is not None and ex.pending.witnessed is not None and ex.pending.witnessed.satisfied
    assert sorted(s.witness for s in ex.pending.witnessed.signed) == ["w1", "w2"]

    # A policy that also needs a witness that never cosigns this log.
    stranger = custody.generate_key()
    kid = hashlib.sha256(b"witness9.test\n\x04" + stranger.public_key).digest()[:4].hex()
    vkey = "witness9.test+" + kid + "+" + base64.b64encode(bytes([4]) + stranger.public_key).decode()
    strict_policy = policy.replace("group both all w1 w2\nquorum both", f"witness w9 {vkey}\ngroup three all w1 w2 w9\nquorum three")
    assert strict_policy != policy
    strict = lg.aclient(witness_policy=strict_policy, witness_wait=1.5)
    picky = custody.Runtime(strict, agent.key, name="agent:w")
    ran = []
    with pytest.raises(custody.NotExecutedError) as ne:
        await picky.execute(custody.Step("s2", "act", "t/x", grant, reserve={"budget": 1}), lambda ctx: ran.append(1))
    assert ne.value.reason_code == "not_witnessed" and ran == []
    wf = await c.workflow("wf_w")
    last = wf[-1].statement
    assert last["type"] == "RECEIPT" and last["result"] == "failure" and last["error"].startswith("not_witnessed: ")
    await c.aclose()
    await strict.aclose()
