// Runtime.execute fails closed: no answer, a denial, or no STOP watch means
// the step never runs; a STOP aborts a running step; the hooks see it all.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Ledger } from "./harness.mjs";
import { Client, Runtime, StoppedError, NotExecutedError } from "../dist/index.js";

let lg;
before(async () => {
  lg = await Ledger.start();
});
after(async () => {
  await lg?.close();
});

test("a STOP aborts the running step; the outcome is still recorded", async () => {
  const c = lg.client();
  const alice = await lg.principal("user:alice", c);
  const seen = [];
  const hooks = {
    beforeExecute: (s) => seen.push(`before:${s.stepId}`),
    afterExecute: (s, o, err) => seen.push(`after:${o.result}:${err?.name ?? ""}`),
    onStop: (stop) => seen.push(`stop:${stop.request_id}`),
    emitReceipt: (a) => seen.push(`receipt:${a.verdict}`),
  };
  const { grant, key } = await lg.agent(alice, "agent:a", "wf_stop", { budget: 10 });
  const agent = new Runtime(c, key, { name: "agent:a", hooks });
  const ex = agent.execute({ stepId: "step_3/a", action: "act", target: "t/x", auth: grant, reserve: { budget: 2 } }, async (signal) => {
    await alice.stop({ id: "stop_1", workflow: "wf_stop", step: "step_3", reason: "halt" });
    await new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason); // the STOP may arrive before we listen
      const t = setTimeout(() => resolve(), 15000);
      signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
    });
    return { result: "success" };
  });
  await assert.rejects(ex, (e) => e instanceof StoppedError && e.stop.request_id === "stop_1");
  assert.deepEqual(seen, ["before:step_3/a", "receipt:accepted", "stop:stop_1", "receipt:accepted", "after:failure:StoppedError"]);
  const wf = await c.workflow("wf_stop");
  const outcome = wf.map((e) => e.read.statement).find((s) => s.type === "RECEIPT" && s.result !== "pending");
  assert.equal(outcome.result, "failure");
  assert.match(outcome.error, /stopped: step step_3 of workflow wf_stop/);
  // A chain STOP now refuses new pending receipts: the step never runs.
  await alice.stop({ workflow: "wf_stop", reason: "all" });
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s9", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && e.cause?.reasonCode === "workflow_stopped");
  assert.equal(ran, false);
});

test("the server down: execute refuses to run the step", async () => {
  const c = lg.client();
  const bob = await lg.principal("user:bob", c);
  const { grant, key } = await lg.agent(bob, "agent:b", "wf_down", { budget: 10 });
  const agent = new Runtime(new Client(lg.url, { logKey: lg.logKey, retries: 1, maxRetryWaitMs: 50 }), key, { name: "agent:b" });
  await lg.stop();
  let ran = false;
  try {
    await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
      (e) => e instanceof NotExecutedError);
    assert.equal(ran, false);
  } finally {
    await lg.serve();
  }
  // Back up: the same runtime runs the step.
  const ex = await agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; });
  assert.ok(ran && ex.outcome.accepted);
});

test("no event stream: the step is not run and its pending receipt is closed as failed", async () => {
  const c = lg.client();
  const carol = await lg.principal("user:carol", c);
  const { grant, key } = await lg.agent(carol, "agent:c", "wf_noev", { budget: 10 });
  const noEvents = (url, init) => String(url).includes("/events") ? Promise.resolve(new Response("down", { status: 503 })) : fetch(url, init);
  const agent = new Runtime(new Client(lg.url, { logKey: lg.logKey, fetch: noEvents }), key, { name: "agent:c", watchTimeoutMs: 500 });
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && /no event stream/.test(e.message) && e.execution.pending && e.execution.outcome?.entry.statement.result === "failure");
  assert.equal(ran, false);
});

test("a beforeExecute veto writes nothing; beforeConfirm vetoes a CONFIRM", async () => {
  const c = lg.client();
  const head = (await c.head()).checkpoint.size;
  const dave = await lg.principal("user:dave", c);
  const vetoing = new Runtime(c, dave.key, { name: "user:dave", hooks: { beforeConfirm: () => { throw new Error("the person said no"); } } });
  await assert.rejects(vetoing.confirm({ workflow: "wf_veto", grantee: "agent:d", granteeKey: (await import("../dist/index.js")).generateKey().publicKey, targets: ["t"], capabilities: ["a"], ttlSeconds: 60 }), /the person said no/);
  assert.equal((await c.head()).checkpoint.size, head + 1); // only the enrollment
  const { grant, key } = await lg.agent(dave, "agent:d2", "wf_veto2", { budget: 10 });
  const before = (await c.head()).checkpoint.size;
  const careful = new Runtime(c, key, { name: "agent:d2", hooks: { beforeExecute: () => { throw new Error("not now"); } } });
  let ran = false;
  await assert.rejects(careful.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && /beforeExecute: not now/.test(e.message));
  assert.equal(ran, false);
  assert.equal((await c.head()).checkpoint.size, before); // nothing written
});

test("onTakeover sees a STOP handing the workflow to this agent, without aborting its own step; afterConfirm sees the grant", async () => {
  const c = lg.client();
  const confirmed = [];
  const erin = await lg.principal("user:erin", c);
  const erinHooked = new Runtime(c, erin.key, { name: "user:erin", hooks: { afterConfirm: (a) => confirmed.push(a.entry.statement.confirm_id) } });
  const { grant, key } = await lg.agent(erinHooked, "agent:b2", "wf_take", { budget: 10 });
  assert.deepEqual(confirmed, [grant]);
  const seen = [];
  const b = new Runtime(c, key, { name: "agent:b2", hooks: { onTakeover: (stop) => seen.push(stop.request_id), onStop: (stop) => seen.push(`stop:${stop.request_id}`) } });
  const ex = await b.execute({ stepId: "mine", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, async (signal) => {
    await erin.stop({ id: "stop_take", workflow: "wf_take", step: "theirs", takeover: "delegate_to_other_agent", takeoverTo: "agent:b2", reason: "take it over" });
    const deadline = Date.now() + 10000;
    while (!seen.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(signal.aborted, false);
    return {};
  });
  assert.deepEqual(seen, ["stop_take"]);
  assert.ok(ex.outcome.accepted);
});
