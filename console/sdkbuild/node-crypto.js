// node:crypto for the browser bundle of the SDK (build.mjs aliases
// "node:crypto" to this file): the few calls the bundled modules make,
// over @noble/hashes and @noble/curves, synchronous as Node's are (the
// SDK's checks are synchronous; WebCrypto's are not). Only what verifies
// is here: the console signs with passkeys, never with a key of its own,
// so every call that makes or uses a private key throws.
import { sha256 } from "@noble/hashes/sha2.js";
import { ed25519 } from "@noble/curves/ed25519.js";
import { p256 } from "@noble/curves/nist.js";
import { Buffer } from "./buffer-shim.js";

class Hash {
  #h = sha256.create();
  update(data) {
    this.#h.update(typeof data === "string" ? new TextEncoder().encode(data) : data);
    return this;
  }
  digest(encoding) {
    const b = Buffer.from(this.#h.digest());
    return encoding ? b.toString(encoding) : b;
  }
}

export function createHash(alg) {
  if (alg !== "sha256") throw new Error(`the console's crypto has SHA-256 only, not ${alg}`);
  return new Hash();
}

// The two SubjectPublicKeyInfo forms custody binds, each in its one DER
// encoding: an Ed25519 key, and an uncompressed P-256 point.
const ED25519_SPKI = Buffer.from("302a300506032b6570032100", "hex");
const P256_SPKI = Buffer.from("3059301306072a8648ce3d020106082a8648ce3d030107034200", "hex");

class PublicKey {
  constructor(der, type, raw) {
    this.der = der;
    this.asymmetricKeyType = type;
    this.asymmetricKeyDetails = type === "ec" ? { namedCurve: "prime256v1" } : {};
    this.raw = raw;
  }
  export(o) {
    if (!o || o.format !== "der" || o.type !== "spki") throw new Error("the console's crypto exports SPKI DER only");
    return Buffer.from(this.der);
  }
}

export function createPublicKey(o) {
  if (!o || o.format !== "der" || o.type !== "spki") throw new Error("the console's crypto reads SPKI DER only");
  const der = Buffer.from(o.key);
  const has = (prefix, n) => der.length === prefix.length + n && der.subarray(0, prefix.length).equals(prefix);
  if (has(ED25519_SPKI, 32)) return new PublicKey(der, "ed25519", der.subarray(ED25519_SPKI.length));
  if (has(P256_SPKI, 65)) {
    const raw = der.subarray(P256_SPKI.length);
    p256.Point.fromBytes(raw); // throws unless the point is on the curve
    return new PublicKey(der, "ec", raw);
  }
  throw new Error("not an Ed25519 or P-256 SubjectPublicKeyInfo in its one encoding");
}

// verify(null, msg, ed25519Key, sig) checks an Ed25519 signature (RFC 8032,
// strict, as Go's crypto/ed25519 and OpenSSL check it); verify("sha256",
// msg, {key, dsaEncoding: "ieee-p1363"}, r||s) an ECDSA P-256 one.
export function verify(alg, data, key, sig) {
  const k = key instanceof PublicKey ? key : key && key.key;
  if (!(k instanceof PublicKey)) throw new Error("verify: not a public key of the console's crypto");
  try {
    if (k.asymmetricKeyType === "ed25519" && alg === null) {
      return ed25519.verify(sig, data, k.raw, { zip215: false });
    }
    if (k.asymmetricKeyType === "ec" && alg === "sha256" && key.dsaEncoding === "ieee-p1363") {
      return p256.verify(sig, data, k.raw, { prehash: true, lowS: false, format: "compact" });
    }
  } catch {
    return false;
  }
  throw new Error(`verify: ${alg} with a ${k.asymmetricKeyType} key is not in the console's crypto`);
}

function noPrivate() {
  throw new Error("the console holds no private key: passkeys sign in the browser");
}
export const createPrivateKey = noPrivate;
export const generateKeyPairSync = noPrivate;
export const sign = noPrivate;
export const randomBytes = noPrivate;
export class KeyObject {}
