/**
 * Witnesses (DESIGN §5): C2SP tlog-cosignature `cosignature/v1` keys and
 * signatures, and witness policies in the tlog-policy grammar custody uses
 * (the Go package witness's, docs/FORMATS.md "Witness policy"):
 *
 *     witness NAME VKEY [URL]
 *     group NAME N|any|all MEMBER...
 *     quorum NAME|none
 *     log VKEY [URL]          (read and ignored here)
 *
 * A cosignature line on a checkpoint is `— <key name> base64(key id[4] ||
 * timestamp[8, big-endian] || Ed25519 signature[64])`, the signature over
 * "cosignature/v1\ntime <timestamp>\n" followed by the checkpoint's text.
 * The key id is SHA-256(name || "\n" || 0x04 || key)[:4]; a policy may also
 * give a witness's key as an Ed25519 signed-note key (type 0x01, its own
 * key hash), and it is then used for cosignatures the same way.
 */
import { createHash } from "node:crypto";
import { decodeBase64Strict } from "./encoding.js";
import { verifySignature } from "./keys.js";

export interface WitnessKey {
  name: string;
  /** The cosignature/v1 key id. */
  id: number;
  publicKey: Uint8Array;
}

function keyId(name: string, alg: number, pub: Uint8Array): number {
  return createHash("sha256").update(name).update(Buffer.from([0x0a, alg])).update(pub).digest().readUInt32BE(0);
}

function validName(name: string): boolean {
  return name !== "" && !/\s/u.test(name) && !name.includes("+");
}

/** parseWitnessKey reads a witness's verifier key (type 0x04 cosignature/v1, or 0x01 Ed25519). */
export function parseWitnessKey(vkey: string): WitnessKey {
  const i = vkey.indexOf("+");
  const j = i < 0 ? -1 : vkey.indexOf("+", i + 1);
  if (i < 0 || j < 0) throw new Error(`${JSON.stringify(vkey)} is not a verifier key (<name>+<key id>+<base64 key>)`);
  const name = vkey.slice(0, i), idHex = vkey.slice(i + 1, j), b64 = vkey.slice(j + 1);
  if (!validName(name)) throw new Error(`verifier key ${JSON.stringify(vkey)}: invalid key name`);
  if (!/^[0-9a-fA-F]{8}$/.test(idHex)) throw new Error(`verifier key ${JSON.stringify(vkey)}: the key id is not 8 hex digits`);
  let raw: Uint8Array;
  try {
    raw = decodeBase64Strict(b64);
  } catch {
    throw new Error(`verifier key ${JSON.stringify(vkey)}: the key is not standard base64`);
  }
  const alg = raw[0];
  if (alg !== 0x04 && alg !== 0x01) throw new Error(`verifier key ${JSON.stringify(vkey)}: signature type 0x${(alg ?? 0).toString(16)} is not a witness key type (0x04 cosignature/v1, or 0x01 Ed25519)`);
  const pub = raw.subarray(1);
  if (pub.length !== 32) throw new Error(`verifier key ${JSON.stringify(vkey)}: an Ed25519 key is 32 bytes, not ${pub.length}`);
  if (parseInt(idHex, 16) !== keyId(name, alg, pub)) throw new Error(`verifier key ${JSON.stringify(vkey)}: the key id does not match the key`);
  return { name, id: keyId(name, 0x04, pub), publicKey: pub };
}

/** cosignatureMessage is what a cosignature/v1 signature covers. */
export function cosignatureMessage(text: string, timestamp: bigint): Uint8Array {
  return new Uint8Array(Buffer.from(`cosignature/v1\ntime ${timestamp}\n${text}`, "utf8"));
}

interface Component {
  name: string;
  witness?: { name: string; key: WitnessKey; url: string };
  n: number;
  members: number[];
  required: boolean;
}

export interface Cosignature {
  /** The witness's name in the policy. */
  witness: string;
  keyName: string;
  time: Date;
}

export interface WitnessEvaluation {
  satisfied: boolean;
  quorum: string;
  signed: Cosignature[];
  /** Witnesses whose cosignature is present but does not verify. */
  invalid: string[];
  /** Witnesses the quorum can need that did not cosign. */
  missing: string[];
}

const KEYWORDS = new Set(["witness", "group", "any", "all", "none", "quorum", "log"]);

/** A witness policy: which witnesses must cosign a checkpoint. */
export class WitnessPolicy {
  readonly #comps: Component[];
  readonly #quorum: number;

  private constructor(comps: Component[], quorum: number) {
    this.#comps = comps;
    this.#quorum = quorum;
  }

