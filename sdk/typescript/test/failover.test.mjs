// Several servers of one log. A client given a list goes round it past a
// dead server, and on a log in PostgreSQL served by two `custody serve
// --store` processes it follows the sequencer (503 not_leader names it)
// and keeps appending through a failover when the leader is killed.
// The PostgreSQL part needs CUSTODY_TEST_PG (scripts/ts.sh starts a
// throwaway cluster); it skips without it on a dev machine, never in CI.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ledger, custodyBin } from "./harness.mjs";
import { Client, Runtime, generateKey, loadPrivateKey } from "../dist/index.js";

async function deadURL() {
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const port = srv.address().port;
  await new Promise((r) => srv.close(r));
  return `http://127.0.0.1:${port}`;
}

test("a dead server in the list is passed over for appends, reads and events", async () => {
  const lg = await Ledger.start();
  try {
    const c = new Client(`${await deadURL()},${lg.url}`, { logKey: lg.logKey });
    assert.equal(c.servers.length, 2);
    const alice = await lg.principal("user:alice", c);
    const { agent, grant } = await lg.agent(alice, "agent:a", "wf_list", { budget: 5 });
    const ex = await agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => ({}));
    assert.ok(ex.outcome.accepted);
    assert.equal(c.url, lg.url);
    // A client that starts at the dead server reads and follows events too.
    const r = new Client(`${await deadURL()},${lg.url}`, { logKey: lg.logKey });
    assert.equal((await r.entry(0)).read.statement.type, "GENESIS");
    const fresh = new Client(`${await deadURL()},${lg.url}`, { logKey: lg.logKey });
    const ctrl = new AbortController();
    const got = [];
    for await (const e of fresh.events("wf_list", { signal: ctrl.signal })) {
      got.push(e.read.statement.type);
      if (got.length === 3) break;
    }
    assert.deepEqual(got, ["CONFIRM", "RECEIPT", "RECEIPT"]);
  } finally {
    await lg.close();
  }
});

// serveStore runs `custody serve` on the store with a configuration
// folder of its own (where it keeps its signed head), as on a machine of
// its own.
function serveStore(store, env, dir) {
  env = { ...env, XDG_CONFIG_HOME: mkdtempSync(join(dir, "machine-")) };
  const proc = spawn(custodyBin(), ["serve", "--store", store, "--addr", "127.0.0.1:0", "--lease-ttl", "2s"], { stdio: ["ignore", "ignore", "pipe"], env });
  let log = "";
  const port = new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`serve did not start: ${log}`)), 20000);
    proc.stderr.on("data", (b) => {
      log += b;
      const m = /msg=serving addr=127\.0\.0\.1:(\d+)/.exec(log);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
  });
  return { proc, port, log: () => log };
}

