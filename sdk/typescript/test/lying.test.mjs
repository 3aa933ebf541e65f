// A lying server: a proxy in front of a real custody server that tampers
// with its answers in one way at a time. Every lie is caught (the promise
// rejects with an UnverifiedError) and execute never runs the step.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { Ledger } from "./harness.mjs";
import { Client, Runtime, UnverifiedError, generateKey, signStatement, privateKeyFromSeed, signEnvelope, canonicalize } from "../dist/index.js";

let lg, proxy, mode, saved;
const lies = {
  // The inclusion proof's first hash flipped.
  proof(doc) {
    if (!doc.inclusion_proof?.length) doc.inclusion_proof = [Buffer.alloc(32).toString("base64")];
    else doc.inclusion_proof[0] = Buffer.alloc(32, 1).toString("base64");
  },
  // The checkpoint's signature line damaged.
  checkpoint(doc) {
    doc.checkpoint = doc.checkpoint.replace(/— (\S+) (\S{6})/, "— $1 AAAAAA");
  },
  // An earlier, genuine answer replayed for a new submission.
  replay(doc) {
    if (saved) Object.assign(doc, saved);
  },
  // The leaf swapped for another leaf under the same checkpoint is caught by
  // the proof; swapping index too needs a proof of that other leaf: replay.
  index(doc) {
    doc.index = doc.index + 1;
  },
  // "denied" claimed for an accepted statement, without a signed DENIAL.
  denied(doc, res) {
    doc.verdict = "denied";
    doc.reason_code = "limit_exceeded";
    doc.denial_index = doc.index;
    res.statusCode = 403;
  },
};

before(async () => {
  lg = await Ledger.start();
  proxy = http.createServer(async (req, res) => {
    const body = await new Promise((r) => { const c = []; req.on("data", (d) => c.push(d)); req.on("end", () => r(Buffer.concat(c))); });
    const up = await fetch(lg.url + req.url, { method: req.method, headers: { "content-type": req.headers["content-type"] ?? "application/json", "last-event-id": req.headers["last-event-id"] ?? "" }, body: req.method === "POST" ? body : undefined });
    if (req.url.includes("/events")) {
      if (mode === "noevents") { res.statusCode = 503; res.end(); return; }
      res.writeHead(up.status, { "content-type": "text/event-stream" });
      for await (const c of up.body) res.write(c);
      res.end();
      return;
    }
    const text = await up.text();
    res.statusCode = up.status;
    if (req.method === "POST" && req.url === "/v1/entries" && lies[mode] && (up.status === 200 || up.status === 403)) {
      const doc = JSON.parse(text);
      lies[mode](doc, res);
      res.end(JSON.stringify(doc));
      return;
    }
    if (req.method === "POST" && req.url === "/v1/entries" && up.status === 200 && !saved) saved = JSON.parse(text);
    res.end(text);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
});
after(async () => {
  proxy?.close();
  await lg?.close();
});

test("every lie of a tampering proxy is caught, and execute does not run the step", async () => {
  const direct = lg.client();
  const alice = await lg.principal("user:alice", direct);
  const { grant, key } = await lg.agent(alice, "agent:a", "wf_lie", { budget: 100 });
  const c = new Client(`http://127.0.0.1:${proxy.address().port}`, { logKey: lg.logKey, retries: 0 });
  const agent = new Runtime(c, key, { name: "agent:a" });
  // One honest append through the proxy, to have an answer to replay.
  mode = "";
  await agent.execute({ stepId: "s0", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => ({}));
  assert.ok(saved);
  for (const m of Object.keys(lies)) {
    mode = m;
    let ran = false;
    await assert.rejects(
      agent.execute({ stepId: `s_${m}`, action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
      (e) => e.name === "NotExecutedError" && e.cause instanceof UnverifiedError,
      m,
    );
    assert.equal(ran, false, m);
  }
  mode = "";
});

test("a lying server's consistency proof and a checkpoint of another key are caught", async () => {
  const c = lg.client();
  const old = await c.head();
  const alice = await lg.principal("user:cons", c);
  await lg.agent(alice, "agent:cons", "wf_cons", { budget: 1 });
  // A consistency proof with a hash changed.
  const orig = globalThis.fetch;
  const liar = new Client(lg.url, {
    logKey: lg.logKey,
    fetch: async (url, init) => {
      const r = await orig(url, init);
      if (!String(url).includes("/v1/proof/consistency")) return r;
      const doc = await r.json();
      doc.proof[doc.proof.length - 1] = Buffer.alloc(32, 9).toString("base64");
      return new Response(JSON.stringify(doc), { status: 200 });
    },
  });
  await assert.rejects(liar.proveConsistency(old.text), UnverifiedError);
  await c.proveConsistency(old.text);
  // A checkpoint signed by a key the client does not hold.
  const other = await Ledger.start({ origin: lg.origin });
  try {
    const wrong = new Client(other.url, { logKey: lg.logKey });
    await assert.rejects(wrong.head(), UnverifiedError);
    await assert.rejects(wrong.log(), UnverifiedError);
  } finally {
    await other.close();
  }
});