  /** parse reads a policy file's text; errors name the line. */
  static parse(text: string): WitnessPolicy {
    if (Buffer.byteLength(text) > 64 << 10) throw new Error("policy: more than 64 KiB");
    const comps: Component[] = [];
    const byName = new Map<string, number>();
    let quorum = "", quorumLine = 0;
    text.split("\n").forEach((raw, i) => {
      const ln = i + 1;
      const line = raw.includes("#") ? raw.slice(0, raw.indexOf("#")) : raw;
      const f = line.trim().split(/\s+/).filter(Boolean);
      if (f.length === 0) return;
      const fail = (msg: string) => new Error(`policy line ${ln}: ${msg}`);
      const newName = (name: string) => {
        if (KEYWORDS.has(name)) throw fail(`${JSON.stringify(name)} is a keyword and cannot name a witness or group`);
        if (byName.has(name)) throw fail(`${JSON.stringify(name)} is defined twice`);
        if (comps.length === 256) throw fail("more than 256 witnesses and groups");
      };
      switch (f[0]) {
        case "log":
          if (f.length < 2 || f.length > 3) throw fail(`want \`log VKEY [URL]\`, got ${f.length} fields`);
          return;
        case "witness": {
          if (f.length < 3 || f.length > 4) throw fail(`want \`witness NAME VKEY [URL]\`, got ${f.length} fields`);
          const name = f[1]!;
          newName(name);
          let key: WitnessKey;
          try {
            key = parseWitnessKey(f[2]!);
          } catch (e) {
            throw fail(`witness ${name}: ${(e as Error).message}`);
          }
          if (comps.some((c) => c.witness && c.witness.key.name === key.name && c.witness.key.id === key.id)) throw fail(`witness ${name} has the same key as another witness`);
          byName.set(name, comps.length);
          comps.push({ name, witness: { name, key, url: (f[3] ?? "").replace(/\/+$/, "") }, n: 0, members: [], required: false });
          return;
        }
        case "group": {
          if (f.length < 4) throw fail(`want \`group NAME N|any|all MEMBER...\`, got ${f.length} fields`);
          const [, name, thr, ...members] = f as [string, string, string, ...string[]];
          newName(name);
          const idx: number[] = [];
          for (const m of members) {
            const j = byName.get(m);
            if (j === undefined) throw fail(`group ${name}: member ${JSON.stringify(m)} is not a witness or group defined above`);
            if (idx.includes(j)) throw fail(`group ${name}: member ${JSON.stringify(m)} is listed twice`);
            idx.push(j);
          }
          let n: number;
          if (thr === "any") n = 1;
          else if (thr === "all") n = members.length;
          else {
            if (!/^[1-9][0-9]{0,2}$/.test(thr) || Number(thr) > 255) throw fail(`group ${name}: threshold ${JSON.stringify(thr)} is not a number from 1 to 255, any or all`);
            n = Number(thr);
            if (n > members.length) throw fail(`group ${name}: threshold ${n} is more than its ${members.length} members`);
          }
          byName.set(name, comps.length);
          comps.push({ name, n, members: idx, required: false });
          return;
        }
        case "quorum":
          if (f.length !== 2) throw fail(`want \`quorum NAME\`, got ${f.length} fields`);
          if (quorum) throw fail(`a second quorum (the first is on line ${quorumLine})`);
          quorum = f[1]!;
          quorumLine = ln;
          return;
        default:
          throw fail(`unknown keyword ${JSON.stringify(f[0])} (want log, witness, group or quorum)`);
      }
    });
    if (!quorum) throw new Error("policy: no `quorum` line: say which witness or group must cosign (or `quorum none`)");
    if (quorum === "none") return new WitnessPolicy(comps, -1);
    const q = byName.get(quorum);
    if (q === undefined) throw new Error(`policy line ${quorumLine}: quorum ${JSON.stringify(quorum)} is not a witness or group defined in the policy`);
    const mark = (j: number) => {
      if (comps[j]!.required) return;
      comps[j]!.required = true;
      comps[j]!.members.forEach(mark);
    };
    mark(q);
    return new WitnessPolicy(comps, q);
  }

  /** Whether the policy needs no witness (`quorum none`). */
  get none(): boolean {
    return this.#quorum < 0;
  }

  toString(): string {
    return this.#quorum < 0 ? "no witnesses (quorum none)" : this.#describe(this.#quorum);
  }

  #describe(j: number): string {
    const c = this.#comps[j]!;
    if (c.witness) return `witness ${c.name}`;
    const parts = c.members.map((m) => (this.#comps[m]!.witness ? this.#comps[m]!.name : `(${this.#describe(m)})`));
    return `group ${c.name}: ${c.n} of [${parts.join(" ")}]`;
  }

  /**
   * evaluate says which witnesses cosigned a checkpoint (signed note text)
   * and whether they meet the quorum. It checks only cosignatures; open the
   * checkpoint with the log's keys as well.
   */
  evaluate(checkpoint: string): WitnessEvaluation {
    const ev: WitnessEvaluation = { satisfied: false, quorum: this.toString(), signed: [], invalid: [], missing: [] };
    const split = checkpoint.lastIndexOf("\n\n");
    const text = split < 0 ? "" : checkpoint.slice(0, split + 1);
    const lines = split < 0 ? [] : checkpoint.slice(split + 2).split("\n").filter((l) => l !== "");
    const signed = new Array<boolean>(this.#comps.length).fill(false);
    this.#comps.forEach((c, j) => {
      if (!c.witness) return;
      const k = c.witness.key;
      let state: "signed" | "invalid" | "missing" = "missing";
      for (const line of lines) {
        if (!line.startsWith("\u2014 ")) continue;
        const rest = line.slice(2);
        const sp = rest.indexOf(" ");
        if (sp < 0 || rest.slice(0, sp) !== k.name) continue;
        const sig = Buffer.from(rest.slice(sp + 1), "base64");
        if (sig.length < 4 || sig.readUInt32BE(0) !== k.id) continue;
        const body = sig.subarray(4);
        const ts = body.length === 72 ? body.readBigUInt64BE(0) : -1n;
        if (ts < 0n || ts > (1n << 63n) - 1n || !text || !verifySignature(k.publicKey, cosignatureMessage(text, ts), body.subarray(8))) {
          state = "invalid";
          break;
        }
        state = "signed";
        ev.signed.push({ witness: c.name, keyName: k.name, time: new Date(Number(ts) * 1000) });
        break;
      }
      if (state === "signed") signed[j] = true;
      else if (state === "invalid") ev.invalid.push(c.name);
      else if (c.required) ev.missing.push(c.name);
    });
    if (this.#quorum < 0) {
      ev.satisfied = true;
      return ev;
    }
    this.#comps.forEach((c, j) => {
      if (c.witness) return;
      signed[j] = c.members.filter((m) => signed[m]).length >= c.n;
    });
    ev.satisfied = signed[this.#quorum]!;
    return ev;
  }
}
