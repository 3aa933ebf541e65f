// A rotated DENIAL-signing key (custody key rotate-denial): DENIALs are then
// signed by a key the client's checkpoint key set does not hold; the SDK
// proves it from the trust chain of the DENIAL's bundle. A DENIAL signed by
// a key the trust chain does not name is still caught.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Ledger } from "./harness.mjs";
import { Client, Runtime, UnverifiedError, NotExecutedError, DeniedError, verifyBundle, generateKey, signStatement, parseLeaf, signEnvelope, canonicalize } from "../dist/index.js";

let lg;
before(async () => {
  lg = await Ledger.start();
});
after(async () => {
  await lg?.close();
});

test("after a DENIAL key rotation, denials verify through the trust chain", async () => {
  const c = lg.client();
  const alice = await lg.principal("user:alice", c);
  const { grant, key } = await lg.agent(alice, "agent:a", "wf_dk", { budget: 10 });
  const rot = await lg.rotateDenialKey();
  assert.ok(rot);
  const agent = new Runtime(lg.client(), key, { name: "agent:a" });
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 11 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && e.cause instanceof DeniedError && e.cause.reasonCode === "limit_exceeded");
  assert.equal(ran, false);

  // The DENIAL's signer is not a checkpoint key, and its bundle says why
  // it is the right one.
  const wf = await c.workflow("wf_dk");
  const denial = wf.map((e) => e.read).find((r) => r.statement.type === "DENIAL");
  assert.ok(denial, "the DENIAL joined the workflow chain");
  assert.ok(!c.denialKeyIds().includes(denial.envelope.keyId));
  const idx = wf.find((e) => e.read.statement.type === "DENIAL").index;
  const b = await c.bundleAt(idx);
  const v = verifyBundle(b, lg.logKey);
  assert.ok(v.valid, v.failure);
  assert.ok([...v.entries.values()].some((r) => r.statement.type === "PRINCIPAL" && r.statement.op === "log_key"));

  // Without the log_key statement the same DENIAL's key is unbound.
  const cut = structuredClone(b);
  const rotIndex = [...v.entries].find(([, r]) => r.statement.op === "log_key")[0];
  cut.entries = cut.entries.filter((e) => e.index !== rotIndex);
  assert.equal(verifyBundle(cut, lg.logKey).valid, false);
});

test("a server that hides the rotation from a DENIAL's bundle is caught", async () => {
  // Runs after the rotation above: DENIALs are signed by the new key.
  const c = lg.client();
  const bob = await lg.principal("user:bob", c);
  const { grant, key } = await lg.agent(bob, "agent:b", "wf_dk2", { budget: 10 });
  const hiding = new Client(lg.url, {
    logKey: lg.logKey,
    fetch: async (url, init) => {
      const r = await fetch(url, init);
      if (!String(url).includes("/v1/bundle")) return r;
      const b = await r.json();
      b.entries = b.entries.filter((e) => parseLeaf(Buffer.from(e.leaf, "base64")).statement.op !== "log_key");
      return new Response(JSON.stringify(b), { status: 200 });
    },
  });
  const agent = new Runtime(hiding, key, { name: "agent:b" });
  let ran = false;
  await assert.rejects(agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 11 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && e.cause instanceof UnverifiedError && /bundle does not verify/.test(e.cause.message));
  assert.equal(ran, false);
  // The honest server's answer to the same denial verifies.
  await assert.rejects(new Runtime(c, key, { name: "agent:b" }).execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 11 } }, () => { ran = true; }),
    (e) => e.cause instanceof DeniedError);
});
