/**
 * Offline checks of a custody-bundle/v1 (DESIGN §6) in TypeScript.
 *
 * verifyBundle checks, with nothing but the log's checkpoint key(s):
 * - the checkpoint's signature (C2SP signed note) and its origin;
 * - every entry's inclusion proof against the checkpoint, entries in
 *   strictly increasing index order, the subject among them;
 * - every leaf's canonical form and schema, every statement's schema and
 *   `log` equal to the origin;
 * - GENESIS at index 0, signed by its own admin key, with a log_key that is
 *   one of the given checkpoint keys;
 * - every envelope's signature by the key the bundle binds to its key id
 *   (the admin key for GENESIS and PRINCIPAL, enrolled principals and
 *   grantees for the rest, and for DENIALs the DENIAL key in force at their
 *   index: GENESIS's log key, or the key the latest admin PRINCIPAL of op
 *   log_key before them names), and a DENIAL's rejected envelope when its
 *   signer is bound;
 * - both back-link chains complete: the subject's workflow back to its
 *   first leaf, and the trust chain from the subject's trust_head back to
 *   GENESIS.
 *
 * What it does NOT re-derive: the ledger's decisions. It does not re-run
 * authority (roles, attenuation, depth, liveness, STOPs, REVOKEs, budgets,
 * seq) or check that each DENIAL's reason is right. `custody verify` (Go)
 * does; use it where a decision itself is in question.
 */
import { createHash } from "node:crypto";
import { canonicalize } from "./canonical.js";
import { decodeBase64Strict, toHex } from "./encoding.js";
import { BoundKey, parseEnvelope, verifyEnvelope } from "./envelope.js";
import { parsePasskey } from "./passkey.js";
import { parseLeaf, ReadLeaf } from "./leaf.js";
import { leafHash, verifyInclusion } from "./merkle.js";
import { Checkpoint, KeySet, parseVerifierKey } from "./note.js";
import { parsePublicKey } from "./keys.js";
import type { Confirm, Delegate, Denial, Genesis, Principal } from "./statement.js";

export const BUNDLE_FORMAT = "custody-bundle/v1";

export interface Bundle {
  format: string;
  origin: string;
  checkpoint: string;
  subject: number;
  entries: { index: number; leaf: string; proof?: string[] }[];
}

export interface BundleCheck {
  name: string;
  ok: boolean;
  detail?: string;
}

export interface BundleVerdict {
  valid: boolean;
  /** The first failed check, as "name: detail" (undefined when valid). */
  failure?: string;
  /** Each check and its result, in the order run. */
  checks: BundleCheck[];
  checkpoint?: Checkpoint;
  /** The entries read, by index (when their leaves could be read). */
  entries: Map<number, ReadLeaf>;
  /** What this verifier leaves to `custody verify`. */
  notChecked: string[];
}

class Fail extends Error {
  constructor(readonly check: string, detail: string) {
    super(detail);
  }
}

const sha256hex = (b: Uint8Array) => toHex(createHash("sha256").update(b).digest());

