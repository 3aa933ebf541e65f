// Starts real custody servers (the Go binary of this repository) for the
// tests: `custody init` in a temporary folder, then `custody serve` on a
// free loopback port. The binary is $CUSTODY_BIN, or built with `go build`
// into the repository's .cache (scripts/ts.sh builds it first).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Client, Runtime, loadPrivateKey, generateKey } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
export const repo = resolve(here, "../../..");

let built;
export function custodyBin() {
  if (process.env.CUSTODY_BIN) return process.env.CUSTODY_BIN;
  if (built) return built;
  const out = join(repo, ".cache/ts/custody");
  mkdirSync(dirname(out), { recursive: true });
  const r = spawnSync("go", ["build", "-o", out, "./cmd/custody"], { cwd: repo, stdio: "inherit" });
  if (r.status !== 0) throw new Error("go build ./cmd/custody failed");
  built = out;
  return out;
}

function run(args) {
  const r = spawnSync(custodyBin(), args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`custody ${args.join(" ")}: exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** A served ledger. */
export class Ledger {
  constructor(dir, info) {
    this.dir = dir;
    this.info = info;
    this.logKey = info.verifier_key;
    this.origin = info.origin;
    this.adminKey = loadPrivateKey(readFileSync(info.admin_key_file));
    this.proc = null;
    this.port = 0;
  }

  static async start({ origin = "example.com/ts-sdk", adminKeyFile, logKeyFile, serve = true } = {}) {
    const dir = mkdtempSync(join(tmpdir(), "custody-ts-"));
    const args = ["init", "--dir", join(dir, "data"), "--origin", origin, "--json"];
    if (adminKeyFile) args.push("--admin-key", adminKeyFile);
    if (logKeyFile) args.push("--log-private-key", logKeyFile);
    const info = JSON.parse(run(args));
    const l = new Ledger(dir, info);
    if (serve) await l.serve();
    return l;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Serves the ledger (again, on the same port after the first time); extra arguments are kept for restarts. */
  async serve(extra) {
    if (extra) this.extra = extra;
    const proc = spawn(custodyBin(), ["serve", "--dir", join(this.dir, "data"), "--addr", `127.0.0.1:${this.port}`, ...(this.extra ?? [])], { stdio: ["ignore", "ignore", "pipe"] });
    this.proc = proc;
    let log = "";
    this.port = await new Promise((resolveP, reject) => {
      const t = setTimeout(() => reject(new Error(`custody serve did not start: ${log}`)), 20000);
      proc.stderr.on("data", (b) => {
        log += b;
        const m = /msg=serving addr=127\.0\.0\.1:(\d+)/.exec(log);
        if (m) {
          clearTimeout(t);
          resolveP(Number(m[1]));
        }
      });
      proc.on("exit", (code) => reject(new Error(`custody serve exited ${code}: ${log}`)));
    });
    proc.stderr.resume();
  }

  async stop() {
    if (!this.proc) return;
    const p = this.proc;
    this.proc = null;
    await new Promise((r) => {
      // A server answers what is in flight, then exits; one that has not
      // after 20 s (a stream held open) is killed, so no test can hang here.
      const t = setTimeout(() => p.kill("SIGKILL"), 20000);
      p.on("exit", () => {
        clearTimeout(t);
        r();
      });
      p.kill("SIGTERM");
    });
  }

  async restart() {
    await this.stop();
    await this.serve();
  }

  /** Rotates the DENIAL-signing key (custody key rotate-denial, with the server stopped), then serves again. */
  async rotateDenialKey() {
    await this.stop();
    const out = JSON.parse(run(["key", "rotate-denial", "--dir", join(this.dir, "data"), "--admin-key", this.info.admin_key_file, "--json"]));
    await this.serve();
    return out;
  }

  async close() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  client(opts = {}) {
    return new Client(this.url, { logKey: this.logKey, ...opts });
  }

  admin(client = this.client()) {
    return new Runtime(client, this.adminKey, { name: this.info.admin_name });
  }

  /** Enrolls a new principal key under name and returns its runtime. */
  async principal(name, client = this.client()) {
    const key = generateKey();
    const a = await this.admin(client).appendOrThrow({ type: "PRINCIPAL", principal_id: `p_${name.replace(/[^a-z0-9]/gi, "_")}_${Date.now()}`, op: "enroll", name, public_key: key.publicKeyBase64 });
    if (!a.accepted) throw new Error("enroll failed");
    return new Runtime(client, key, { name });
  }

  /** A principal grants a fresh agent key a CONFIRM; returns { agent, grant }. */
  async agent(principal, name, workflow, limits, extra = {}) {
    const key = generateKey();
    const grant = `confirm_${workflow}_${Date.now()}`;
    await principal.confirm({ id: grant, workflow, grantee: name, granteeKey: key.publicKey, targets: ["t/*"], capabilities: ["act"], limits, ttlSeconds: 600, revocable: true, ...extra });
    return { agent: new Runtime(principal.client, key, { name }), grant, key };
  }
}

export function skipWithoutGo(t) {
  const ok = process.env.CUSTODY_BIN || spawnSync("go", ["version"]).status === 0;
  if (!ok) {
    if (process.env.CI) throw new Error("CI is set and there is no Go toolchain to build custody");
    t.skip("no Go toolchain to build custody");
    return true;
  }
  return false;
}
