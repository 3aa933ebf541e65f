// The repository's own vectors (copied into testdata/ from ../../testdata):
// canonical JSON (strict mode), scope hashes computed apart from the Go
// code, Go-made bundles (valid and invalid), a consistency proof between
// two checkpoints, and the documented examples. The TypeScript side gets
// the same answer on each.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseCanonical, canonicalize, scopeHash, verifyBundle, KeySet, verifyConsistency, parseLeaf, parseEnvelope, WitnessPolicy } from "../dist/index.js";

const td = (f) => readFileSync(new URL(`../testdata/${f}`, import.meta.url), "utf8");

test("canonical JSON vectors (strict mode): same verdict, same bytes", () => {
  const d = JSON.parse(td("canon/vectors.json"));
  const strict = d.cases.filter((c) => c.mode === "strict");
  assert.ok(strict.length >= 20);
  for (const c of strict) {
    const bytes = c.input_hex ? Buffer.from(c.input_hex, "hex") : Buffer.from(c.input);
    let got = "ok";
    try {
      const v = parseCanonical(bytes);
      if (c.canonical !== undefined) assert.equal(canonicalize(v), c.canonical, c.name);
    } catch (e) {
      got = e.code;
    }
    assert.equal(got, c.want, c.name);
  }
});

test("scope hash vectors (computed by Python, apart from the Go code)", () => {
  const d = JSON.parse(td("scope/hashes.json"));
  for (const v of d.vectors) {
    assert.equal(canonicalize(v.descriptor), v.jcs, v.name);
    assert.equal(scopeHash(v.descriptor), v.scope_hash, v.name);
  }
});

test("Go-made bundles: the valid ones verify, the invalid ones do not", () => {
  const vkey = td("verify/log.vkey");
  for (const f of ["denial", "genesis", "outcome", "receipt", "workflow"]) {
    const v = verifyBundle(td(`verify/${f}.bundle.json`), vkey);
    assert.ok(v.valid, `${f}: ${v.failure}`);
  }
  const tampered = verifyBundle(td("verify/tampered-proof.invalid.bundle.json"), vkey);
  assert.match(tampered.failure, /^inclusion/);
  // A widening DELEGATE is a wrong decision: custody verify re-runs the
  // decision function and catches it; this verifier does not (it is in
  // notChecked), but every proof and signature in it is genuine.
  const rogue = verifyBundle(td("verify/rogue-widening.invalid.bundle.json"), vkey);
  assert.ok(rogue.valid, rogue.failure);
  assert.ok(rogue.notChecked.some((s) => /attenuation/.test(s)));
  assert.ok(verifyBundle(td("examples/receipt.bundle.json"), td("examples/verifier-key.txt")).valid);
});

test("the consistency proof between two Go checkpoints verifies", () => {
  const ks = KeySet.parse(td("verify/log.vkey"));
  const older = ks.openCheckpoint(td("verify/checkpoint.old"));
  const newer = ks.openCheckpoint(td("verify/checkpoint.new"));
  const proof = td("verify/consistency.proof").trim().split("\n").map((h) => Buffer.from(h, "base64"));
  verifyConsistency(older.size, newer.size, proof, older.root, newer.root);
  const bad = proof.map((h, i) => (i === 0 ? Buffer.alloc(32) : h));
  assert.throws(() => verifyConsistency(older.size, newer.size, bad, older.root, newer.root));
  assert.throws(() => verifyConsistency(older.size, newer.size, proof, newer.root, newer.root));
});

test("documented examples: a cosigned checkpoint opens (witness signatures ignored), the CONFIRM leaf reads", () => {
  const ks = KeySet.parse(td("examples/verifier-key.txt"));
  const plain = ks.openCheckpoint(td("examples/checkpoint.txt"));
  const cosigned = ks.openCheckpoint(td("examples/checkpoint.cosigned.txt"));
  assert.equal(cosigned.size, plain.size);
  const env = parseEnvelope(td("examples/confirm.envelope.json"));
  assert.equal(env.kind, "CONFIRM");
  const leafDoc = JSON.parse(td("examples/confirm.leaf.json"));
  const leaf = parseLeaf(Buffer.from(canonicalize(leafDoc)));
  assert.equal(leaf.statement.type, "CONFIRM");
});

test("witness policy: the documented cosigned checkpoint meets the documented policy; a bad or missing cosignature does not", () => {
  const p = WitnessPolicy.parse(td("examples/witnesses.policy"));
  assert.equal(p.toString(), "group public: 2 of [w1 w2 w3]");
  const cp = td("examples/checkpoint.cosigned.txt");
  const ev = p.evaluate(cp);
  assert.ok(ev.satisfied, JSON.stringify(ev));
  assert.deepEqual(ev.signed.map((s) => s.witness), ["w1", "w3"]);
  assert.deepEqual(ev.missing, ["w2"]);
  // One cosignature damaged: invalid, and 1 of 3 is not a quorum.
  const lines = cp.split("\n");
  const i = lines.findIndex((l) => l.startsWith("— witness3"));
  const bad = [...lines];
  bad[i] = bad[i].slice(0, -6) + (bad[i].slice(-6, -5) === "A" ? "B" : "A") + bad[i].slice(-5);
  const ev2 = p.evaluate(bad.join("\n"));
  assert.equal(ev2.satisfied, false);
  assert.deepEqual(ev2.invalid, ["w3"]);
  // One removed: not a quorum either.
  assert.equal(p.evaluate(lines.filter((_, j) => j !== i).join("\n")).satisfied, false);
  // The checkpoint's text changed: no cosignature verifies.
  assert.equal(p.evaluate(cp.replace("\n6\n", "\n7\n")).satisfied, false);
  // The log's own signature is unaffected by the cosignatures.
  assert.equal(KeySet.parse(td("examples/verifier-key.txt")).openCheckpoint(cp).size, 6);
  assert.ok(WitnessPolicy.parse("quorum none").evaluate(td("examples/checkpoint.txt")).satisfied);
  for (const badPolicy of ["witness w1 x+00000000+AAAA\nquorum w1", "group g 1 nobody\nquorum g", "witness any " + td("examples/witnesses.policy").split("\n")[1].split(" ")[2] + "\nquorum any", ""]) {
    assert.throws(() => WitnessPolicy.parse(badPolicy), /policy/);
  }
});
