// Runtime.execute shares one STOP watch (one event stream) per workflow
// among the steps it runs at once: more concurrent steps than the server
// lets one address hold streams (MaxStreamsPerAddr, 64) all run and are
// receipted, and a STOP still reaches every step it covers.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Ledger } from "./harness.mjs";
import { Client, Runtime, StoppedError } from "../dist/index.js";

let lg;
before(async () => {
  lg = await Ledger.start();
});
after(async () => {
  await lg?.close();
});

// A barrier every step waits at: it opens when all n steps are running,
// or as soon as one execute fails (so a broken runtime fails the test
// instead of hanging it).
function barrier(n) {
  let open, count = 0;
  const opened = new Promise((r) => (open = r));
  return { arrive: () => { if (++count >= n) open(); return opened; }, fail: () => open(), get count() { return count; } };
}

test("more concurrent steps than the per-address stream cap all run and are receipted", async () => {
  const N = 100; // > MaxStreamsPerAddr (64), and > StreamOpensPerAddr (20 a second)
  const c = lg.client();
  const alice = await lg.principal("user:alice", c);
  const { grant, key } = await lg.agent(alice, "agent:many", "wf_many", { budget: 1000 });
  // The runtime's event streams, as the server answered them.
  const streams = [];
  const seeing = (url, init) => {
    const p = fetch(url, init);
    if (String(url).includes("/events")) p.then((r) => streams.push({ proof: new Headers(init?.headers).has("custody-stream-step"), status: r.status }), () => undefined);
    return p;
  };
  const agent = new Runtime(new Client(lg.url, { logKey: lg.logKey, fetch: seeing }), key, { name: "agent:many", watchTimeoutMs: 5000 });
  const b = barrier(N);
  const results = await Promise.allSettled(Array.from({ length: N }, (_, i) =>
    agent.execute({ stepId: `s${i}`, action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, async () => {
      await b.arrive(); // all N are running at once
      return { result: "success" };
    }).catch((e) => { b.fail(); throw e; })));
  const failed = results.filter((r) => r.status === "rejected");
  assert.equal(failed.length, 0, `${failed.length} steps failed, the first: ${failed[0]?.reason?.message}`);
  assert.equal(b.count, N);
  for (const r of results) assert.ok(r.value.ran && r.value.outcome?.accepted);
  const outcomes = (await c.workflow("wf_many")).map((e) => e.read.statement).filter((s) => s.type === "RECEIPT" && s.result === "success");
  assert.equal(outcomes.length, N);
  // One stream for the N steps, opened with the step proof the server took.
  assert.ok(streams.length >= 1 && streams.length < N / 4, `${streams.length} streams`);
  assert.ok(streams.every((s) => s.proof && s.status === 200), JSON.stringify(streams));
});

test("a chain STOP cancels every running step of the shared watch", async () => {
  const N = 80;
  const c = lg.client();
  const bob = await lg.principal("user:bob", c);
  const { grant, key } = await lg.agent(bob, "agent:stopped", "wf_stopmany", { budget: 1000 });
  const stops = [];
  const agent = new Runtime(c, key, { name: "agent:stopped", watchTimeoutMs: 5000, hooks: { onStop: (st, i) => stops.push(i) } });
  const b = barrier(N + 1);
  const runs = Array.from({ length: N }, (_, i) =>
    agent.execute({ stepId: `s${i}`, action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, async (signal) => {
      await b.arrive();
      await new Promise((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    }).catch((e) => { b.fail(); throw e; }));
  for (const r of runs) r.catch(() => undefined); // handled below
  await b.arrive(); // the test itself is one more arrival: wait until every step runs
  await bob.stop({ id: "stop_all", workflow: "wf_stopmany", reason: "halt" });
  const results = await Promise.allSettled(runs);
  for (const r of results) {
    assert.equal(r.status, "rejected");
    assert.ok(r.reason instanceof StoppedError && r.reason.stop.request_id === "stop_all", String(r.reason));
  }
  assert.equal(stops.length, N);
  const outcomes = (await c.workflow("wf_stopmany")).map((e) => e.read.statement).filter((s) => s.type === "RECEIPT" && s.result === "failure");
  assert.equal(outcomes.length, N);
});