test("a log in PostgreSQL: appends follow the sequencer and survive its death", async (t) => {
  const store = process.env.CUSTODY_TEST_PG;
  if (!store) {
    if (process.env.CI) throw new Error("CI is set but CUSTODY_TEST_PG is not: scripts/ts.sh starts PostgreSQL for this test");
    t.skip("CUSTODY_TEST_PG is not set (scripts/ts.sh starts a throwaway PostgreSQL)");
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "custody-ts-pg-"));
  // A server of a log in a database keeps the last checkpoint it signed
  // under the user's configuration folder: keep this test's there.
  const env = { ...process.env, XDG_CONFIG_HOME: join(dir, "config") };
  const adminFile = join(dir, "admin.key");
  spawnSync(custodyBin(), ["key", "generate", "--out", adminFile], { encoding: "utf8", env });
  const init = spawnSync(custodyBin(), ["init", "--store", store, "--origin", "example.com/ts-pg", "--admin-key", adminFile, "--json"], { encoding: "utf8", env });
  assert.equal(init.status, 0, init.stderr);
  const info = JSON.parse(init.stdout);
  const a = serveStore(store, env, dir);
  const pa = await a.port;
  const b = serveStore(store, env, dir);
  const pb = await b.port;
  try {
    const leaderFirst = /role=leader/.test(a.log()) ? [a, pa, b, pb] : [b, pb, a, pa];
    const [leader, lport, follower, fport] = leaderFirst;
    // The follower first: its 503 not_leader names the leader.
    const c = new Client(`http://127.0.0.1:${fport},http://127.0.0.1:${lport}`, { logKey: info.verifier_key });
    const admin = new Runtime(c, loadPrivateKey(spawnSync("cat", [adminFile]).stdout), { name: info.admin_name });
    const aliceKey = generateKey();
    await admin.appendOrThrow({ type: "PRINCIPAL", principal_id: "p_alice", op: "enroll", name: "user:alice", public_key: aliceKey.publicKeyBase64 });
    assert.equal(c.url, `http://127.0.0.1:${lport}`, "the client follows the leader the follower named");
    const alice = new Runtime(c, aliceKey, { name: "user:alice" });
    const agentKey = generateKey();
    await alice.confirm({ id: "confirm_pg", workflow: "wf_pg", grantee: "agent:pg", granteeKey: agentKey.publicKey, targets: ["t/*"], capabilities: ["act"], limits: { budget: 10 }, ttlSeconds: 600, revocable: true });
    const agent = new Runtime(c, agentKey, { name: "agent:pg" });
    await agent.execute({ stepId: "s1", action: "act", target: "t/x", auth: "confirm_pg", reserve: { budget: 1 } }, () => ({}));
    // The leader dies; the follower takes the lease and the same client
    // goes on, every answer still verified.
    leader.proc.kill("SIGKILL");
    const ex = await agent.execute({ stepId: "s2", action: "act", target: "t/x", auth: "confirm_pg", reserve: { budget: 1 } }, () => ({}));
    assert.ok(ex.outcome.accepted);
    assert.equal(c.url, `http://127.0.0.1:${fport}`);
    const wf = await c.workflow("wf_pg");
    assert.equal(wf.length, 5);
  } finally {
    a.proc.kill("SIGTERM");
    b.proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a log in PostgreSQL: a frozen leader holding an append does not hold the client", async (t) => {
  const store = process.env.CUSTODY_TEST_PG;
  if (!store) {
    if (process.env.CI) throw new Error("CI is set but CUSTODY_TEST_PG is not: scripts/ts.sh starts PostgreSQL for this test");
    t.skip("CUSTODY_TEST_PG is not set (scripts/ts.sh starts a throwaway PostgreSQL)");
    return;
  }
  // A log of its own in the database (a named log), new at every run.
  const tag = Date.now().toString(36);
  const own = `${store}${store.includes("?") ? "&" : "?"}custody_log=tsfrozen${tag}`;
  const dir = mkdtempSync(join(tmpdir(), "custody-ts-frozen-"));
  const env = { ...process.env, XDG_CONFIG_HOME: join(dir, "config") };
  const adminFile = join(dir, "admin.key");
  spawnSync(custodyBin(), ["key", "generate", "--out", adminFile], { encoding: "utf8", env });
  const init = spawnSync(custodyBin(), ["init", "--store", own, "--origin", `example.com/ts-frozen-${tag}`, "--admin-key", adminFile, "--json"], { encoding: "utf8", env });
  assert.equal(init.status, 0, init.stderr);
  const info = JSON.parse(init.stdout);
  const a = serveStore(own, env, dir);
  const pa = await a.port;
  const b = serveStore(own, env, dir);
  const pb = await b.port;
  let leader;
  try {
    const [l, lport, , fport] = /role=leader/.test(a.log()) ? [a, pa, b, pb] : [b, pb, a, pa];
    leader = l;
    const c = new Client(`http://127.0.0.1:${lport},http://127.0.0.1:${fport}`, { logKey: info.verifier_key });
    const admin = new Runtime(c, loadPrivateKey(spawnSync("cat", [adminFile]).stdout), { name: info.admin_name });
    const aliceKey = generateKey();
    await admin.appendOrThrow({ type: "PRINCIPAL", principal_id: "p_alice", op: "enroll", name: "user:alice", public_key: aliceKey.publicKeyBase64 });
    const alice = new Runtime(c, aliceKey, { name: "user:alice" });
    const agentKey = generateKey();
    await alice.confirm({ id: "confirm_fz", workflow: "wf_fz", grantee: "agent:fz", granteeKey: agentKey.publicKey, targets: ["t/*"], capabilities: ["act"], limits: { budget: 10 }, ttlSeconds: 600, revocable: true });
    const agent = new Runtime(c, agentKey, { name: "agent:fz" });
    assert.equal(c.url, `http://127.0.0.1:${lport}`);
    // The leader is paused (SIGSTOP) and the client's next append goes to
    // it. The pause lasts eight lease times (2 s each): the append must be
    // accepted through the other server before it ends.
    leader.proc.kill("SIGSTOP");
    let resumed = false;
    const resume = setTimeout(() => {
      resumed = true;
      leader.proc.kill("SIGCONT");
    }, 16000);
    const ex = await agent.execute({ stepId: "s1", action: "act", target: "t/x", auth: "confirm_fz", reserve: { budget: 1 } }, () => ({}));
    const during = !resumed;
    clearTimeout(resume);
    leader.proc.kill("SIGCONT");
    assert.ok(ex.outcome.accepted);
    assert.ok(during, "the append was accepted only after the frozen leader resumed");
    assert.equal(c.url, `http://127.0.0.1:${fport}`);
  } finally {
    a.proc.kill("SIGCONT");
    b.proc.kill("SIGCONT");
    a.proc.kill("SIGTERM");
    b.proc.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
});
