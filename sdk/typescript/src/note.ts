/**
 * C2SP signed notes and tlog-checkpoints, as custody's checkpoints are
 * written (DESIGN §5), and the checkpoint key set of a log that rotated its
 * checkpoint key (docs/FORMATS.md): one verifier key a line, a retired key
 * followed by `max_size=N`, the largest tree size it may vouch for.
 *
 * A retired key is pinned to the head it was retired at
 * (`max_size=N root=R`): alone it vouches for exactly that checkpoint, never
 * for another history (DESIGN §6, merkle.KeySet in Go). The SDK talks to a
 * live log, whose fresh checkpoints its current key signs, so it does not
 * offer the Go verifier's "older checkpoint proven consistent with the pin".
 *
 * A note verifies when at least one signature by a key of the set verifies
 * over the note's text and no signature claiming to be by a key of the set
 * fails (golang.org/x/mod/sumdb/note's rule); signatures by other keys
 * (witness cosignatures) are ignored.
 */
import { createHash } from "node:crypto";
import { decodeBase64Strict } from "./encoding.js";
import { verifySignature } from "./keys.js";

/** A parsed signed-note verifier key: `<name>+<hash>+<base64(0x01 || key)>`. */
export interface VerifierKey {
  text: string;
  name: string;
  /** The key hash: SHA-256(name || "\n" || 0x01 || key)[:4], big-endian. */
  hash: number;
  publicKey: Uint8Array;
}

/** A checkpoint's content. */
export interface Checkpoint {
  origin: string;
  size: number;
  /** The 32-byte RFC 6962 root hash. */
  root: Uint8Array;
}

function isValidName(name: string): boolean {
  return name !== "" && !/\s/u.test(name) && !name.includes("+");
}

function keyHash(name: string, pub: Uint8Array): number {
  return createHash("sha256").update(name).update(Buffer.from([0x0a, 0x01])).update(pub).digest().readUInt32BE(0);
}

/** parseVerifierKey reads an Ed25519 signed-note verifier key and checks its key hash. */
export function parseVerifierKey(text: string): VerifierKey {
  const i = text.indexOf("+");
  const j = i < 0 ? -1 : text.indexOf("+", i + 1);
  if (i < 0 || j < 0) throw new Error(`${JSON.stringify(text)} is not <name>+<hash>+<key>`);
  const name = text.slice(0, i), hashHex = text.slice(i + 1, j), b64 = text.slice(j + 1);
  if (!isValidName(name)) throw new Error(`${JSON.stringify(text)}: invalid key name`);
  if (!/^[0-9a-f]{8}$/.test(hashHex)) throw new Error(`${JSON.stringify(text)}: the key hash is not 8 hex digits`);
  let raw: Uint8Array;
  try {
    raw = decodeBase64Strict(b64);
  } catch {
    throw new Error(`${JSON.stringify(text)}: the key is not standard base64`);
  }
  if (raw.length !== 33 || raw[0] !== 0x01) throw new Error(`${JSON.stringify(text)} is not an Ed25519 verifier key`);
  const pub = raw.subarray(1);
  const hash = parseInt(hashHex, 16);
  if (keyHash(name, pub) !== hash) throw new Error(`${JSON.stringify(text)}: the key hash does not match the key`);
  return { text, name, hash, publicKey: pub };
}

/** verifierKeyOf writes the verifier key of an Ed25519 public key under a name. */
export function verifierKeyOf(name: string, publicKey: Uint8Array): string {
  const h = keyHash(name, publicKey).toString(16).padStart(8, "0");
  return `${name}+${h}+${Buffer.concat([Buffer.from([1]), publicKey]).toString("base64")}`;
}

interface SetKey extends VerifierKey {
  /** undefined: a current key. */
  maxSize?: number;
  /** A retired key's pinned root at maxSize (undefined if the set does not say: then it vouches for nothing alone). */
  root?: Uint8Array;
}

/** The most keys one set may hold (as in Go), so a hostile key file cannot make every check slow. */
export const MAX_KEY_SET_KEYS = 16;

