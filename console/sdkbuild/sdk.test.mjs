// The browser bundle (console/assets/sdk.js) gives the answers the SDK
// built for Node gives (sdk/typescript/dist, `npm run build` there first):
// the same verdict on every bundle of the SDK's testdata, valid or not;
// the same canonical bytes, PAE and passkey challenge; the shared passkey
// vectors verify and are refused alike (P-256 over @noble/curves in the
// browser, OpenSSL in Node). scripts/ts.sh runs it after build.mjs --check.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import * as web from "../assets/sdk.js";
import * as node from "../../sdk/typescript/dist/index.js";

const testdata = new URL("../../sdk/typescript/testdata/", import.meta.url);
const read = (p) => readFileSync(new URL(p, testdata), "utf8");

test("every testdata bundle: the same verdict in the browser bundle as in Node", () => {
  const vkey = read("verify/log.vkey").trim();
  const files = readdirSync(new URL("verify/", testdata)).filter((f) => f.endsWith(".bundle.json"));
  assert.ok(files.length >= 5);
  let failed = 0;
  for (const f of files) {
    const text = read("verify/" + f);
    const a = web.verifyBundle(text, vkey), b = node.verifyBundle(text, vkey);
    assert.equal(a.valid, b.valid, f);
    assert.equal(a.failure, b.failure, f);
    assert.deepEqual([...a.entries.keys()], [...b.entries.keys()], f);
    if (!a.valid) failed++;
    // A flipped byte of the checkpoint's signature fails both.
    const bundle = JSON.parse(text);
    const cp = bundle.checkpoint;
    const at = cp.lastIndexOf(" ") + 5;
    bundle.checkpoint = cp.slice(0, at) + (cp[at] === "A" ? "B" : "A") + cp.slice(at + 1);
    const c = web.verifyBundle(JSON.stringify(bundle), vkey);
    assert.equal(c.valid, false, f + " with a forged checkpoint signature");
    assert.equal(c.failure, node.verifyBundle(JSON.stringify(bundle), vkey).failure);
  }
  assert.ok(failed >= 1, "the tampered bundle fails");
  assert.throws(() => web.KeySet.parse(vkey).openCheckpoint(read("verify/checkpoint.new").replace(/\n— /, "\n— x")));
});

test("canonical form, PAE, challenge and the shared passkey vectors, as in Node", () => {
  const v = JSON.parse(read("passkey.json"));
  const payload = Uint8Array.from(atob(v.valid.payload), (c) => c.charCodeAt(0));
  const doc = JSON.parse(new TextDecoder().decode(payload));
  assert.equal(web.canonicalize(doc), v.canonical_payload);
  assert.equal(web.canonicalize(doc), node.canonicalize(doc));
  assert.deepEqual([...web.statementBytes(doc)], [...node.statementBytes(doc)]);
  assert.equal(web.passkeyChallenge(web.pae(v.valid.payloadType, payload)), v.pae_sha256_b64url);
  const e = v.enrollment;
  const k = web.parsePasskey(e.key_type, e.public_key, e.rp_id, e.origins);
  assert.equal(k.keyId, e.keyid);
  web.checkPasskeyEnvelope(web.parseEnvelope(v.valid), k);
  web.checkPasskeyEnvelope(web.parseEnvelope(v.valid_twin.envelope), k);
  assert.ok(v.refused.length > 10);
  for (const r of v.refused) {
    let want;
    try {
      node.checkPasskeyEnvelope(node.parseEnvelope(r.envelope), node.parsePasskey(e.key_type, e.public_key, e.rp_id, e.origins));
    } catch (err) {
      want = err.message;
    }
    assert.ok(want, r.name);
    assert.throws(() => web.checkPasskeyEnvelope(web.parseEnvelope(r.envelope), k), (err) => err.message === want, r.name);
  }
  for (const bad of [{ a: 1.5 }, { a: 2 ** 53 }, { "\ud800": 1 }]) {
    assert.throws(() => web.canonicalize(bad));
    assert.throws(() => node.canonicalize(bad));
  }
});
