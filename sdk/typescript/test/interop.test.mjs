// Interoperation with the Go side beyond the ledger: key files written by
// `custody key generate` (plain and passphrase-encrypted) load here, keys
// written here load in `custody key public`, and the README's example runs
// as pasted, from a project that depends on the package, against a real
// server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, symlinkSync, rmSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Ledger, custodyBin } from "./harness.mjs";
import { loadPrivateKey, generateKey, Runtime } from "../dist/index.js";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
let lg, dir;
before(async () => {
  lg = await Ledger.start();
  dir = mkdtempSync(join(tmpdir(), "custody-ts-interop-"));
});
after(async () => {
  await lg?.close();
  rmSync(dir, { recursive: true, force: true });
});

function custody(args, env = {}) {
  const r = spawnSync(custodyBin(), args, { encoding: "utf8", env: { ...process.env, ...env } });
  assert.equal(r.status, 0, `custody ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

test("key files: Go-written keys load in TypeScript, TypeScript-written keys in Go", () => {
  const plain = join(dir, "plain.key"), enc = join(dir, "enc.key");
  const a = JSON.parse(custody(["key", "generate", "--out", plain, "--json"]));
  const b = JSON.parse(custody(["key", "generate", "--out", enc, "--encrypt", "--json"], { CUSTODY_PASSPHRASE: "tr0ub4dor&3" }));
  assert.equal(loadPrivateKey(readFileSync(plain)).keyId, a.key_id);
  assert.equal(loadPrivateKey(readFileSync(enc), "tr0ub4dor&3").keyId, b.key_id);
  assert.throws(() => loadPrivateKey(readFileSync(enc), "wrong"), (e) => e.code === "bad_key");

  const k = generateKey();
  writeFileSync(join(dir, "ts.key"), k.toPEM(), { mode: 0o600 });
  writeFileSync(join(dir, "ts-enc.key"), k.toPEM("s3cret"), { mode: 0o600 });
  assert.equal(JSON.parse(custody(["key", "public", "--json", join(dir, "ts.key")])).key_id, k.keyId);
  assert.equal(JSON.parse(custody(["key", "public", "--json", join(dir, "ts-enc.key")], { CUSTODY_PASSPHRASE: "s3cret" })).key_id, k.keyId);
});

test("the example runs as pasted, against a real server", async () => {
  // A principal grants a fresh agent key what the example needs.
  const c = lg.client();
  const alice = await lg.principal("user:alice", c);
  const agentKey = generateKey();
  writeFileSync(join(dir, "agent.key"), agentKey.toPEM(), { mode: 0o600 });
  await alice.confirm({ id: "confirm_42c1", workflow: "wf_9f3a", grantee: "agent:planner", granteeKey: agentKey.publicKey, steps: ["step_2", "step_3"],
    targets: ["airline_portal/account_123"], capabilities: ["purchase", "submit_form"], limits: { budget_usd: 800 }, ttlSeconds: 900, revocable: true, risk: "high" });
  // A project that depends on the package (as npm install would link it).
  const proj = join(dir, "proj");
  mkdirSync(join(proj, "node_modules/@custodylog"), { recursive: true });
  symlinkSync(pkg, join(proj, "node_modules/@custodylog/custody"));
  writeFileSync(join(proj, "package.json"), JSON.stringify({ type: "module", dependencies: { "@custodylog/custody": "*" } }));
  copyFileSync(join(pkg, "examples/quickstart.mjs"), join(proj, "quickstart.mjs"));
  const run = await new Promise((res) => {
    const p = spawn(process.execPath, ["quickstart.mjs"], { cwd: proj, env: { ...process.env, CUSTODY_URL: lg.url, CUSTODY_LOG_KEY: lg.logKey, CUSTODY_AGENT_KEY: join(dir, "agent.key"), CUSTODY_GRANT: "confirm_42c1" } });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("exit", (code) => res({ code, out }));
  });
  assert.equal(run.code, 0, run.out);
  assert.match(run.out, /ledger: accepted at index \d+\n[\s\S]*done; outcome at index \d+/);
  const wf = await c.workflow("wf_9f3a");
  const outcome = wf.map((e) => e.read.statement).find((s) => s.type === "RECEIPT" && s.result === "success");
  assert.equal(outcome.side_effects.booking, "PNR-7Q2X");
});