/** The set of checkpoint keys trusted for one log. */
export class KeySet {
  readonly origin: string;
  readonly keys: readonly SetKey[];

  private constructor(origin: string, keys: SetKey[]) {
    this.origin = origin;
    this.keys = keys;
  }

  /** parse reads one verifier key, or a key set one key a line (`# comments` and blank lines ignored). */
  static parse(text: string): KeySet {
    const keys: SetKey[] = [];
    let origin = "";
    text.split("\n").forEach((raw, i) => {
      const line = raw.trim();
      if (line === "" || line.startsWith("#")) return;
      const fields = line.split(/\s+/);
      if (fields.length > 3) throw new Error(`checkpoint key set, line ${i + 1}: want a verifier key and at most max_size=N root=R`);
      const k: SetKey = parseVerifierKey(fields[0]!);
      if (fields.length >= 2) {
        const m = /^max_size=(0|[1-9][0-9]*)$/.exec(fields[1]!);
        if (!m || !Number.isSafeInteger(Number(m[1]))) throw new Error(`checkpoint key set, line ${i + 1}: ${JSON.stringify(fields[1])} is not max_size=<decimal tree size>`);
        k.maxSize = Number(m[1]);
      }
      if (fields.length === 3) {
        const v = fields[2]!.startsWith("root=") ? fields[2]!.slice(5) : "";
        let raw: Uint8Array | undefined;
        try {
          raw = decodeBase64Strict(v);
        } catch {
          raw = undefined;
        }
        if (!raw || raw.length !== 32) throw new Error(`checkpoint key set, line ${i + 1}: ${JSON.stringify(fields[2])} is not root=<base64 SHA-256 root hash>`);
        k.root = raw;
      }
      if (origin === "") origin = k.name;
      else if (k.name !== origin) throw new Error(`checkpoint key set, line ${i + 1}: key ${k.text} is for log ${JSON.stringify(k.name)}, the set's first key for ${JSON.stringify(origin)}`);
      if (keys.some((o) => Buffer.from(o.publicKey).equals(Buffer.from(k.publicKey)))) throw new Error(`checkpoint key set, line ${i + 1}: key ${k.text} is listed twice`);
      if (keys.length === MAX_KEY_SET_KEYS) throw new Error(`checkpoint key set holds more than ${MAX_KEY_SET_KEYS} keys`);
      keys.push(k);
    });
    if (keys.length === 0) throw new Error("no checkpoint verifier key given");
    return new KeySet(origin, keys);
  }

  /** The verifier keys that may sign checkpoints of any size. */
  current(): string[] {
    return this.keys.filter((k) => k.maxSize === undefined).map((k) => k.text);
  }

  /** Whether the raw Ed25519 public key is in the set, current or retired. */
  has(publicKey: Uint8Array): boolean {
    return this.keys.some((k) => Buffer.from(k.publicKey).equals(Buffer.from(publicKey)));
  }

  /** Whether the verifier key is in the set. */
  contains(vkey: string): boolean {
    return this.keys.some((k) => k.text === vkey);
  }

  toString(): string {
    if (this.keys.length === 1 && this.keys[0]!.maxSize === undefined) return this.keys[0]!.text;
    return this.keys
      .map((k) => k.text + (k.maxSize === undefined ? "" : ` max_size=${k.maxSize}`) + (k.root ? ` root=${Buffer.from(k.root).toString("base64")}` : "") + "\n")
      .join("");
  }

