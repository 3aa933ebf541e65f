"""A Runtime given two server URLs of one log in PostgreSQL (two `custody serve
--store` processes, each with its own HOME and XDG folders, as on separate
machines) keeps its steps fail-closed through a leader kill: no step runs
before its pending receipt is durable and verified, every step's outcome is
recorded (through the follower once it takes the lease), and with both
servers dead a step never runs. A leader that is frozen (paused) does not
hold the clients' appends or reads until their timeout: they move to the
server that takes over.

Needs CUSTODY_TEST_PG (scripts/python.sh starts a throwaway cluster); it
skips without it on a dev machine, and fails in CI."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

import custody
from conftest import require
from harness import Server, run


@pytest.fixture
def pg_log():
    store = os.environ.get("CUSTODY_TEST_PG", "")
    require("CUSTODY_TEST_PG (a PostgreSQL cluster: scripts/python.sh starts one)", bool(store))
    d = Path(tempfile.mkdtemp(prefix="custody-py-pg-"))
    name = "py-" + os.urandom(4).hex()
    envs = []
    for who in ("init", "a", "b"):
        env = dict(os.environ, HOME=str(d / who / "home"), XDG_CONFIG_HOME=str(d / who / "config"))
        Path(env["HOME"]).mkdir(parents=True)
        envs.append(env)
    admin = d / "admin.key"
    run("key", "generate", "--out", str(admin), env=envs[0])
    info = json.loads(run("init", "--store", store, "--log", name, "--origin", f"example.com/{name}", "--admin-key", str(admin), "--json", env=envs[0]))
    servers = [Server(["--store", store, "--log", name, "--lease-ttl", "2s"], env=env) for env in envs[1:]]
    for s in servers:
        s.start()
    try:
        yield info, servers, name, custody.load_private_key(admin.read_bytes())
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(d, ignore_errors=True)


async def test_runtime_fails_closed_through_a_leader_kill(pg_log) -> None:
    info, servers, name, admin_key = pg_log
    leader = next(s for s in servers if any("role=leader" in line for line in s.log))
    follower = next(s for s in servers if s is not leader)
    urls = [f"{follower.url}/logs/{name}", f"{leader.url}/logs/{name}"]
    c = custody.AsyncClient(urls, log_key=info["verifier_key"], failover_wait=30)
    admin = custody.Runtime(c, admin_key, name=info["admin_name"])
    alice_key, agent_key = custody.generate_key(), custody.generate_key()
    await admin.append_or_raise({"type": "PRINCIPAL", "principal_id": "p_alice", "op": "enroll", "name": "user:alice",
                                 "public_key": alice_key.public_key_base64})
    assert c.url == urls[1], "the client follows the leader the follower named"
    alice = custody.Runtime(c, alice_key, name="user:alice")
    await alice.confirm(id="confirm_pg", workflow="wf_pg", grantee="agent:pg", grantee_key=agent_key.public_key,
                        targets=["t/*"], capabilities=["act"], limits={"budget": 10}, ttl_seconds=600, revocable=True)
    agent = custody.Runtime(c, agent_key, name="agent:pg")
    # Reads through a client of its own, any server.
    reader = custody.AsyncClient(list(reversed(urls)), log_key=info["verifier_key"])
    ran: list[str] = []

    async def step(ctx: custody.StepContext) -> None:
        # Before it runs, the pending receipt is in the log (read back, verified).
        e = await reader.statement(ctx.step.receipt_id or "")
        assert e.statement["result"] == "pending"
        ran.append(ctx.step.step_id)
        if ctx.step.step_id == "s2":
            leader.stop(signal.SIGKILL)  # the leader dies while the step runs: its outcome must still land

    await agent.execute(custody.Step("s1", "act", "t/x", "confirm_pg", reserve={"budget": 1}), step)
    ex2 = await agent.execute(custody.Step("s2", "act", "t/x", "confirm_pg", reserve={"budget": 1}), step)
    assert ex2.outcome is not None and ex2.outcome.accepted
    ex3 = await agent.execute(custody.Step("s3", "act", "t/x", "confirm_pg", reserve={"budget": 1}), step)
    assert ex3.outcome is not None and ex3.outcome.accepted
    assert c.url == urls[0]
    assert ran == ["s1", "s2", "s3"]
    wf = await reader.workflow("wf_pg")
    receipts = [e.statement for e in wf if e.kind == "RECEIPT"]
    pend = {r["receipt_id"] for r in receipts if r["result"] == "pending"}
    done = {r["pending_ref"] for r in receipts if r["result"] != "pending"}
    assert len(pend) == 3 and pend == done

    # Both servers gone: the step never runs.
    follower.stop(signal.SIGKILL)
    quick = custody.AsyncClient(urls, log_key=info["verifier_key"], failover_wait=2, retries=1, timeout=2)
    agent2 = custody.Runtime(quick, agent_key, name="agent:pg")
    with pytest.raises(custody.NotExecutedError) as ne:
        await agent2.execute(custody.Step("s4", "act", "t/x", "confirm_pg", reserve={"budget": 1}, workflow="wf_pg", scope_hash="0" * 64), step)
    assert ne.value.reason_code == "ledger_unavailable"
    assert ran == ["s1", "s2", "s3"]
    for cl in (c, reader, quick):
        await cl.aclose()


def _freeze(proc) -> None:
    """SIGSTOP proc and wait until every one of its threads has stopped:
    kill returns before they have, and on a loaded machine a thread still
    running can answer a request sent just after the signal."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for task in Path(f"/proc/{proc.pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # a thread that ended
            states.append(stat[stat.rindex(")") + 2])
        if states and all(st in "Tt" for st in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {proc.pid} did not stop within 10 s of SIGSTOP")


def _enroll(admin_key: custody.PrivateKey, admin_name: str, origin: str, seq: int, who: str) -> bytes:
    st = {"type": "PRINCIPAL", "principal_id": "p_" + who, "op": "enroll", "name": "user:" + who,
          "public_key": custody.generate_key().public_key_base64, "timestamp": custody.format_time(),
          "log": origin, "actor": admin_name, "seq": seq}
    return custody.envelope_bytes(custody.sign_statement(st, admin_key))


async def test_a_frozen_leader_does_not_hold_the_clients(pg_log) -> None:
    """The leader is paused (SIGSTOP) and an AsyncClient, then a Client, each
    given the leader's URL first, appends: each waits stall_wait, asks the
    other server who leads, and goes there once it has taken the lease (2 s),
    instead of waiting out its 30 s timeout on the frozen server."""
    info, servers, name, admin_key = pg_log
    leader = next(s for s in servers if any("role=leader" in line for line in s.log))
    follower = next(s for s in servers if s is not leader)
    urls = [f"{leader.url}/logs/{name}", f"{follower.url}/logs/{name}"]
    ac = custody.AsyncClient(urls, log_key=info["verifier_key"], timeout=30)
    sc = custody.Client(urls, log_key=info["verifier_key"], timeout=30)
    seq = (await ac.key_seq(admin_key.key_id))["next_seq"]
    assert leader.proc is not None
    _freeze(leader.proc)
    try:
        t0 = time.monotonic()
        r = await ac.append(_enroll(admin_key, info["admin_name"], ac.origin, seq, "frozen_async"))
        took_async = time.monotonic() - t0
        assert r.accepted and ac.url == urls[1]
        t0 = time.monotonic()
        r = await asyncio.to_thread(sc.append, _enroll(admin_key, info["admin_name"], sc.origin, seq + 1, "frozen_sync"))
        took_sync = time.monotonic() - t0
        assert r.accepted and sc.url == urls[1]
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    assert took_async < 10, f"the AsyncClient waited {took_async:.1f} s on the frozen leader"
    assert took_sync < 10, f"the Client waited {took_sync:.1f} s on the frozen leader"
    await ac.aclose()
    sc.close()


async def test_a_frozen_leader_does_not_hold_reads(pg_log) -> None:
    """The leader is paused (SIGSTOP) and reads of each kind (entry,
    statement, bundle, verified bundle, workflow, log info, approval) are
    sent, each by a fresh AsyncClient and a fresh Client given the leader's
    URL first: each waits stall_wait, finds the leader's own /readyz silent
    too, and is answered by the other server, which takes over the lease,
    instead of waiting out its 30 s timeout on the frozen one."""
    info, servers, name, admin_key = pg_log
    leader = next(s for s in servers if any("role=leader" in line for line in s.log))
    follower = next(s for s in servers if s is not leader)
    urls = [f"{leader.url}/logs/{name}", f"{follower.url}/logs/{name}"]
    key = info["verifier_key"]
    setup = custody.AsyncClient(urls, log_key=key)
    admin = custody.Runtime(setup, admin_key, name=info["admin_name"])
    alice_key, agent_key = custody.generate_key(), custody.generate_key()
    await admin.append_or_raise({"type": "PRINCIPAL", "principal_id": "p_alice", "op": "enroll", "name": "user:alice",
                                 "public_key": alice_key.public_key_base64})
    alice = custody.Runtime(setup, alice_key, name="user:alice")
    confirm = await alice.confirm(id="confirm_read", workflow="wf_read", grantee="agent:read", grantee_key=agent_key.public_key,
                                  targets=["t/*"], capabilities=["act"], ttl_seconds=600)
    await setup.aclose()

    async def answer_async(read, c):
        try:
            return await read(c)
        except custody.HTTPError as e:  # the server's answer, as an error (asserted below)
            return e

    def answer_sync(read, c):
        try:
            return read(c)
        except custody.HTTPError as e:
            return e

    reads = {
        "entry": (lambda c: c.entry(confirm.index), lambda r: r.statement["confirm_id"] == "confirm_read"),
        "statement": (lambda c: c.statement("confirm_read"), lambda r: r.index == confirm.index),
        "bundle": (lambda c: c.bundle("confirm_read"), lambda r: r.get("subject") == confirm.index),
        "verify_bundle": (lambda c: c.verify_bundle("confirm_read"), lambda r: r.valid),
        "workflow": (lambda c: c.workflow("wf_read"), lambda r: [e.index for e in r] == [confirm.index]),
        "log": (lambda c: c.log(), lambda r: r["origin"] == info["origin"]),
        # A receipt never held: the server's 404 is still its answer.
        "approval": (lambda c: c.approval("r_never_held"), lambda r: isinstance(r, custody.HTTPError) and r.status == 404),
    }
    took: dict[str, float] = {}
    assert leader.proc is not None
    _freeze(leader.proc)
    try:
        for what, (read, good) in reads.items():
            ac = custody.AsyncClient(urls, log_key=key, timeout=30)
            t0 = time.monotonic()
            r = await answer_async(read, ac)
            took["async " + what] = time.monotonic() - t0
            assert took["async " + what] < 10, f"async {what}: held {took['async ' + what]:.1f} s by the frozen leader"
            assert good(r), f"async {what}: {r}"
            assert ac.url == urls[1], f"async {what}: answered by {ac.url}, the frozen leader (its log: {leader.log[-5:]}; the other's: {follower.log[-5:]})"
            await ac.aclose()
            sc = custody.Client(urls, log_key=key, timeout=30)
            t0 = time.monotonic()
            r = await asyncio.to_thread(answer_sync, read, sc)
            took["sync " + what] = time.monotonic() - t0
            assert took["sync " + what] < 10, f"sync {what}: held {took['sync ' + what]:.1f} s by the frozen leader"
            assert good(r), f"sync {what}: {r}"
            assert sc.url == urls[1], f"sync {what}: answered by {sc.url}, the frozen leader (its log: {leader.log[-5:]}; the other's: {follower.log[-5:]})"
            sc.close()
    finally:
        leader.proc.send_signal(signal.SIGCONT)
    print("read times with the leader frozen:", ", ".join(f"{k} {v:.2f} s" for k, v in took.items()))
