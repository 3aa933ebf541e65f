// Known answers (../shared/vectors/known-answers.json, copied into
// testdata/): the SDK reproduces them byte for byte, and the strict
// profile refuses what the Go side refuses.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  canonicalize, scopeHash, privateKeyFromSeed, signStatement, parseEnvelope, verifyEnvelope, pae, parseStatement,
  loadPrivateKey, generateKey, checkPublicKey, CustodyFormatError, seal, validateStatement, deriveDescriptor, canonicalSet, KeySet,
} from "../dist/index.js";

const ka = JSON.parse(readFileSync(new URL("../testdata/known-answers.json", import.meta.url), "utf8"));

test("scope hashes of the known answers", () => {
  assert.ok(ka.scope_hash.length >= 3);
  for (const v of ka.scope_hash) {
    assert.equal(scopeHash(v.descriptor), v.scope_hash, v.name);
  }
});

test("the known CONFIRM envelope, byte for byte", () => {
  const e = ka.envelope;
  const key = privateKeyFromSeed(Buffer.from(e.private_key_seed_hex, "hex"));
  assert.equal(key.keyId, e.key_id);
  assert.equal(key.publicKeyBase64, e.public_key_base64);
  const grantee = privateKeyFromSeed(Buffer.from(e.grantee_seed_hex, "hex"));
  const st = JSON.parse(e.canonical_payload);
  assert.equal(st.grantee.public_key, grantee.publicKeyBase64);
  assert.equal(canonicalize(st), e.canonical_payload);
  // Sealing recomputes the same scope_hash the vector carries.
  const copy = { ...st, scope_hash: "" };
  assert.equal(seal(copy).scope_hash, st.scope_hash);
  const p = parseEnvelope(e.envelope);
  assert.equal(Buffer.from(pae(p.payloadType, p.payload)).toString("hex"), e.pae_hex);
  const text = signStatement(key, st);
  assert.equal(text, canonicalize(e.envelope));
  assert.ok(verifyEnvelope(parseEnvelope(text), key.publicKey));
  assert.deepEqual(parseStatement("CONFIRM", Buffer.from(e.canonical_payload)), st);
});

test("the strict profile refuses fractions, null, empty arrays and objects", () => {
  for (const bad of [1.5, { a: null }, { a: [] }, { a: {} }, {}, [], -0, 2 ** 53, NaN, { a: [1, undefined] }, "\ud800", new Date(0), { a: 1e300 }]) {
    assert.throws(() => canonicalize(bad), CustodyFormatError, JSON.stringify(bad));
  }
  assert.equal(canonicalize({ b: 1, a: [true, "x"], c: undefined }), '{"a":[true,"x"],"b":1}');
  assert.equal(canonicalize(9007199254740991), "9007199254740991");
});

test("scope descriptors: non-canonical sets are refused", () => {
  const base = ka.scope_hash[0].descriptor;
  const cases = [
    { ...base, capabilities: ["submit_form", "purchase"] }, // unsorted
    { ...base, capabilities: ["purchase", "purchase"] }, // duplicate
    { ...base, targets: ["a/*", "a/b"] }, // covered
    { ...base, step_ids: ["*"] }, // optional ["*"]
    { ...base, targets: [] },
    { ...base, expires_at: "2026-03-19T08:27:00.5Z" },
    { ...base, limits: { budget_usd: 1.5 } },
    { ...base, workflow_id: "wf/../x" },
    { ...base, targets: ["a*"] },
  ];
  for (const d of cases) assert.throws(() => scopeHash(d), (e) => e.code === "non_canonical", JSON.stringify(d));
  assert.deepEqual(canonicalSet(["b", "a/x", "a/*", "b"]), ["a/*", "b"]);
});

