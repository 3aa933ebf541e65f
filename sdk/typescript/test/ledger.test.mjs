// Cross-implementation tests against a real custody server: statements
// signed in TypeScript are accepted by the Go ledger, its answers verify
// in TypeScript, Go-made bundles verify here, and the reads (entries,
// proofs, consistency, events) check what they can.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Ledger } from "./harness.mjs";
import {
  Client, Runtime, generateKey, signStatement, signEnvelope, envelopeText, RefusedError, verifyBundle, UnverifiedError,
  canonicalize, DeniedError, parseLeaf,
} from "../dist/index.js";

let lg;
before(async () => {
  lg = await Ledger.start();
});
after(async () => {
  await lg?.close();
});

test("TypeScript-signed statements of every grant kind are accepted and their answers verify", async () => {
  const c = lg.client();
  const log = await c.log();
  assert.equal(log.origin, lg.origin);
  const alice = await lg.principal("user:alice", c);
  const { agent, grant } = await lg.agent(alice, "agent:planner", "wf_ts1", { budget: 100 });
  const booker = generateKey();
  const d = await agent.delegate(grant, { grantee: "agent:planner/booker", granteeKey: booker.publicKey, targets: ["t/x"], capabilities: ["act"], limits: { budget: 40 }, ttlSeconds: 300, revocable: true });
  assert.equal(d.verdict, "accepted");
  assert.equal(d.entry.statement.type, "DELEGATE");
  const sub = new Runtime(c, booker, { name: "agent:planner/booker" });
  const ex = await sub.execute({ stepId: "s1", action: "act", target: "t/x", auth: d.entry.statement.delegation_id, reserve: { budget: 10 } }, async () => ({ consumed: { budget: 9 }, sideEffects: { booked: "yes" } }));
  assert.ok(ex.ran);
  assert.equal(ex.pending.verdict, "accepted");
  assert.equal(ex.outcome.entry.statement.result, "success");
  assert.equal(ex.outcome.entry.statement.pending_ref, ex.pending.entry.statement.receipt_id);
  const head = await c.head();
  assert.ok(head.checkpoint.size > ex.outcome.index);
});

test("append resolves to a verified denial, and a resubmission to the same decision", async () => {
  const c = lg.client();
  const bob = await lg.principal("user:bob", c);
  const { agent, grant } = await lg.agent(bob, "agent:bob1", "wf_ts2", { budget: 5 });
  const g = await agent.grantOf(grant);
  const st = { type: "RECEIPT", timestamp: new Date().toISOString().slice(0, 19) + "Z", log: lg.origin, actor: "agent:bob1", seq: 1, receipt_id: "r_over",
    workflow_id: "wf_ts2", step_id: "s", action: "act", target: "t/y", authorization_ref: grant, result: "pending", scope_hash: g.scope_hash, reserve: { budget: 6 } };
  const env = signStatement(agent.key, st);
  const a = await c.append(env);
  assert.equal(a.verdict, "denied");
  assert.equal(a.reason_code, "limit_exceeded");
  assert.equal(a.entry.statement.type, "DENIAL");
  const again = await c.append(env);
  assert.equal(again.index, a.index);
  assert.equal(again.duplicate, true);
  // The runtime's execute turns the same denial into a refusal to run.
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/y", auth: grant, reserve: { budget: 6 } }, () => { ran = true; }),
    (e) => e.name === "NotExecutedError" && e.cause instanceof DeniedError && e.cause.reasonCode === "limit_exceeded");
  assert.equal(ran, false);
});

test("a submission with a bad signature is refused, not logged", async () => {
  const c = lg.client();
  const k = lg.adminKey;
  const env = JSON.parse(signStatement(k, { type: "STOP", timestamp: "2026-01-01T00:00:00Z", log: lg.origin, actor: "admin", seq: 1, request_id: "s_bad", workflow_id: "wf", stop_scope: "chain", takeover_mode: "human", reason: "r" }));
  env.signatures[0].sig = Buffer.alloc(64, 7).toString("base64");
  await assert.rejects(c.append(JSON.stringify(env)), (e) => e instanceof RefusedError && e.reasonCode === "bad_signature");
});

