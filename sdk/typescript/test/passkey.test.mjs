// Passkeys (DESIGN §1): the shared vectors (../shared/vectors/passkey.json,
// copied into testdata/) verify and are refused byte for byte as in Go, a
// software authenticator's broken fields are each refused, and a passkey
// STOP accepted by the Go ledger verifies in a bundle here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createHash, generateKeyPairSync, sign as nodeSign, randomBytes } from "node:crypto";
import { Ledger, skipWithoutGo } from "./harness.mjs";
import {
  parseEnvelope, verifyEnvelope, checkPasskeyEnvelope, parsePasskey, pae, passkeyChallenge, dedupHash, canonicalize, verifyBundle, validateStatement,
} from "../dist/index.js";

const v = JSON.parse(readFileSync(new URL("../testdata/passkey.json", import.meta.url), "utf8"));

// The field each refused vector must be refused on, and what the reason says:
// the same table as sign/passkey_test.go.
const reasons = {
  wrong_origin: ["bad_signature", "client_data_json.origin", "is not one of the enrolled origins"],
  cross_origin: ["bad_signature", "client_data_json.crossOrigin", "crossOrigin is true"],
  wrong_type: ["bad_signature", "client_data_json.type", "is not webauthn.get"],
  wrong_challenge: ["bad_signature", "client_data_json.challenge", "the SHA-256 of this envelope's PAE"],
  no_user_verification: ["bad_signature", "authenticator_data.flags", "user-verified (UV) flag is not set"],
  no_user_presence: ["bad_signature", "authenticator_data.flags", "user-present (UP) flag is not set"],
  wrong_rp_id: ["bad_signature", "authenticator_data.rpIdHash", "SHA-256 of rp_id"],
  bad_signature: ["bad_signature", "signature", "does not verify"],
  short_authenticator_data: ["bad_signature", "authenticator_data", "shorter than 37"],
  duplicate_key_in_client_data: ["bad_signature", "client_data_json", "twice"],
  top_origin: ["bad_signature", "client_data_json.topOrigin", "topOrigin member"],
  attested_data_flag: ["bad_signature", "authenticator_data.flags", "attested-credential-data (AT)"],
  backup_state_without_eligible: ["bad_signature", "authenticator_data.flags", "backup-state (BS) is set without backup-eligible"],
  padded_base64url: ["bad_envelope", "sig.signature", "unpadded base64url"],
};

const enr = v.enrollment;
const key = () => parsePasskey(enr.key_type, enr.public_key, enr.rp_id, enr.origins);

function check(env) {
  const p = parseEnvelope(env);
  checkPasskeyEnvelope(p, key());
  return p;
}

test("the shared passkey vectors: valid, its twin, and each variant refused for its reason", () => {
  const k = key();
  assert.equal(k.keyId, enr.keyid);
  const payload = Buffer.from(v.valid.payload, "base64");
  assert.equal(payload.toString("utf8"), v.canonical_payload);
  assert.equal(passkeyChallenge(pae(v.valid.payloadType, payload)), v.pae_sha256_b64url);
  const p1 = check(v.valid);
  const p2 = check(v.valid_twin.envelope);
  assert.ok(verifyEnvelope(p1, k) && verifyEnvelope(p2, k));
  assert.notEqual(v.valid.signatures[0].sig, v.valid_twin.envelope.signatures[0].sig);
  assert.equal(dedupHash(p1), dedupHash(p2), "the (r, n-s) twin is a repeat");
  assert.equal(Object.keys(reasons).length, v.refused.length);
  for (const r of v.refused) {
    const [code, path, says] = reasons[r.name];
    assert.throws(() => check(r.envelope), (e) => {
      assert.equal(e.code, code, `${r.name}: ${e.message}`);
      assert.ok(e.path.endsWith(path), `${r.name}: path ${e.path}, want ${path}`);
      assert.ok(e.message.includes(says), `${r.name}: ${e.message}`);
      return true;
    }, r.name);
    let p;
    try { p = parseEnvelope(r.envelope); } catch { continue; }
    assert.equal(verifyEnvelope(p, k), false, r.name);
  }
});