test("statements: closed schemas and field rules", () => {
  const st = JSON.parse(ka.envelope.canonical_payload);
  validateStatement(st);
  assert.throws(() => validateStatement({ ...st, extra: 1 }), (e) => e.code === "schema_invalid" && e.path === "extra");
  assert.throws(() => validateStatement({ ...st, seq: 0 }), (e) => e.path === "seq");
  assert.throws(() => validateStatement({ ...st, timestamp: "2026-03-19T08:12:00.000Z" }), (e) => e.path === "timestamp");
  assert.throws(() => validateStatement({ ...st, grantee: { ...st.grantee, public_key: Buffer.alloc(32).toString("base64") } }), (e) => e.path === "grantee.public_key");
  assert.throws(() => signStatement(generateKey(), { ...st, scope_hash: "0".repeat(64) }), (e) => e.path === "scope_hash");
  const pending = { type: "RECEIPT", timestamp: st.timestamp, log: st.log, actor: "agent:a", seq: 1, receipt_id: "r1", workflow_id: "wf", step_id: "s",
    action: "act", target: "t", authorization_ref: "c1", result: "pending", scope_hash: st.scope_hash };
  validateStatement(pending);
  assert.throws(() => validateStatement({ ...pending, pending_ref: "x" }), (e) => e.path === "pending_ref");
  assert.throws(() => validateStatement({ ...pending, result: "success" }), (e) => e.path === "pending_ref");
  const stop = { type: "STOP", timestamp: st.timestamp, log: st.log, actor: "user:a", seq: 3, request_id: "s1", workflow_id: "wf", stop_scope: "step",
    takeover_mode: "human", reason: "why" };
  assert.throws(() => validateStatement(stop), (e) => e.path === "step_id");
  validateStatement({ ...stop, step_id: "step_3" });
  assert.throws(() => validateStatement({ ...stop, stop_scope: "chain", takeover_to: "agent:b" }), (e) => e.path === "takeover_to");
});

test("keys: PKCS#8 PEM round trip, encrypted too; small-order keys refused", () => {
  const k = generateKey();
  const again = loadPrivateKey(k.toPEM());
  assert.equal(again.keyId, k.keyId);
  const enc = k.toPEM("correct horse");
  assert.match(enc, /BEGIN ENCRYPTED PRIVATE KEY/);
  assert.equal(loadPrivateKey(enc, "correct horse").keyId, k.keyId);
  assert.throws(() => loadPrivateKey(enc, "wrong"), (e) => e.code === "bad_key");
  assert.throws(() => loadPrivateKey(enc), (e) => e.code === "bad_key");
  assert.throws(() => loadPrivateKey(k.publicKeyPEM()), (e) => e.code === "bad_key");
  checkPublicKey(k.publicKey);
  const identity = new Uint8Array(32); identity[0] = 1;
  assert.throws(() => checkPublicKey(identity), /small-order/);
  const order8 = Buffer.from("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", "hex");
  assert.throws(() => checkPublicKey(order8), /small-order/);
  const big = Buffer.alloc(32, 0xff); big[31] = 0x7f; big[0] = 0xee;
  assert.throws(() => checkPublicKey(big), /non-canonical/);
  // A prime-order key plus the point of order 2, (0, -1): (x, y) -> (-x, -y),
  // a valid curve point outside the prime-order subgroup.
  const P = (1n << 255n) - 19n;
  const good = generateKey().publicKey;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? good[i] & 0x7f : good[i]);
  const sign = good[31] >> 7;
  let y2 = P - y;
  const mixed = Buffer.alloc(32);
  for (let i = 0; i < 32; i++) { mixed[i] = Number(y2 & 0xffn); y2 >>= 8n; }
  mixed[31] |= (1 - sign) << 7;
  assert.throws(() => checkPublicKey(mixed), /prime-order subgroup/);
  assert.throws(() => checkPublicKey(mixed), /prime-order subgroup/); // the cached verdict too
});

test("descriptor of a grant: expires_at is timestamp + ttl", () => {
  const d = deriveDescriptor({ workflow_id: "wf", capabilities: ["a"], targets: ["t"] }, undefined, "2026-12-31T23:59:00Z", 120);
  assert.equal(d.expires_at, "2027-01-01T00:01:00Z");
  const leap = deriveDescriptor({ workflow_id: "wf", capabilities: ["a"], targets: ["t"] }, undefined, "2028-02-28T12:00:00Z", 86400);
  assert.equal(leap.expires_at, "2028-02-29T12:00:00Z");
});