test("Go-made bundles verify in TypeScript; tampered ones do not", async () => {
  const c = lg.client();
  const carol = await lg.principal("user:carol", c);
  const { agent, grant } = await lg.agent(carol, "agent:carol1", "wf_ts3", { budget: 10 });
  const ex = await agent.execute({ stepId: "s", action: "act", target: "t/z", auth: grant, reserve: { budget: 1 } }, () => ({}));
  const id = ex.outcome.entry.statement.receipt_id;
  const v = await c.verifyBundle(id, true);
  assert.ok(v.valid, v.failure);
  assert.ok(v.entries.size >= 5);
  const b = await c.bundle(id);
  assert.ok(verifyBundle(b, lg.logKey).valid);
  // A leaf changed by one byte fails its inclusion proof.
  const t1 = structuredClone(b);
  const last = t1.entries[t1.entries.length - 1];
  const leaf = Buffer.from(last.leaf, "base64");
  leaf[leaf.length - 3] ^= 1;
  last.leaf = leaf.toString("base64");
  assert.match(verifyBundle(t1, lg.logKey).failure, /^inclusion/);
  // Another log's key does not open the checkpoint.
  const other = await Ledger.start({ origin: lg.origin });
  try {
    assert.match(verifyBundle(b, other.logKey).failure, /^checkpoint/);
  } finally {
    await other.close();
  }
  // A missing trust-chain entry breaks the back-links.
  const t2 = structuredClone(b);
  t2.entries = t2.entries.filter((e) => e.index !== ex.pending.entry.leaf.trust_head || e.index === 0);
  assert.equal(verifyBundle(t2, lg.logKey).valid, false);
});

test("inclusion and consistency proofs verify; a forked history is caught", async () => {
  const c = lg.client();
  const first = await c.head();
  const dave = await lg.principal("user:dave", c);
  await lg.agent(dave, "agent:dave1", "wf_ts4", { budget: 1 });
  const second = await c.head();
  assert.ok(second.checkpoint.size > first.checkpoint.size);
  const got = await c.proveConsistency(first.text);
  assert.equal(got.size, second.checkpoint.size);
  const cons = await c.consistency(first.checkpoint.size, second.checkpoint.size);
  assert.equal(cons.to, second.checkpoint.size);
  const inc = await c.inclusion(1);
  assert.equal(inc.index, 1);
  const e = await c.entry(1);
  assert.equal(e.read.statement.type, "PRINCIPAL");

  // A second log with the same origin and keys but another history: a
  // split view. Its checkpoints verify alone, never as a continuation.
  const fork = await Ledger.start({ origin: lg.origin, adminKeyFile: lg.info.admin_key_file, logKeyFile: lg.info.log_key_file });
  try {
    assert.equal(fork.logKey, lg.logKey);
    const fc = new Client(fork.url, { logKey: lg.logKey });
    const small = await c.head();
    const alice = await fork.principal("user:f1", fc);
    for (let i = 0; i < small.checkpoint.size; i++) await lg.agent(alice, `agent:f${i}`, `wf_f${i}`, { budget: 1 });
    const big = await fc.head();
    assert.ok(big.checkpoint.size > small.checkpoint.size);
    await assert.rejects(fc.proveConsistency(small.text), UnverifiedError);
  } finally {
    await fork.close();
  }
});

test("the event stream follows a workflow and resumes across a server restart", async () => {
  const c = lg.client();
  const erin = await lg.principal("user:erin", c);
  const { grant } = await lg.agent(erin, "agent:erin1", "wf_ts5", { budget: 5 });
  const ctrl = new AbortController();
  const seen = [];
  let connects = 0;
  const connected = [];
  const wait = () => new Promise((r) => connected.push(r));
  const first = wait();
  const reader = (async () => {
    for await (const e of c.events("wf_ts5", { signal: ctrl.signal, onConnect: () => { connects++; connected.shift()?.(); } })) {
      seen.push(e);
      if (seen.length === 3) ctrl.abort();
    }
  })();
  await first;
  await erin.stop({ workflow: "wf_ts5", step: "s9", reason: "one" });
  const reconnected = wait();
  await lg.restart();
  await reconnected;
  await erin.stop({ workflow: "wf_ts5", step: "s8", reason: "two" });
  await reader;
  assert.deepEqual(seen.map((e) => e.read.statement.type), ["CONFIRM", "STOP", "STOP"]);
  assert.equal(seen[0].read.statement.confirm_id, grant);
  assert.ok(seen[1].index < seen[2].index);
  assert.ok(connects >= 2, `connects ${connects}`);
});

test("STOP, RESUME and REVOKE signed in TypeScript are accepted, and take effect", async () => {
  const c = lg.client();
  const fay = await lg.principal("user:fay", c);
  const { agent, grant } = await lg.agent(fay, "agent:fay1", "wf_ts6", { budget: 5 });
  const s = await fay.stop({ id: "stop_ts6", workflow: "wf_ts6", reason: "look first" });
  assert.equal(s.entry.statement.type, "STOP");
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e.cause?.reasonCode === "workflow_stopped");
  const r = await fay.resume({ workflow: "wf_ts6", stop: "stop_ts6" });
  assert.equal(r.entry.statement.type, "RESUME");
  await agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; });
  assert.equal(ran, true);
  const v = await fay.revoke({ target: grant, reason: "done" });
  assert.equal(v.entry.statement.type, "REVOKE");
  ran = false;
  await assert.rejects(agent.execute({ stepId: "s2", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e.cause?.reasonCode === "revoked");
  assert.equal(ran, false);
});
