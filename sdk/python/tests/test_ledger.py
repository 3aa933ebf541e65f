"""The SDK against a real `custody serve` on loopback: appends verified against
the log key, denials, refusals, reads, proofs, bundles, event streams, and
the Runtime's gate (pending receipt first, STOP cancels, outcome always)."""

from __future__ import annotations

import asyncio
import json

import pytest

import custody
from custody import Outcome, Step
from harness import Ledger


def test_sync_client_append_and_reads(ledger: Ledger) -> None:
    c = ledger.client()
    key = custody.generate_key()
    st = {"type": "PRINCIPAL", "principal_id": "p_alice", "op": "enroll", "name": "user:alice", "public_key": key.public_key_base64,
          "timestamp": custody.format_time(), "log": ledger.origin, "actor": ledger.info["admin_name"],
          "seq": c.key_seq(ledger.admin_key.key_id)["next_seq"]}
    env = custody.sign_statement(st, ledger.admin_key)
    a = c.append(env)
    assert a.verdict == "accepted" and a.accepted and a.index >= 1
    assert a.statement["principal_id"] == "p_alice"
    again = c.append(custody.envelope_bytes(env))
    assert again.duplicate and again.index == a.index
    e = c.entry(a.index)
    assert e.kind == "PRINCIPAL" and e.statement == st
    assert c.statement("p_alice").index == a.index
    cp, text = c.head()
    assert cp.size == a.index + 1
    inc = c.inclusion(a.index)
    assert inc["index"] == a.index
    assert c.prove_consistency(a.checkpoint_text).size >= a.checkpoint.size
    assert c.log()["origin"] == ledger.origin
    assert c.verify_bundle("p_alice").valid
    c.close()


def test_denial_is_verified(ledger: Ledger) -> None:
    c = ledger.client()
    key = custody.generate_key()  # not bound: the ledger refuses without logging
    st = {"type": "STOP", "request_id": "stop_x", "workflow_id": "wf", "stop_scope": "chain", "takeover_mode": "human", "reason": "x",
          "timestamp": custody.format_time(), "log": ledger.origin, "actor": "user:nobody", "seq": 1}
    with pytest.raises(custody.RefusedError) as r:
        c.append(custody.sign_statement(st, key))
    assert r.value.reason_code
    # A statement by the admin the ledger denies: a wrong seq is logged as a DENIAL, verified.
    st2 = {"type": "PRINCIPAL", "principal_id": "p_bob", "op": "enroll", "name": "user:bob", "public_key": key.public_key_base64,
           "timestamp": custody.format_time(), "log": ledger.origin, "actor": ledger.info["admin_name"], "seq": 99}
    a = c.append(custody.sign_statement(st2, ledger.admin_key))
    assert a.verdict == "denied" and a.reason_code == "seq_mismatch"
    assert a.entry.statement["type"] == "DENIAL"
    c.close()


def test_client_refuses_a_wrong_log_key(ledger: Ledger) -> None:
    other = custody.generate_key()
    wrong = custody.verifier_key_of(ledger.origin, other.public_key)
    c = custody.Client(ledger.url, log_key=wrong)
    with pytest.raises(custody.UnverifiedError):
        c.head()
    st = {"type": "PRINCIPAL", "principal_id": "p_c", "op": "enroll", "name": "user:c", "public_key": other.public_key_base64,
          "timestamp": custody.format_time(), "log": ledger.origin, "actor": ledger.info["admin_name"], "seq": 2}
    with pytest.raises(custody.UnverifiedError):
        c.append(custody.sign_statement(st, ledger.admin_key))
    c.close()


