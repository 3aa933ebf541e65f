// Reads hex-encoded inputs, one a line, and writes what the TypeScript SDK
// says of each: its strict reading (parseCanonical) and a relaxed one
// (JSON.parse, then canonicalize). "ok <hex>" or "err <code>", tab-separated,
// as tests/canonhelper writes Go's answers.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const dist = process.argv[2];
const { parseCanonical, canonicalize } = await import(pathToFileURL(dist).href);
const hex = (s) => Buffer.from(s, "utf8").toString("hex");
const code = (e) => "err " + (e && typeof e.code === "string" ? e.code : "other");

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  const data = Buffer.from(line, "hex");
  let strict, relaxed;
  try {
    parseCanonical(new Uint8Array(data));
    strict = "ok " + data.toString("hex");
  } catch (e) {
    strict = code(e);
  }
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(data);
    relaxed = "ok " + hex(canonicalize(JSON.parse(text)));
  } catch (e) {
    relaxed = code(e);
  }
  process.stdout.write(`${strict}\t${relaxed}\n`);
}
