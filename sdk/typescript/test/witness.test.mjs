// Witness finality with real witnesses: two omniwitness processes (built
// by scripts/witness.sh, run by test/witnessd through internal/witnessproc)
// cosign a custody server's checkpoints (serve --witness-policy
// --witness-finality). A client holding the policy accepts a pending
// receipt only under a checkpoint both cosigned; a client whose policy
// names a witness that never cosigns does not run the step. Skips on a dev
// machine without the witnesses; never with CI set.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { Ledger, repo } from "./harness.mjs";
import { Client, Runtime, NotExecutedError, NotWitnessedError, generateKey } from "../dist/index.js";
import { createHash } from "node:crypto";

const witnessBin = process.env.CUSTODY_WITNESS_BIN || join(repo, ".cache/bin");
let lg, wd, dir, policy;

before(async () => {
  if (!existsSync(join(witnessBin, "omniwitness"))) return;
  dir = mkdtempSync(join(tmpdir(), "custody-ts-witness-"));
  lg = await Ledger.start({ serve: false });
  const cmd = process.env.CUSTODY_TS_WITNESSD ? [process.env.CUSTODY_TS_WITNESSD] : ["go", "run", "./sdk/typescript/test/witnessd"];
  wd = spawn(cmd[0], [...cmd.slice(1), "-origin", lg.origin, "-vkey", lg.logKey, "-dir", dir, "-bin", witnessBin], { cwd: repo, stdio: ["pipe", "pipe", "inherit"] });
  const line = await new Promise((res, rej) => {
    const rl = createInterface({ input: wd.stdout });
    rl.once("line", res);
    wd.once("exit", (code) => rej(new Error(`witnessd exited ${code}`)));
  });
  policy = JSON.parse(line).policy;
  writeFileSync(join(dir, "witnesses.policy"), policy);
  await lg.serve(["--witness-policy", join(dir, "witnesses.policy"), "--witness-finality"]);
});

after(async () => {
  await lg?.close();
  if (wd) {
    const done = new Promise((r) => wd.once("exit", r));
    wd.stdin.end();
    await done;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("a pending receipt stands under a checkpoint both witnesses cosigned; an unmet policy refuses the step", async (t) => {
  if (!lg) {
    if (process.env.CI) throw new Error("CI is set but the witnesses are missing: scripts/ts.sh runs scripts/witness.sh");
    t.skip(`no omniwitness in ${witnessBin} (scripts/witness.sh builds it)`);
    return;
  }
  const c = new Client(lg.url, { logKey: lg.logKey, witnessPolicy: policy });
  const alice = await lg.principal("user:alice", c);
  const { agent, grant, key } = await lg.agent(alice, "agent:w", "wf_w", { budget: 10 });
  const ex = await agent.execute({ stepId: "s", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => ({}));
  assert.ok(ex.pending.witnessed?.satisfied, JSON.stringify(ex.pending.witnessed));
  assert.deepEqual(ex.pending.witnessed.signed.map((s) => s.witness).sort(), ["w1", "w2"]);
  assert.match(ex.pending.checkpointText, /— witness1\.test /);

  // A policy that also needs a witness that never cosigns this log.
  const stranger = generateKey();
  const id = createHash("sha256").update("witness9.test").update(Buffer.from([0x0a, 0x04])).update(stranger.publicKey).digest().readUInt32BE(0);
  const strangerKey = `witness9.test+${id.toString(16).padStart(8, "0")}+${Buffer.concat([Buffer.from([4]), stranger.publicKey]).toString("base64")}`;
  const strict = new Client(lg.url, { logKey: lg.logKey, witnessPolicy: policy.replace("group both all w1 w2\nquorum both", `witness w9 ${strangerKey}\ngroup three all w1 w2 w9\nquorum three`), witnessWaitMs: 1500 });
  const picky = new Runtime(strict, key, { name: "agent:w" });
  let ran = false;
  await assert.rejects(picky.execute({ stepId: "s2", action: "act", target: "t/x", auth: grant, reserve: { budget: 1 } }, () => { ran = true; }),
    (e) => e instanceof NotExecutedError && e.cause instanceof NotWitnessedError);
  assert.equal(ran, false);
});