async def test_runtime_gates_a_step(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice = await ledger.principal("user:alice", aclient)
    agent, grant = await ledger.agent(alice, "agent:a", "wf_gate", limits={"budget": 100})
    seen: list[str] = []

    async def step(ctx: custody.StepContext) -> Outcome:
        # The pending receipt is durable and verified before the step runs.
        e = await aclient.statement(ctx.pending.statement["receipt_id"])
        seen.append(e.statement["result"])
        return Outcome(consumed={"budget": 7}, side_effects={"order": "o-1"})

    ex = await agent.execute(Step("s1", "act", "t/1", grant, reserve={"budget": 10}, params={"amount": 7}), step)
    assert seen == ["pending"] and ex.ran
    assert ex.pending and ex.pending.statement["params_sha256"] == custody.params_sha256({"amount": 7})
    assert ex.outcome and ex.outcome.statement["result"] == "success" and ex.outcome.statement["consumed"] == {"budget": 7}
    assert ex.outcome.statement["pending_ref"] == ex.pending.statement["receipt_id"]

    # A step whose pending receipt is denied never runs.
    ran = []
    with pytest.raises(custody.NotExecutedError) as ne:
        await agent.execute(Step("s2", "act", "elsewhere/1", grant, reserve={"budget": 1}), lambda ctx: ran.append(1))
    assert not ran and ne.value.reason_code == "out_of_scope"

    # A step that raises records a failure outcome, then raises.
    async def boom(ctx: custody.StepContext) -> None:
        raise RuntimeError("card declined")

    with pytest.raises(RuntimeError):
        await agent.execute(Step("s3", "act", "t/3", grant, reserve={"budget": 1}), boom)
    wf = await aclient.workflow("wf_gate")
    outcomes = [e.statement for e in wf if e.kind == "RECEIPT" and e.statement["result"] != "pending"]
    assert outcomes[-1]["result"] == "failure" and outcomes[-1]["error"] == "card declined"


async def test_stop_cancels_a_running_step(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice = await ledger.principal("user:alice", aclient)
    agent, grant = await ledger.agent(alice, "agent:s", "wf_stop")
    started = asyncio.Event()
    cancelled = []

    async def long_step(ctx: custody.StepContext) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    run = asyncio.create_task(agent.execute(Step("s1", "act", "t/1", grant), long_step))
    await asyncio.wait_for(started.wait(), 20)
    await alice.stop(workflow="wf_stop", reason="halt")
    with pytest.raises(custody.StoppedError):
        await asyncio.wait_for(run, 30)
    assert cancelled == [True]
    wf = await aclient.workflow("wf_stop")
    last = wf[-1].statement
    assert last["type"] == "RECEIPT" and last["result"] == "failure" and "stopped" in last["error"]


async def test_events_resume_across_a_restart(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice = await ledger.principal("user:alice", aclient)
    agent, grant = await ledger.agent(alice, "agent:e", "wf_ev")
    got: list[int] = []

    async def follow() -> None:
        async for e in aclient.events("wf_ev"):
            got.append(e.index)
            if len(got) == 3:
                return

    t = asyncio.create_task(follow())
    await agent.receipt({"step_id": "s1", "action": "act", "target": "t/1", "authorization_ref": grant, "result": "pending"})
    ledger.restart()
    await agent.receipt({"step_id": "s2", "action": "act", "target": "t/2", "authorization_ref": grant, "result": "pending"})
    await asyncio.wait_for(t, 30)
    assert got == sorted(set(got)) and len(got) == 3
    assert [e.index for e in await aclient.workflow("wf_ev")] == got


async def test_runtime_refuses_without_a_ledger(ledger: Ledger) -> None:
    c = custody.AsyncClient(ledger.url, log_key=ledger.log_key, retries=1, timeout=2)
    alice = await ledger.principal("user:alice", c)
    agent, grant = await ledger.agent(alice, "agent:x", "wf_down")
    ledger.server.stop()
    ran = []
    with pytest.raises(custody.NotExecutedError) as ne:
        await agent.execute(Step("s1", "act", "t/1", grant, scope_hash="0" * 64, workflow="wf_down"), lambda ctx: ran.append(1))
    assert not ran and ne.value.reason_code == "ledger_unavailable"
    await c.aclose()


async def test_sync_client_events(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice = await ledger.principal("user:alice", aclient)
    agent, grant = await ledger.agent(alice, "agent:sync", "wf_sync")
    await agent.receipt({"step_id": "s1", "action": "act", "target": "t/1", "authorization_ref": grant, "result": "pending"})
    c = ledger.client()
    got = []
    for e in c.events("wf_sync", stop=lambda: len(got) >= 2):
        got.append(e.kind)
        if len(got) == 2:
            break
    assert got == ["CONFIRM", "RECEIPT"]
    assert [e.kind for e in c.workflow("wf_sync")] == got
    c.close()


async def test_concurrent_appends_go_in_batches(ledger: Ledger, aclient: custody.AsyncClient) -> None:
    alice = await ledger.principal("user:alice", aclient)
    agent, grant = await ledger.agent(alice, "agent:b", "wf_batch")
    await agent.receipt({"step_id": "warm", "action": "act", "target": "t/0", "authorization_ref": grant, "result": "pending"})
    docs = [{"step_id": f"s{i}", "action": "act", "target": "t/x" if i != 7 else "elsewhere/x", "authorization_ref": grant,
             "result": "pending"} for i in range(40)]
    answers = await asyncio.gather(*(agent.receipt(d) for d in docs))
    assert [a.verdict for a in answers] == ["accepted" if i != 7 else "denied" for i in range(40)]
    assert answers[7].reason_code == "out_of_scope"
    for d, a in zip(docs, answers):
        if a.accepted:
            assert a.statement["step_id"] == d["step_id"]
    wf = await aclient.workflow("wf_batch")
    assert sum(1 for e in wf if e.kind == "DENIAL") == 1  # the one denial; no seq_mismatch for the statements after it
    seqs = [e.statement["seq"] for e in wf if e.kind == "RECEIPT"]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == 40