  /**
   * openCheckpoint verifies a signed checkpoint of this log and returns its
   * content. It throws unless the note is well-formed, every signature by a
   * key of the set verifies, at least one is by a current key or by a
   * retired key pinned to exactly this size and root, and the body is exactly the three lines custody
   * writes (origin, canonical decimal size, canonical base64 of a 32-byte
   * root).
   */
  openCheckpoint(note: string | Uint8Array): Checkpoint {
    const { text, sigs } = openNote(note, this);
    const lines = text.split("\n");
    if (lines.length !== 4 || lines[3] !== "") throw new Error(`checkpoint body is not three lines: ${JSON.stringify(text)}`);
    const [origin, sizeText, rootText] = lines as [string, string, string];
    if (origin !== this.origin) throw new Error(`checkpoint origin ${JSON.stringify(origin)}, want ${JSON.stringify(this.origin)}`);
    if (!/^(0|[1-9][0-9]*)$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) throw new Error(`checkpoint size ${JSON.stringify(sizeText)} is not a canonical decimal`);
    let root: Uint8Array;
    try {
      root = decodeBase64Strict(rootText);
    } catch {
      throw new Error(`checkpoint root ${JSON.stringify(rootText)} is not canonical base64`);
    }
    if (root.length !== 32) throw new Error(`checkpoint root is ${root.length} bytes, want 32`);
    const size = Number(sizeText);
    const retired: string[] = [];
    for (const k of sigs) {
      if (k.maxSize === undefined) return { origin, size, root };
      if (k.root && size === k.maxSize && Buffer.from(root).equals(Buffer.from(k.root))) return { origin, size, root };
      retired.push(`${k.name}+${k.hash.toString(16).padStart(8, "0")} (retired at size ${k.maxSize}${k.root ? "" : ", root not given in the key set"})`);
    }
    throw new Error(`a checkpoint of size ${size} is signed only by ${retired.join(", ")}, which vouches only for the head it was retired at`);
  }
}

/**
 * openNote checks a signed note against a key set and returns its text and
 * the keys whose signatures verified. Malformed notes, a bad signature by a
 * known key, or no signature by a known key are errors.
 */
export function openNote(note: string | Uint8Array, keys: KeySet): { text: string; sigs: SetKey[] } {
  let msg: string;
  if (typeof note === "string") {
    msg = note;
  } else {
    try {
      msg = new TextDecoder("utf-8", { fatal: true }).decode(note);
    } catch {
      throw new Error("malformed note: not UTF-8");
    }
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0009\u000b-\u001f]/.test(msg) || /[\ud800-\udfff]/.test(msg.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ""))) {
    throw new Error("malformed note: control characters or invalid UTF-8");
  }
  const split = msg.lastIndexOf("\n\n");
  if (split < 0) throw new Error("malformed note: no signature block");
  const text = msg.slice(0, split + 1);
  let sigBlock = msg.slice(split + 2);
  if (sigBlock === "" || !sigBlock.endsWith("\n")) throw new Error("malformed note: the signature block does not end in a newline");
  const textBytes = Buffer.from(text, "utf8");
  const verified: SetKey[] = [];
  const seen = new Set<string>();
  let n = 0;
  while (sigBlock.length > 0) {
    const i = sigBlock.indexOf("\n");
    let line = sigBlock.slice(0, i);
    sigBlock = sigBlock.slice(i + 1);
    if (!line.startsWith("\u2014 ")) throw new Error("malformed note: a signature line does not start with an em dash");
    line = line.slice(2);
    const sp = line.indexOf(" ");
    const name = sp < 0 ? line : line.slice(0, sp);
    const b64 = sp < 0 ? "" : line.slice(sp + 1);
    const sig = b64 !== "" && /^[A-Za-z0-9+/]*={0,2}$/.test(b64) ? Buffer.from(b64, "base64") : Buffer.alloc(0);
    if (!isValidName(name) || sig.length < 5) throw new Error("malformed note: bad signature line");
    if (++n > 100) throw new Error("malformed note: more than 100 signatures");
    const hash = sig.readUInt32BE(0);
    const k = keys.keys.find((x) => x.name === name && x.hash === hash);
    if (!k) continue; // another party's signature (a witness): neither helps nor hurts
    const id = `${name}+${hash}`;
    if (seen.has(id)) continue;
    seen.add(id);
    if (!verifySignature(k.publicKey, textBytes, sig.subarray(4))) {
      throw new Error(`invalid signature by ${name}+${hash.toString(16).padStart(8, "0")}`);
    }
    verified.push(k);
  }
  if (verified.length === 0) throw new Error(`the note is not signed by ${keys.keys.map((k) => k.text.split("+").slice(0, 2).join("+")).join(" or ")}`);
  return { text, sigs: verified };
}
