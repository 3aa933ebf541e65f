// parseCanonical refuses what Go's canon.Parse refuses: a leading UTF-8
// byte order mark (TextDecoder drops one silently by default) and nesting
// deeper than Go's 32 levels (the top-level value is at depth 0; a value
// deeper than 32 is refused), with a CustodyFormatError, never a
// RangeError from a blown stack. canonicalize refuses to sign what the
// ledger would then refuse.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseCanonical, parseStatement, canonicalize, CustodyFormatError, MAX_DEPTH } from "../dist/index.js";

const enc = (s) => new TextEncoder().encode(s);
const bom = Uint8Array.from([0xef, 0xbb, 0xbf]);
const cat = (...parts) => Uint8Array.from(parts.flatMap((p) => [...p]));
const nest = (n) => "[".repeat(n) + "1" + "]".repeat(n);
const nestObj = (n) => '{"a":'.repeat(n) + "1" + "}".repeat(n);

function refused(f, re) {
  assert.throws(f, (e) => e instanceof CustodyFormatError && e.code === "non_canonical" && re.test(e.message), re.source);
}

test("a leading byte order mark is refused, as Go refuses it", () => {
  assert.deepEqual(parseCanonical(enc('{"a":1}')), { a: 1 });
  refused(() => parseCanonical(cat(bom, enc('{"a":1}'))), /byte order mark/);
  refused(() => parseCanonical("\ufeff" + '{"a":1}'), /byte order mark/);
  refused(() => parseCanonical(cat(enc(" "), bom, enc('{"a":1}'))), /./);
  refused(() => parseStatement("RECEIPT", cat(bom, enc('{"type":"RECEIPT"}'))), /byte order mark/);
  // Inside a string it is an ordinary character.
  assert.deepEqual(parseCanonical(cat(enc('{"a":"'), bom, enc('"}'))), { a: "\ufeff" });
});

test("nesting: 32 levels are read, 33 are refused, as in Go", () => {
  assert.equal(MAX_DEPTH, 32);
  assert.ok(parseCanonical(enc(nest(32))));
  assert.ok(parseCanonical(enc(nestObj(32))));
  refused(() => parseCanonical(enc(nest(33))), /deeper than 32/);
  refused(() => parseCanonical(enc(nestObj(33))), /deeper than 32/);
  refused(() => parseCanonical(enc(nest(1000))), /deeper than 32/);
  refused(() => parseCanonical(enc(nest(100000))), /deeper than 32/);
  // Brackets inside strings are not nesting.
  assert.ok(parseCanonical(enc(`{"a":"${"[".repeat(100)}\\"${"{".repeat(100)}"}`)));
  // What the SDK signs obeys the same limit.
  assert.equal(canonicalize(JSON.parse(nest(32))), nest(32));
  refused(() => canonicalize(JSON.parse(nest(33))), /deeper than 32/);
});

test("a server that is down: the error names the cause, not just 'fetch failed'", async () => {
  const { Client } = await import("../dist/index.js");
  const { readFileSync } = await import("node:fs");
  const net = await import("node:net");
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const port = srv.address().port;
  await new Promise((r) => srv.close(r));
  const logKey = readFileSync(new URL("../testdata/keyset/old.vkey", import.meta.url), "utf8").trim();
  const c = new Client(`http://127.0.0.1:${port}`, { logKey, retries: 1 });
  await assert.rejects(c.head(), (e) => {
    assert.match(e.message, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${port}`), e.message);
    return true;
  });
});
