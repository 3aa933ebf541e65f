/**
 * Ed25519 keys (DESIGN §1): PKCS#8 PEM private keys, interoperable with
 * `openssl genpkey -algorithm ed25519` and `custody key`, optionally
 * passphrase-encrypted; public keys as the standard base64 of their raw 32
 * bytes inside statements; a key id is the lowercase hex SHA-256 of the raw
 * public key. Signing and verifying are node:crypto's Ed25519.
 *
 * Wherever a key is bound (a grantee, an enrolled principal) the ledger
 * refuses small-order and non-canonical public keys; checkPublicKey applies
 * the same test here, so a runtime finds out before it signs.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, sign as nodeSign, verify as nodeVerify } from "node:crypto";
import { CustodyKeyError } from "./errors.js";
import { decodeBase64Strict } from "./encoding.js";

const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** keyId is the lowercase hex SHA-256 of a raw 32-byte public key. */
export function keyId(publicKey: Uint8Array): string {
  return createHash("sha256").update(publicKey).digest("hex");
}

/** An Ed25519 private key with its public half. */
export class PrivateKey {
  /** The raw 32-byte public key. */
  readonly publicKey: Uint8Array;
  /** The key id: lowercase hex SHA-256 of the public key. */
  readonly keyId: string;
  readonly #key: KeyObject;

  constructor(key: KeyObject) {
    if (key.type !== "private" || key.asymmetricKeyType !== "ed25519") {
      throw new CustodyKeyError(`want an Ed25519 private key, got a ${key.asymmetricKeyType ?? "?"} ${key.type} key`);
    }
    this.#key = key;
    const spki = createPublicKey(key).export({ format: "der", type: "spki" });
    this.publicKey = new Uint8Array(spki.subarray(spki.length - 32));
    this.keyId = keyId(this.publicKey);
  }

  /** The public key as statements carry it: standard base64 of the raw 32 bytes. */
  get publicKeyBase64(): string {
    return Buffer.from(this.publicKey).toString("base64");
  }

