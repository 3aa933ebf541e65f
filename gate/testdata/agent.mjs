// An MCP agent built on the TypeScript SDK's Client
// (@modelcontextprotocol/sdk), for the gate's end-to-end test. It spawns
// the command after "--" (custody gate ...) over stdio, or with
// "--url URL" connects to a gate serving streamable HTTP; then it reads one
// JSON request a line on standard input and answers each with one JSON
// line on standard output, so that the Go test drives it step by step:
//
//   {"id":1,"op":"list"}                          -> {"id":1,"tools":["..."]}
//   {"id":2,"op":"call","tool":"write_file","args":{...},"progress":true}
//       -> {"id":2,"progress":1,"total":5}  (each progress notification)
//       -> {"id":2,"isError":false,"text":"..."}
//   {"id":3,"op":"resources"}   -> {"id":3,"resources":[uri...],"templates":[...]}
//   {"id":4,"op":"read","uri":"..."}              -> {"id":4,"text":"..."}
//   {"id":5,"op":"prompts"}                       -> {"id":5,"prompts":["..."]}
//   {"id":6,"op":"prompt","name":"...","args":{}} -> {"id":6,"text":"..."}
//   {"id":7,"op":"close"}                         -> {"id":7,"closed":true}
//
// Calls run concurrently; answers carry their request's id. A tools
// list_changed notification prints {"event":"tools_changed"}. At the end
// of its input it answers what is in flight, then hangs up.
//
// CUSTODY_MCP_DIR names the folder scripts/mcp.sh installed the SDK into.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { join } from "node:path";

const dir = process.env.CUSTODY_MCP_DIR;
if (!dir) {
  console.error("agent.mjs: set CUSTODY_MCP_DIR (scripts/mcp.sh prints it)");
  process.exit(2);
}
const sdk = (p) => import(pathToFileURL(join(dir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ToolListChangedNotificationSchema, CreateMessageRequestSchema } = await sdk("types.js");

const out = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const sep = process.argv.indexOf("--");
const urlAt = process.argv.indexOf("--url");
let transport;
if (urlAt >= 0 && urlAt + 1 < process.argv.length) {
  transport = new StreamableHTTPClientTransport(new URL(process.argv[urlAt + 1]));
} else if (sep >= 0 && sep + 1 < process.argv.length) {
  const [command, ...args] = process.argv.slice(sep + 1);
  transport = new StdioClientTransport({ command, args, stderr: "inherit", env: process.env });
} else {
  console.error("usage: node agent.mjs -- COMMAND [ARGS...] | node agent.mjs --url URL");
  process.exit(2);
}
const client = new Client({ name: "custody-e2e-agent", version: "1.0.0" }, { capabilities: { sampling: {} } });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => out({ event: "tools_changed" }));
// Sampling: answer an upstream's request (forwarded by the gate) with a
// canned message that names what it was asked.
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const asked = req.params.messages.map((m) => m.content?.text ?? "").join(" ");
  return { model: "e2e-canned", role: "assistant", content: { type: "text", text: "sampled by the agent: " + asked } };
});
await client.connect(transport);
out({ event: "connected", server: client.getServerVersion() });

async function handle(req) {
  try {
    switch (req.op) {
      case "list": {
        const res = await client.listTools();
        return out({ id: req.id, tools: res.tools.map((t) => t.name).sort() });
      }
      case "call": {
        const opts = { timeout: 120000 };
        if (req.progress) {
          opts.onprogress = (p) => out({ id: req.id, progress: p.progress, total: p.total });
        }
        const res = await client.callTool({ name: req.tool, arguments: req.args ?? {} }, undefined, opts);
        const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
        return out({ id: req.id, isError: res.isError === true, text });
      }
      case "resources": {
        const res = await client.listResources();
        const tmpl = await client.listResourceTemplates();
        return out({ id: req.id, resources: res.resources.map((r) => r.uri), templates: tmpl.resourceTemplates.map((t) => t.uriTemplate) });
      }
      case "read": {
        const res = await client.readResource({ uri: req.uri });
        return out({ id: req.id, text: res.contents.map((c) => c.text ?? "").join("\n") });
      }
      case "prompts": {
        const res = await client.listPrompts();
        return out({ id: req.id, prompts: res.prompts.map((p) => p.name).sort() });
      }
      case "prompt": {
        const res = await client.getPrompt({ name: req.name, arguments: req.args ?? {} });
        return out({ id: req.id, text: res.messages.map((m) => m.content?.text ?? "").join("\n") });
      }
      case "close":
        await client.close();
        out({ id: req.id, closed: true });
        process.exit(0);
      default:
        return out({ id: req.id, error: "unknown op " + req.op });
    }
  } catch (e) {
    out({ id: req.id, error: String(e?.message ?? e) });
  }
}

const inflight = new Set();
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line.trim() === "") return;
  const p = handle(JSON.parse(line));
  inflight.add(p);
  p.finally(() => inflight.delete(p));
});
rl.on("close", async () => {
  // End of input: answer what is in flight, then hang up.
  await Promise.allSettled([...inflight]);
  await client.close();
  process.exit(0);
});
