// Quick start: paste into a file in a project that has
// the package installed (sdk/typescript/README.md says how), then run
//
//   CUSTODY_URL=http://127.0.0.1:8080 \
//   CUSTODY_LOG_KEY="$(custody checkpoint --dir ./custody-data --verifier-key)" \
//   CUSTODY_AGENT_KEY=./agent.key CUSTODY_GRANT=confirm_42c1 \
//   node quickstart.mjs
//
// The agent key must be the grantee of the grant CUSTODY_GRANT (a CONFIRM
// or DELEGATE), which allows capability "purchase" on the target below and
// has a budget_usd limit.
import { readFileSync } from "node:fs";
import { Client, Runtime, loadPrivateKey, NotExecutedError, StoppedError } from "@custodylog/custody";

const client = new Client(process.env.CUSTODY_URL ?? "http://127.0.0.1:8080", {
  logKey: process.env.CUSTODY_LOG_KEY, // out of band: every answer is checked against it
});
const key = loadPrivateKey(readFileSync(process.env.CUSTODY_AGENT_KEY ?? "./agent.key"), process.env.CUSTODY_PASSPHRASE);
const agent = new Runtime(client, key, {
  hooks: {
    emitReceipt: (a) => console.log(`ledger: ${a.verdict} at index ${a.index}${a.reason_code ? ` (${a.reason_code})` : ""}`),
    onStop: (stop) => console.log(`STOP ${stop.request_id}: ${stop.reason}`),
  },
});

// Your irreversible step. Here it only waits a moment, honouring signal.
async function book(signal) {
  signal.throwIfAborted(); // a STOP may have come before we listen
  await new Promise((resolve, reject) => {
    const t = setTimeout(resolve, 100);
    signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
  return "PNR-7Q2X";
}

try {
  const ex = await agent.execute(
    { stepId: "step_3", action: "purchase", target: "airline_portal/account_123", auth: process.env.CUSTODY_GRANT ?? "confirm_42c1", reserve: { budget_usd: 742 } },
    async (signal) => {
      // The irreversible step runs only now: the pending receipt is durable
      // and verified. Pass signal on (to fetch, your SDK calls, ...), so a
      // STOP aborts the work.
      const booking = await book(signal);
      return { consumed: { budget_usd: 742 }, sideEffects: { booking } };
    },
  );
  console.log("done; outcome at index", ex.outcome.index);
} catch (e) {
  if (e instanceof NotExecutedError) console.error("not executed:", e.cause?.message ?? e.message);
  else if (e instanceof StoppedError) console.error("stopped:", e.message);
  else throw e;
  process.exitCode = 1;
}