  /** sign returns the 64-byte Ed25519 signature of message. */
  sign(message: Uint8Array): Uint8Array {
    return new Uint8Array(nodeSign(null, message, this.#key));
  }

  /**
   * toPEM writes the key as PKCS#8 PEM; with a passphrase, as PBES2
   * (PBKDF2-HMAC-SHA256, AES-256-CBC) EncryptedPrivateKeyInfo, which
   * `custody` and `openssl pkcs8` read.
   */
  toPEM(passphrase?: string): string {
    if (passphrase !== undefined) {
      return this.#key.export({ format: "pem", type: "pkcs8", cipher: "aes-256-cbc", passphrase }) as string;
    }
    return this.#key.export({ format: "pem", type: "pkcs8" }) as string;
  }

  /** The public key as PKIX (SubjectPublicKeyInfo) PEM, as `custody key` writes public key files. */
  publicKeyPEM(): string {
    return createPublicKey(this.#key).export({ format: "pem", type: "spki" }) as string;
  }
}

/**
 * loadPrivateKey reads a PKCS#8 PEM Ed25519 private key (as `custody key new`
 * and `openssl genpkey -algorithm ed25519` write it); an encrypted one
 * (BEGIN ENCRYPTED PRIVATE KEY) needs its passphrase.
 */
export function loadPrivateKey(pem: string | Uint8Array, passphrase?: string): PrivateKey {
  const text = typeof pem === "string" ? pem : Buffer.from(pem).toString("utf8");
  const blocks = text.match(/-----BEGIN [A-Z ]+-----/g) ?? [];
  if (blocks.length !== 1) {
    throw new CustodyKeyError(`want exactly one PEM block, found ${blocks.length}`);
  }
  if (!/-----BEGIN (ENCRYPTED )?PRIVATE KEY-----/.test(text)) {
    throw new CustodyKeyError(`want a PKCS#8 "PRIVATE KEY" or "ENCRYPTED PRIVATE KEY" PEM block, got ${blocks[0]}`);
  }
  const encrypted = text.includes("BEGIN ENCRYPTED PRIVATE KEY");
  if (encrypted && passphrase === undefined) {
    throw new CustodyKeyError("the private key is passphrase-encrypted: give its passphrase");
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(encrypted ? { key: text, format: "pem", passphrase } : { key: text, format: "pem" });
  } catch (e) {
    throw new CustodyKeyError(`not a usable PKCS#8 private key${encrypted ? " (or a wrong passphrase)" : ""}: ${(e as Error).message}`);
  }
  return new PrivateKey(key);
}

/** privateKeyFromSeed makes the Ed25519 key of a 32-byte seed (RFC 8032), as in the known-answer vectors. */
export function privateKeyFromSeed(seed: Uint8Array): PrivateKey {
  if (seed.length !== 32) throw new CustodyKeyError(`an Ed25519 seed is 32 bytes, got ${seed.length}`);
  return new PrivateKey(createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" }));
}

/** generateKey makes a fresh Ed25519 key. */
export function generateKey(): PrivateKey {
  return new PrivateKey(generateKeyPairSync("ed25519").privateKey);
}

/** verifySignature checks an Ed25519 signature by a raw 32-byte public key (after checkPublicKey). */
export function verifySignature(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  try {
    const k = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: "der", type: "spki" });
    return nodeVerify(null, message, k, signature);
  } catch {
    return false;
  }
}

/** parsePublicKey reads a statement's public key (standard base64 of 32 raw bytes) and checks it. */
export function parsePublicKey(b64: string): Uint8Array {
  let raw: Uint8Array;
  try {
    raw = decodeBase64Strict(b64);
  } catch (e) {
    throw new CustodyKeyError(`public key ${JSON.stringify(b64)}: ${(e as Error).message}`);
  }
  checkPublicKey(raw);
  return raw;
}

/** encodePublicKey is the standard base64 of a raw public key. */
export function encodePublicKey(publicKey: Uint8Array): string {
  return Buffer.from(publicKey).toString("base64");
}

// Edwards25519 arithmetic for checkPublicKey only (never for signing): the
// curve -x^2 + y^2 = 1 + d x^2 y^2 over GF(2^255-19), RFC 8032 §5.1.
const P = (1n << 255n) - 19n;
const D = (-121665n * inv(121666n)) % P;
const SQRT_M1 = pow(2n, (P - 1n) / 4n);
/** The order of the prime-order subgroup (RFC 8032 §5.1: L). */
const L = (1n << 252n) + 27742317777372353535851937790883648493n;

function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}
function pow(b: bigint, e: bigint): bigint {
  let r = 1n;
  b = mod(b);
  while (e > 0n) {
    if (e & 1n) r = (r * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return r;
}
function inv(a: bigint): bigint {
  return pow(a, P - 2n);
}

type Point = [bigint, bigint, bigint, bigint]; // extended coordinates X, Y, Z, T

// add is the unified addition of extended twisted Edwards coordinates with
// a = -1 (add-2008-hwcd-3), complete on this curve.
function add(p: Point, q: Point): Point {
  const [x1, y1, z1, t1] = p;
  const [x2, y2, z2, t2] = q;
  const a = mod((y1 - x1) * (y2 - x2));
  const b = mod((y1 + x1) * (y2 + x2));
  const c = mod(t1 * 2n * D * t2);
  const d = mod(z1 * 2n * z2);
  const e = b - a, f = d - c, g = d + c, h = b + a;
  return [mod(e * f), mod(g * h), mod(f * g), mod(e * h)];
}
function mul(p: Point, n: bigint): Point {
  let r: Point = [0n, 1n, 1n, 0n];
  let q = p;
  while (n > 0n) {
    if (n & 1n) r = add(r, q);
    q = add(q, q);
    n >>= 1n;
  }
  return r;
}
function isIdentity(p: Point): boolean {
  return mod(p[0]) === 0n && mod(p[1] - p[2]) === 0n;
}

/**
 * checkPublicKey throws a CustodyKeyError unless publicKey is 32 bytes
 * encoding a canonical point of the prime-order subgroup: the ledger refuses
 * the others wherever a key is bound (DESIGN §1).
 */
export function checkPublicKey(publicKey: Uint8Array): void {
  if (publicKey.length !== 32) throw new CustodyKeyError(`an Ed25519 public key is 32 bytes, got ${publicKey.length}`);
  // The check costs a few milliseconds of BigInt arithmetic; its verdicts
  // are remembered (a bounded cache, as the Go sign package keeps one).
  const id = Buffer.from(publicKey).toString("hex");
  const known = checked.get(id);
  if (known !== undefined) {
    if (known) throw new CustodyKeyError(known);
    return;
  }
  let verdict = "";
  try {
    checkPoint(publicKey);
  } catch (e) {
    verdict = (e as Error).message;
  }
  if (checked.size >= 1 << 16) checked.clear();
  checked.set(id, verdict);
  if (verdict) throw new CustodyKeyError(verdict);
}

/** Verdicts of checkPublicKey by hex key: "" for a good key, else the reason. */
const checked = new Map<string, string>();

function checkPoint(publicKey: Uint8Array): void {
  const sign = publicKey[31]! >> 7;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? publicKey[i]! & 0x7f : publicKey[i]!);
  if (y >= P) throw new CustodyKeyError("public key: non-canonical point encoding (y >= p)");
  const y2 = (y * y) % P;
  const u = mod(y2 - 1n);
  const v = mod(D * y2 + 1n);
  let x = mod(u * pow(v, 3n) * pow(u * pow(v, 7n), (P - 5n) / 8n));
  const vx2 = mod(v * x * x);
  if (vx2 !== u) {
    if (vx2 === mod(-u)) x = mod(x * SQRT_M1);
    else throw new CustodyKeyError("public key: not a point on the Ed25519 curve");
  }
  if (x === 0n && sign === 1) throw new CustodyKeyError("public key: non-canonical point encoding (x = 0 with the sign bit set)");
  if (Number(x & 1n) !== sign) x = P - x;
  const pt: Point = [x, y, 1n, mod(x * y)];
  if (isIdentity(mul(pt, 8n))) throw new CustodyKeyError("public key: small-order point (order divides 8)");
  if (!isIdentity(mul(pt, L))) throw new CustodyKeyError("public key: point has a small-order component (not in the prime-order subgroup)");
}