test("DENIAL: envelope_size only when the envelope is left out", () => {
  const d = { type: "DENIAL", timestamp: "2026-03-19T08:12:30Z", log: "example.com/custody", actor: "example.com/custody", seq: 1, denial_id: "denial:5",
    envelope_sha256: "e".repeat(64), signer_keyid: "1".repeat(64), statement_type: "RECEIPT", reason_code: "limit_exceeded", reason: "too big" };
  validateStatement({ ...d, envelope_size: 60000 });
  validateStatement(d);
  const envelope = { payload: "e30=", payloadType: "application/vnd.custody.receipt.v1+json", signatures: [{ keyid: "1".repeat(64), sig: "AAAA" }] };
  validateStatement({ ...d, envelope });
  assert.throws(() => validateStatement({ ...d, envelope, envelope_size: 60000 }), (e) => e.path === "envelope_size");
  assert.throws(() => validateStatement({ ...d, envelope_size: 0 }), (e) => e.path === "envelope_size");
});

// testdata/keyset (copied from the repository's testdata/keyset, made by
// merkle.TestKeySetVectors): a rotated log's key set, the old key retired
// at size 150 and pinned to its root, and the verdict of each checkpoint
// under the set and under the old key alone, the same as Go's.
test("checkpoint key rotation: the Go vectors' verdicts", () => {
  const dir = new URL("../testdata/keyset/", import.meta.url);
  const read = (f) => readFileSync(new URL(f, dir), "utf8");
  const set = KeySet.parse(read("log.keys"));
  const old = KeySet.parse(read("old.vkey"));
  assert.equal(set.keys.length, 2);
  assert.equal(KeySet.parse(set.toString()).toString(), set.toString());
  for (const [file, underSet, underOld] of [
    ["checkpoint-before.txt", false, true],
    ["checkpoint-during.txt", true, true],
    ["checkpoint-after.txt", true, false],
    ["checkpoint-old-key-late.txt", false, true],
    ["checkpoint-old-key-pin.txt", true, true],
    ["checkpoint-old-key-other-past.txt", false, true],
  ]) {
    const cp = read(file);
    const ok = (ks) => { try { ks.openCheckpoint(cp); return true; } catch { return false; } };
    assert.equal(ok(set), underSet, `${file} under log.keys`);
    assert.equal(ok(old), underOld, `${file} under old.vkey`);
  }
  // A damaged signature by a known key fails even beside a good one.
  const during = read("checkpoint-during.txt").replace(/po2acny/, "po2acnz");
  assert.throws(() => set.openCheckpoint(during));
});

// testdata/statement/payloads.json (copied from the repository's
// testdata/statement, the Go statement package's table): every payload
// gets the same verdict here, ok or the same code naming the same field.
test("statement payloads: the Go table's verdicts, code and field", () => {
  const d = JSON.parse(readFileSync(new URL("../testdata/statement/payloads.json", import.meta.url), "utf8"));
  assert.ok(d.cases.length >= 50);
  for (const c of d.cases) {
    let got = "ok", path;
    try {
      const st = parseStatement(c.kind, Buffer.from(c.payload));
      // What parses re-encodes to the same bytes, as Go's Marshal does.
      assert.equal(canonicalize(st), c.payload, `${c.name}: re-encoded`);
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      got = e.code ?? e.message;
      path = e.path;
    }
    assert.equal(got, c.want, c.name);
    if (c.path !== undefined) assert.equal(path, c.path, c.name);
  }
});

// The PRINCIPAL of op log_key (DESIGN v3: rotating the DENIAL key), made
// by the Go code (statement.LogKeyRotation, TestLogKeyVectorsAreGoMade):
// the valid one parses and re-encodes byte for byte, and each broken one
// is refused for the field Go names.
test("statement payloads: the log_key PRINCIPAL vectors", () => {
  const d = JSON.parse(readFileSync(new URL("../testdata/statement/payloads.json", import.meta.url), "utf8"));
  const cases = d.cases.filter((c) => c.name.startsWith("log_key "));
  assert.ok(cases.length >= 5, `only ${cases.length} log_key cases`);
  const valid = cases.filter((c) => c.want === "ok");
  assert.equal(valid.length, 1);
  const st = parseStatement("PRINCIPAL", Buffer.from(valid[0].payload));
  assert.equal(st.op, "log_key");
  assert.equal(st.name, st.log, "a log_key statement names the log's origin");
  assert.equal(canonicalize(st), valid[0].payload);
  validateStatement(st);
  for (const c of cases.filter((c) => c.want !== "ok")) {
    assert.throws(() => parseStatement(c.kind, Buffer.from(c.payload)), (e) => e.code === c.want && e.path === c.path, c.name);
  }
});