/** verifyBundle checks a bundle (parsed JSON or its text) against the log's checkpoint key set; see the module comment. */
export function verifyBundle(input: Bundle | string, verifierKeys: string): BundleVerdict {
  const checks: BundleCheck[] = [];
  const entries = new Map<number, ReadLeaf>();
  const verdict: BundleVerdict = {
    valid: false, checks, entries,
    notChecked: ["the ledger's decisions (authority, attenuation, depth, liveness, STOPs, budgets, DENIAL reasons)", "seq and ids across the whole log (custody audit)"],
  };
  const pass = (name: string, detail?: string) => checks.push({ name, ok: true, ...(detail ? { detail } : {}) });
  try {
    let b: Bundle;
    try {
      b = typeof input === "string" ? (JSON.parse(input) as Bundle) : input;
    } catch (e) {
      throw new Fail("format", `not JSON: ${(e as Error).message}`);
    }
    if (b?.format !== BUNDLE_FORMAT) throw new Fail("format", `format ${JSON.stringify(b?.format)} is not ${BUNDLE_FORMAT}`);
    let keys: KeySet;
    try {
      keys = KeySet.parse(verifierKeys);
    } catch (e) {
      throw new Fail("key", (e as Error).message);
    }
    if (b.origin !== keys.origin) throw new Fail("origin", `bundle of log ${JSON.stringify(b.origin)}, key of ${JSON.stringify(keys.origin)}`);
    pass("format");
    let cp: Checkpoint;
    try {
      cp = keys.openCheckpoint(b.checkpoint);
    } catch (e) {
      throw new Fail("checkpoint", (e as Error).message);
    }
    verdict.checkpoint = cp;
    pass("checkpoint", `size ${cp.size}`);

    if (!Array.isArray(b.entries) || b.entries.length === 0) throw new Fail("inclusion", "no entries");
    let last = -1;
    for (const e of b.entries) {
      if (!Number.isSafeInteger(e.index) || e.index <= last) throw new Fail("inclusion", `entry ${e.index} is out of index order`);
      last = e.index;
      if (e.index >= cp.size) throw new Fail("inclusion", `entry ${e.index} is beyond the checkpoint's size ${cp.size}`);
      let leaf: Uint8Array;
      let proof: Uint8Array[];
      try {
        leaf = decodeBase64Strict(e.leaf);
        proof = (e.proof ?? []).map((h) => decodeBase64Strict(h));
      } catch (err) {
        throw new Fail("inclusion", `entry ${e.index}: ${(err as Error).message}`);
      }
      try {
        verifyInclusion(e.index, cp.size, leafHash(leaf), proof, cp.root);
      } catch (err) {
        throw new Fail("inclusion", `entry ${e.index}: ${(err as Error).message}`);
      }
      try {
        entries.set(e.index, parseLeaf(leaf));
      } catch (err) {
        throw new Fail("canonical", `entry ${e.index}: ${(err as Error).message}`);
      }
    }
    if (!entries.has(b.subject)) throw new Fail("inclusion", `the subject ${b.subject} is not among the entries`);
    pass("inclusion", `${entries.size} entries`);
    pass("canonical");

    for (const [i, r] of entries) {
      if (r.statement.log !== b.origin) throw new Fail("log", `entry ${i}: log ${JSON.stringify(r.statement.log)}, want ${JSON.stringify(b.origin)}`);
    }
    pass("log");

    const g = entries.get(0);
    if (!g || g.statement.type !== "GENESIS") throw new Fail("genesis", "entry 0 is not in the bundle as a GENESIS");
    const gen = g.statement as Genesis;
    let logPub: Uint8Array;
    try {
      logPub = parseVerifierKey(gen.log_key).publicKey;
    } catch (e) {
      throw new Fail("genesis", `log_key: ${(e as Error).message}`);
    }
    if (!keys.has(logPub)) throw new Fail("genesis", `GENESIS log_key ${gen.log_key} is not one of the given checkpoint keys`);
    pass("genesis");

    // Signatures, in log order, each by the key the bundle has bound to
    // its key id by then. GENESIS and PRINCIPAL are the admin's; DENIALs
    // are the DENIAL key's: GENESIS's log key until an admin PRINCIPAL of
    // op log_key names a new one, from that index on (the old one retired
    // for good). No log-role key ever signs a submission.
    const bound = new Map<string, BoundKey>();
    const bind = (b64: string) => {
      const pub = parsePublicKey(b64);
      bound.set(sha256hex(pub), pub);
    };
    // A passkey (DESIGN §1) is checked by the one passkey check, with its
    // enrolled rp_id and origins.
    const bindPrincipal = (p: Principal) => {
      if (p.key_type === undefined) return bind(p.public_key);
      const pk = parsePasskey(p.key_type, p.public_key, p.rp_id ?? "", p.origins ?? []);
      bound.set(pk.keyId, pk);
    };
    const logRole = new Set<string>([sha256hex(logPub)]);
    let denialKey = logPub;
    const adminKey = parsePublicKey(gen.admin_key);
    const adminId = sha256hex(adminKey);
    for (const [i, r] of entries) {
      const st = r.statement;
      let signer: BoundKey | undefined;
      const id = r.envelope.keyId;
      if (st.type === "GENESIS") {
        if (i !== 0) throw new Fail("genesis", `a second GENESIS at ${i}`);
        signer = adminKey;
      } else if (st.type === "PRINCIPAL") {
        signer = id === adminId ? adminKey : undefined;
      } else if (st.type === "DENIAL") {
        signer = id === sha256hex(denialKey) ? denialKey : undefined;
      } else {
        signer = logRole.has(id) ? undefined : bound.get(id);
      }
      if (!signer) throw new Fail("signature", `entry ${i} (${st.type}): key ${id} is not the key the bundle binds to sign it at this index`);
      if (!verifyEnvelope(r.envelope, signer)) throw new Fail("signature", `entry ${i} (${st.type}): the signature does not verify`);
      if (st.type === "PRINCIPAL") {
        const p = st as Principal;
        if (p.op === "enroll" || p.op === "add_key") bindPrincipal(p);
        if (p.op === "log_key") {
          if (p.name !== b.origin) throw new Fail("signature", `entry ${i}: a log_key statement names ${JSON.stringify(p.name)}, not the origin`);
          denialKey = parsePublicKey(p.public_key);
          logRole.add(sha256hex(denialKey));
        }
      }
      if (st.type === "CONFIRM" || st.type === "DELEGATE") bind((st as Confirm | Delegate).grantee.public_key);
      if (st.type === "DENIAL") {
        const d = st as Denial;
        if (d.envelope !== undefined) {
          const sum = createHash("sha256").update(canonicalize(d.envelope)).digest("hex");
          if (sum !== d.envelope_sha256) throw new Fail("denial", `DENIAL ${i}: envelope_sha256 is not the hash of its envelope`);
          const pub = bound.get(d.signer_keyid);
          if (pub) {
            let ok = false;
            try {
              const inner = parseEnvelope(d.envelope);
              ok = inner.keyId === d.signer_keyid && verifyEnvelope(inner, pub);
            } catch {
              ok = false;
            }
            if (!ok) throw new Fail("denial", `DENIAL ${i}: the rejected envelope's signature does not verify under its signer ${d.signer_keyid}`);
          }
        }
      }
    }
    pass("signature");

    // Back-links: the subject's workflow chain and the trust chain.
    const walk = (from: number, what: string): number => {
      let at = from;
      for (;;) {
        const r = entries.get(at);
        if (!r) throw new Fail("backlinks", `${what}: entry ${at} is missing`);
        const prev = r.leaf.prev_in_workflow;
        if (prev === undefined) return at;
        if (prev >= at) throw new Fail("backlinks", `${what}: entry ${at} links forward to ${prev}`);
        at = prev;
      }
    };
    walk(b.subject, "the subject's workflow");
    const subj = entries.get(b.subject)!;
    if (walk(subj.leaf.trust_head, "the trust chain") !== 0) throw new Fail("backlinks", "the trust chain does not lead back to GENESIS");
    pass("backlinks");
    verdict.valid = true;
  } catch (e) {
    const name = e instanceof Fail ? e.check : "bundle";
    checks.push({ name, ok: false, detail: (e as Error).message });
    verdict.failure = `${name}: ${(e as Error).message}`;
  }
  return verdict;
}
