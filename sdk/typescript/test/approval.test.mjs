// A held step in the TypeScript Runtime (DESIGN §7 "Running an approved
// step"), against a real custody server: the Runtime waits, verifies the
// APPROVALs itself from a bundle (an Ed25519 one and a passkey one), runs
// the step once; a reject, a timeout, a STOP mean it never runs and its
// outcome is a failure naming the reason.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign as nodeSign, randomBytes } from "node:crypto";
import { Ledger, skipWithoutGo } from "./harness.mjs";
import { canonicalize, pae, passkeyChallenge, NotExecutedError, NotApprovedError, checkApproval } from "../dist/index.js";

let lg;
before(async (t) => {
  if (skipWithoutGo(t)) return;
  lg = await Ledger.start();
});
after(async () => {
  await lg?.close();
});

const rule = (approvers) => ({ rule_id: "person", capabilities: ["act"], approvers, quorum: 1, ttl_seconds: 600 });

async function heldSetup(wf, approvers = ["user:alice"]) {
  const c = lg.client();
  const alice = lg.alice ??= await lg.principal("user:alice", c);
  const { agent, grant } = await lg.agent(alice, `agent:${wf}`, wf, {}, { approvals: [rule(approvers)] });
  return { c, alice, agent, grant };
}

// waitHeld polls the (advisory) state until the receipt is logged and held.
async function waitHeld(c, id) {
  for (let i = 0; i < 200; i++) {
    try {
      const st = await c.approvalState(id);
      if (st.state === "held") return st;
    } catch { /* not logged yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${id} never held`);
}

async function receiptSha(c, id) {
  const e = await c.statement(id);
  return createHash("sha256").update(e.read.envelope.payload).digest("hex");
}

test("a held step runs once, after the runtime verified an APPROVAL itself", async () => {
  const { c, alice, agent, grant } = await heldSetup("wf_held1");
  const id = "r_held1";
  let runs = 0;
  const ex = agent.execute({ receiptId: id, stepId: "s", action: "act", target: "t/x", auth: grant, params: { amount: 5 } }, () => {
    runs++;
    return {};
  });
  await waitHeld(c, id);
  assert.equal(runs, 0, "a held step ran before any approval");
  await alice.appendOrThrow({ type: "APPROVAL", approval_id: "a_held1", workflow_id: "wf_held1", receipt_ref: id, receipt_sha256: await receiptSha(c, id), decision: "approve" });
  const done = await ex;
  assert.equal(runs, 1);
  assert.equal(done.approval.state, "approved");
  assert.deepEqual(done.approval.approvedBy, ["user:alice"]);
  assert.equal(done.pending.verdict, "held");
  assert.equal(done.outcome.entry.statement.result, "success");
});

test("a reject: the step never runs, its outcome is failure approval_rejected", async () => {
  const { c, alice, agent, grant } = await heldSetup("wf_held2");
  const id = "r_held2";
  let ran = false;
  const ex = agent.execute({ receiptId: id, stepId: "s", action: "act", target: "t/x", auth: grant }, () => { ran = true; });
  await waitHeld(c, id);
  await alice.appendOrThrow({ type: "APPROVAL", approval_id: "a_held2", workflow_id: "wf_held2", receipt_ref: id, receipt_sha256: await receiptSha(c, id), decision: "reject", reason: "too much" });
  await assert.rejects(ex, (e) => e instanceof NotExecutedError && e.cause instanceof NotApprovedError && e.cause.code === "approval_rejected");
  assert.equal(ran, false);
  const v = await c.verifyBundle(id, true);
  const outcome = [...v.entries.values()].map((r) => r.statement).find((s) => s.type === "RECEIPT" && s.pending_ref === id);
  assert.equal(outcome.result, "failure");
  assert.match(outcome.error, /^approval_rejected: /);
});

test("no approval within the wait: approval_timeout, never run", async () => {
  const { c, agent, grant } = await heldSetup("wf_held3");
  agent.approvalWaitMs = 1500;
  let ran = false;
  await assert.rejects(agent.execute({ receiptId: "r_held3", stepId: "s", action: "act", target: "t/x", auth: grant }, () => { ran = true; }),
    (e) => e.cause instanceof NotApprovedError && e.cause.code === "approval_timeout");
  assert.equal(ran, false);
  // Its failure outcome names the reason.
  const v = await c.verifyBundle("r_held3", true);
  const outcome = [...v.entries.values()].map((r) => r.statement).find((s) => s.type === "RECEIPT" && s.pending_ref === "r_held3");
  assert.equal(outcome.result, "failure");
  assert.match(outcome.error, /^approval_timeout: /);
});

test("a STOP before the approval closes the held receipt: approval_closed", async () => {
  const { c, alice, agent, grant } = await heldSetup("wf_held4");
  const id = "r_held4";
  let ran = false;
  const ex = agent.execute({ receiptId: id, stepId: "s", action: "act", target: "t/x", auth: grant }, () => { ran = true; });
  await waitHeld(c, id);
  await alice.stop({ workflow: "wf_held4", reason: "no" });
  await assert.rejects(ex, (e) => e.cause instanceof NotApprovedError && e.cause.code === "approval_closed");
  assert.equal(ran, false);
});

// A software authenticator (P-256), as in passkey.test.mjs.
function softAuthn() {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const spki = publicKey.export({ format: "der", type: "spki" });
  const keyId = createHash("sha256").update(spki).digest("hex");
  return {
    keyId,
    enrollment: { key_type: "webauthn-es256", public_key: spki.toString("base64"), credential_id: randomBytes(16).toString("base64"), rp_id: "custody.example.com", origins: ["https://custody.example.com"] },
    sign(kind, payload) {
      const pt = `application/vnd.custody.${kind.toLowerCase()}.v1+json`;
      const cd = Buffer.from(`{"type":"webauthn.get","challenge":"${passkeyChallenge(pae(pt, payload))}","origin":"https://custody.example.com","crossOrigin":false}`);
      const ad = Buffer.concat([createHash("sha256").update("custody.example.com").digest(), Buffer.from([0x05, 0, 0, 0, 0])]);
      const sig = nodeSign("sha256", Buffer.concat([ad, createHash("sha256").update(cd).digest()]), privateKey);
      const obj = canonicalize({ authenticator_data: ad.toString("base64url"), client_data_json: cd.toString("base64url"), signature: sig.toString("base64url") });
      return JSON.stringify({ payloadType: pt, payload: Buffer.from(payload).toString("base64"), signatures: [{ keyid: keyId, sig: Buffer.from(obj).toString("base64") }] });
    },
  };
}

test("a passkey APPROVAL: the runtime verifies the passkey signature itself and runs the step", async () => {
  // bob is the approver: enrolled with an Ed25519 key, his phone's passkey added.
  await lg.principal("user:bob", lg.client());
  const pk = softAuthn();
  await lg.admin().appendOrThrow({ type: "PRINCIPAL", principal_id: "p_bob_phone", op: "add_key", name: "user:bob", ...pk.enrollment });
  const alice = lg.alice ??= await lg.principal("user:alice", lg.client());
  const { agent: ag, grant: g } = await lg.agent(alice, "agent:wf_held5", "wf_held5", {}, { approvals: [rule(["user:bob"])] });
  const id = "r_held5";
  let runs = 0;
  const ex = ag.execute({ receiptId: id, stepId: "s", action: "act", target: "t/x", auth: g }, () => { runs++; });
  await waitHeld(lg.client(), id);
  const st = { type: "APPROVAL", timestamp: new Date().toISOString().slice(0, 19) + "Z", log: lg.origin, actor: "user:bob", seq: 1,
    approval_id: "a_held5", workflow_id: "wf_held5", receipt_ref: id, receipt_sha256: await receiptSha(lg.client(), id), decision: "approve" };
  const a = await lg.client().append(pk.sign("APPROVAL", Buffer.from(canonicalize(st))));
  assert.equal(a.verdict, "accepted");
  const done = await ex;
  assert.equal(runs, 1);
  assert.deepEqual(done.approval.approvedBy, ["user:bob"]);
  // The same decision from the bundle alone, offline.
  const b = await lg.client().bundle("a_held5", true);
  assert.equal(checkApproval(b, lg.logKey, id).state, "approved");
});
