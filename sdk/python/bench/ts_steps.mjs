// Runs N gated steps (Runtime.execute, a step that does nothing) through the
// TypeScript SDK, C at a time, and prints "steps N seconds S".
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [dist, n, conc] = [process.argv[2], Number(process.argv[3] ?? 600), Number(process.argv[4] ?? 32)];
const { Client, Runtime, loadPrivateKey } = await import(pathToFileURL(dist).href);
const env = process.env;
const client = new Client(env.CUSTODY_URL, { logKey: env.CUSTODY_LOG_KEY });
const rt = new Runtime(client, loadPrivateKey(readFileSync(env.CUSTODY_AGENT_KEY)), { name: env.CUSTODY_AGENT_NAME });
let next = 0;
const start = performance.now();
await Promise.all(Array.from({ length: conc }, async () => {
  for (;;) {
    const i = ++next;
    if (i > n) return;
    await rt.execute({ stepId: `s${i}`, action: "act", target: "t/x", auth: env.CUSTODY_GRANT }, () => ({}));
  }
}));
console.log(`steps ${n} seconds ${((performance.now() - start) / 1000).toFixed(3)}`);