// A software authenticator: a P-256 key that signs as a browser would.
class SoftAuthn {
  constructor(rpId = "custody.example.com", origin = "https://custody.example.com") {
    const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
    this.priv = privateKey;
    this.spki = publicKey.export({ format: "der", type: "spki" });
    this.rpId = rpId;
    this.origin = origin;
    this.keyId = createHash("sha256").update(this.spki).digest("hex");
    this.credentialId = randomBytes(16).toString("base64");
  }
  enrollment() {
    return { key_type: "webauthn-es256", public_key: this.spki.toString("base64"), credential_id: this.credentialId, rp_id: this.rpId, origins: [this.origin] };
  }
  sign(kind, payload, o = {}) {
    const pt = `application/vnd.custody.${kind.toLowerCase()}.v1+json`;
    let cd = `{"type":${JSON.stringify(o.type ?? "webauthn.get")},"challenge":${JSON.stringify(o.challenge ?? passkeyChallenge(pae(pt, payload)))},"origin":${JSON.stringify(o.origin ?? this.origin)},"crossOrigin":${o.crossOrigin ?? false}`;
    if (o.topOrigin) cd += `,"topOrigin":${JSON.stringify(o.topOrigin)}`;
    cd = Buffer.from(cd + "}");
    const ad = Buffer.concat([createHash("sha256").update(o.rpId ?? this.rpId).digest(), Buffer.from([o.flags ?? 0x05, 0, 0, 0, 0]), o.extra ?? Buffer.alloc(0)]);
    const sig = nodeSign("sha256", Buffer.concat([ad, createHash("sha256").update(cd).digest()]), this.priv);
    if (o.corrupt) sig[sig.length - 1] ^= 1;
    const obj = canonicalize({ authenticator_data: ad.toString("base64url"), client_data_json: cd.toString("base64url"), signature: sig.toString("base64url") });
    return { payloadType: pt, payload: Buffer.from(payload).toString("base64"), signatures: [{ keyid: this.keyId, sig: Buffer.from(obj).toString("base64") }] };
  }
}

test("a software authenticator: honest, then each broken field refused", () => {
  const a = new SoftAuthn();
  const k = parsePasskey("webauthn-es256", a.enrollment().public_key, a.rpId, [a.origin]);
  const payload = Buffer.from('{"type":"STOP"}');
  assert.ok(verifyEnvelope(parseEnvelope(a.sign("STOP", payload)), k));
  for (const [name, o, path] of [
    ["type", { type: "webauthn.create" }, "client_data_json.type"],
    ["challenge", { challenge: "AAAA" }, "client_data_json.challenge"],
    ["origin", { origin: "https://evil.example" }, "client_data_json.origin"],
    ["crossOrigin", { crossOrigin: true }, "client_data_json.crossOrigin"],
    ["topOrigin", { topOrigin: "https://custody.example.com" }, "client_data_json.topOrigin"],
    ["rpIdHash", { rpId: "example.com" }, "authenticator_data.rpIdHash"],
    ["UP", { flags: 0x04 }, "authenticator_data.flags"],
    ["UV", { flags: 0x01 }, "authenticator_data.flags"],
    ["BS", { flags: 0x15 }, "authenticator_data.flags"],
    ["AT", { flags: 0x45 }, "authenticator_data.flags"],
    ["trailing", { extra: Buffer.from([0xa0]) }, "authenticator_data"],
    ["signature", { corrupt: true }, "signature"],
  ]) {
    const p = parseEnvelope(a.sign("STOP", payload, o));
    assert.throws(() => checkPasskeyEnvelope(p, k), (e) => e.path === `signatures[0].sig.${path}`, name);
  }
  // Key type: an Ed25519 key never verifies an assertion.
  assert.equal(verifyEnvelope(parseEnvelope(a.sign("STOP", payload)), new Uint8Array(32)), false);
});

test("a passkey STOP accepted by the Go ledger verifies in a TypeScript bundle", async (t) => {
  if (skipWithoutGo(t)) return;
  const lg = await Ledger.start();
  try {
    const c = lg.client();
    const alice = await lg.principal("user:alice", c);
    const a = new SoftAuthn();
    const enroll = { type: "PRINCIPAL", principal_id: "p_alice_phone", op: "add_key", name: "user:alice", ...a.enrollment() };
    validateStatement({ ...enroll, timestamp: "2026-01-01T00:00:00Z", log: lg.origin, actor: "admin", seq: 9 });
    const r = await lg.admin(c).appendOrThrow(enroll);
    assert.ok(r.accepted);
    const { grant } = await lg.agent(alice, "agent:pk1", "wf_pk", {});
    assert.ok(grant);
    const st = { type: "STOP", timestamp: new Date().toISOString().slice(0, 19) + "Z", log: lg.origin, actor: "user:alice", seq: 1,
      request_id: "stop_pk", workflow_id: "wf_pk", stop_scope: "chain", takeover_mode: "human", reason: "from my phone" };
    const env = a.sign("STOP", Buffer.from(canonicalize(st)));
    const res = await c.append(JSON.stringify(env));
    assert.equal(res.verdict, "accepted");
    const again = await c.append(JSON.stringify(a.sign("STOP", Buffer.from(canonicalize(st)))));
    assert.equal(again.index, res.index);
    assert.equal(again.duplicate, true);
    const b = await c.bundle("stop_pk");
    const verdict = verifyBundle(b, lg.logKey);
    assert.ok(verdict.valid, verdict.failure);
  } finally {
    await lg.close();
  }
});
