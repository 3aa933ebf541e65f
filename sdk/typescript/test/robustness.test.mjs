// Bad input: every reader throws an Error (never anything else, never
// hangs) or accepts, and no mutation of a signed or proven byte is ever
// accepted. Seeded, so a failure reproduces.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseCanonical, parseLeaf, parseEnvelope, KeySet, verifyBundle, parseStatement } from "../dist/index.js";

const td = (f) => readFileSync(new URL(`../testdata/${f}`, import.meta.url), "utf8");

function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s ^ (s >>> 15), 2246822507) + 0x9e3779b9) >>> 0) / 2 ** 32);
}

function mutate(bytes, r) {
  const b = Buffer.from(bytes);
  const n = 1 + Math.floor(r() * 3);
  for (let k = 0; k < n; k++) {
    const i = Math.floor(r() * b.length);
    b[i] = r() < 0.5 ? b[i] ^ (1 << Math.floor(r() * 8)) : Math.floor(r() * 256);
  }
  return b;
}

test("mutated checkpoints never open unless the signed text is unchanged", () => {
  const ks = KeySet.parse(td("verify/log.vkey"));
  const cp = Buffer.from(td("verify/checkpoint.new"));
  const text = cp.toString().slice(0, cp.toString().indexOf("\n\n") + 1);
  const r = rng(1);
  for (let i = 0; i < 2000; i++) {
    const m = mutate(cp, r);
    let ok = false;
    try {
      ks.openCheckpoint(m);
      ok = true;
    } catch (e) {
      assert.ok(e instanceof Error);
    }
    if (ok) assert.ok(m.toString().startsWith(text + "\n") && m.subarray(0, cp.indexOf("\n\n") + 2).equals(cp.subarray(0, cp.indexOf("\n\n") + 2)), `accepted ${JSON.stringify(m.toString())}`);
  }
});

test("mutated leaves, envelopes and payloads throw Errors", () => {
  const bundle = JSON.parse(td("verify/workflow.bundle.json"));
  const r = rng(2);
  for (const e of bundle.entries) {
    const leaf = Buffer.from(e.leaf, "base64");
    for (let i = 0; i < 150; i++) {
      const m = mutate(leaf, r);
      for (const f of [() => parseLeaf(m), () => parseCanonical(m), () => parseEnvelope(m), () => parseStatement("RECEIPT", m)]) {
        try {
          f();
        } catch (err) {
          assert.ok(err instanceof Error, String(err));
        }
      }
    }
  }
});

test("no single mutation of a bundle's leaves, proofs or checkpoint verifies", () => {
  const vkey = td("verify/log.vkey");
  const b = JSON.parse(td("verify/workflow.bundle.json"));
  assert.ok(verifyBundle(b, vkey).valid);
  const r = rng(3);
  for (let i = 0; i < 300; i++) {
    const t = structuredClone(b);
    const e = t.entries[Math.floor(r() * t.entries.length)];
    const which = r();
    if (which < 0.45) {
      const leaf = mutate(Buffer.from(e.leaf, "base64"), r);
      if (leaf.equals(Buffer.from(e.leaf, "base64"))) continue;
      e.leaf = leaf.toString("base64");
    } else if (which < 0.8 && e.proof?.length) {
      const j = Math.floor(r() * e.proof.length);
      const h = mutate(Buffer.from(e.proof[j], "base64"), r);
      if (h.equals(Buffer.from(e.proof[j], "base64"))) continue;
      e.proof[j] = h.toString("base64");
    } else {
      const head = t.checkpoint.slice(0, t.checkpoint.indexOf("\n\n") + 1);
      const m = mutate(Buffer.from(head), r).toString();
      if (m === head) continue;
      t.checkpoint = m + t.checkpoint.slice(head.length);
    }
    const v = verifyBundle(t, vkey);
    assert.equal(v.valid, false, `mutation ${i} verified`);
  }
});
