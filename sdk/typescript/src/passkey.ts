/**
 * Passkeys (DESIGN §1): principal keys that sign through WebAuthn, checked
 * with node:crypto alone, by the same rules as the Go verifier
 * (sign/passkey.go), in the same order and naming the same fields.
 *
 * A passkey envelope's `sig` is the standard base64 of exactly the JCS
 * object {"authenticator_data","client_data_json","signature"} (strict
 * unpadded base64url members). It verifies when the client data is UTF-8
 * JSON without duplicate keys, of type webauthn.get, whose challenge is
 * base64url(SHA-256(PAE(payloadType, payload))), whose origin is one of the
 * enrolled origins, with crossOrigin absent or false and no topOrigin; the
 * authenticator data is >= 37 bytes, starts with SHA-256(rp_id), has UP and
 * UV, not AT, not BS without BE, and trailing bytes only with ED; and the
 * signature (ES256 strict DER, Ed25519 raw 64 bytes) verifies over
 * authenticatorData || SHA-256(clientDataJSON).
 */
import { createHash, createPublicKey, KeyObject, verify as nodeVerify } from "node:crypto";
import { canonicalize } from "./canonical.js";
import { CustodyFormatError } from "./errors.js";
import { decodeBase64Strict, toHex } from "./encoding.js";

export const KEY_TYPE_ES256 = "webauthn-es256";
export const KEY_TYPE_ED25519 = "webauthn-ed25519";

/** The public part of an enrolled passkey. */
export interface Passkey {
  keyType: string;
  spki: Uint8Array;
  rpId: string;
  origins: string[];
  keyId: string;
  key: KeyObject;
}

/** A passkey failure: code `bad_envelope` (not an assertion) or `bad_signature`, path the field. */
export class PasskeyError extends CustodyFormatError {}

function keyErr(path: string, msg: string): never {
  throw new CustodyFormatError("bad_key", path, msg);
}
function envErr(path: string, msg: string): never {
  throw new PasskeyError("bad_envelope", "signatures[0].sig" + (path ? "." + path : ""), msg);
}
function sigErr(path: string, msg: string): never {
  throw new PasskeyError("bad_signature", "signatures[0].sig." + path, msg);
}

const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest();

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** checkRpId accepts a lowercase DNS host name without port or trailing dot. */
export function checkRpId(rpId: string): void {
  if (rpId === "" || rpId.length > 253) keyErr("rp_id", `${JSON.stringify(rpId)} must be a host name of 1..253 bytes`);
  for (const label of rpId.split(".")) {
    if (label === "" || label.length > 63 || label.startsWith("-") || label.endsWith("-") || !/^[a-z0-9-]+$/.test(label)) {
      keyErr("rp_id", `${JSON.stringify(rpId)} is not a lowercase host name (label ${JSON.stringify(label)})`);
    }
  }
}

/** checkOrigins accepts a sorted set of exact origins https://host[:port] at or below rpId (http only for localhost). */
export function checkOrigins(rpId: string, origins: string[]): void {
  if (!Array.isArray(origins) || origins.length === 0) keyErr("origins", "must list at least one origin");
  origins.forEach((o, i) => {
    if (typeof o !== "string") keyErr("origins", "must be strings");
    if (i > 0 && !(origins[i - 1] < o)) keyErr("origins", `must be sorted without repeats: ${JSON.stringify(o)} after ${JSON.stringify(origins[i - 1])}`);
    let rest: string;
    const https = o.startsWith("https://");
    if (https) rest = o.slice(8);
    else if (o.startsWith("http://") && rpId === "localhost") rest = o.slice(7);
    else keyErr("origins", `${JSON.stringify(o)} must be https://host[:port] (http:// only for localhost)`);
    const colon = rest.indexOf(":");
    const host = colon < 0 ? rest : rest.slice(0, colon);
    if (colon >= 0) {
      const port = rest.slice(colon + 1);
      const n = Number(port);
      if (!/^[1-9][0-9]*$/.test(port) || n > 65535 || (https && n === 443) || (!https && n === 80)) {
        keyErr("origins", `${JSON.stringify(o)} has port ${JSON.stringify(port)}, not a port number 1..65535 other than the scheme's default, without leading zeros`);
      }
    }
    try {
      checkRpId(host);
    } catch {
      keyErr("origins", `${JSON.stringify(o)} has host ${JSON.stringify(host)}, not a lowercase host name (nothing after it: no path or slash)`);
    }
    if (host !== rpId && !host.endsWith("." + rpId)) keyErr("origins", `${JSON.stringify(o)} has host ${JSON.stringify(host)}, which is neither rp_id ${JSON.stringify(rpId)} nor below it`);
    if (!https && host !== "localhost") keyErr("origins", `${JSON.stringify(o)}: http:// only for localhost`);
  });
}

/**
 * parsePasskey reads a passkey enrollment (key_type, public_key as standard
 * base64 SPKI DER in its one encoding, rp_id, origins) and checks it.
 */
export function parsePasskey(keyType: string, publicKey: string, rpId: string, origins: string[]): Passkey {
  let der: Uint8Array;
  try {
    der = decodeBase64Strict(publicKey);
  } catch (e) {
    keyErr("public_key", (e as Error).message);
  }
  if (der.length > 512) keyErr("public_key", `SPKI of ${der.length} bytes is too long for a passkey key`);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: Buffer.from(der), format: "der", type: "spki" });
  } catch (e) {
    keyErr("public_key", `not a SubjectPublicKeyInfo: ${(e as Error).message}`);
  }
  if (keyType === KEY_TYPE_ES256) {
    if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
      keyErr("public_key", "a webauthn-es256 key must be an ECDSA key on P-256 (COSE alg -7)");
    }
  } else if (keyType === KEY_TYPE_ED25519) {
    if (key.asymmetricKeyType !== "ed25519") keyErr("public_key", "a webauthn-ed25519 key must be an Ed25519 key (OID 1.3.101.112, COSE alg -8)");
  } else {
    keyErr("key_type", `${JSON.stringify(keyType)} is not a passkey key type (${KEY_TYPE_ES256} or ${KEY_TYPE_ED25519})`);
  }
  const again = key.export({ format: "der", type: "spki" });
  if (!equal(again, der)) keyErr("public_key", "SPKI DER is not in its one encoding (named curve, uncompressed point, minimal DER); re-encode it");
  checkRpId(rpId);
  checkOrigins(rpId, origins);
  return { keyType, spki: der, rpId, origins: [...origins], keyId: toHex(sha256(der)), key };
}

/** An assertion as the envelope's sig carries it. */
export interface Assertion {
  authenticatorData: Uint8Array;
  clientDataJSON: Uint8Array;
  signature: Uint8Array;
}

/** MIN_PASSKEY_SIG: a passkey sig is always longer than a 64-byte Ed25519 signature. */
export const MIN_PASSKEY_SIG = 65;
export const MAX_PASSKEY_SIG = 16 << 10;

/** isPasskeySig reports whether decoded sig bytes take the passkey form (length decides). */
export function isPasskeySig(sig: Uint8Array): boolean {
  return sig.length >= MIN_PASSKEY_SIG;
}

function b64url(s: unknown, path: string): Uint8Array {
  if (typeof s !== "string") envErr(path, "must be a string");
  if (/[=\r\n]/.test(s)) envErr(path, "must be unpadded base64url without line breaks");
  if (!/^[A-Za-z0-9_-]*$/.test(s) || s.length % 4 === 1) envErr(path, "invalid unpadded base64url");
  const b = Buffer.from(s, "base64url");
  if (b.toString("base64url") !== s) envErr(path, "invalid unpadded base64url: stray bits");
  return new Uint8Array(b);
}

/** parseAssertion reads a decoded passkey sig: exactly the canonical three-member object. */
export function parseAssertion(sig: Uint8Array): Assertion {
  if (sig.length > MAX_PASSKEY_SIG) envErr("", `passkey assertion of ${sig.length} bytes exceeds ${MAX_PASSKEY_SIG}`);
  let text: string;
  let obj: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(sig);
    obj = JSON.parse(text);
  } catch (e) {
    envErr("", `a passkey sig must be the canonical JSON object {authenticator_data, client_data_json, signature}: ${(e as Error).message}`);
  }
  const fields = ["authenticator_data", "client_data_json", "signature"];
  if (typeof obj !== "object" || obj === null || Array.isArray(obj) || Object.keys(obj).length !== 3 || !fields.every((f) => f in obj)) {
    envErr("", "a passkey sig must be the canonical JSON object {authenticator_data, client_data_json, signature}");
  }
  let canon: string;
  try {
    canon = canonicalize(obj);
  } catch (e) {
    envErr("", (e as Error).message);
  }
  if (canon !== text) envErr("", "a passkey sig must be the canonical JSON object {authenticator_data, client_data_json, signature}: not in canonical form");
  const o = obj as Record<string, unknown>;
  return {
    authenticatorData: b64url(o.authenticator_data, "authenticator_data"),
    clientDataJSON: b64url(o.client_data_json, "client_data_json"),
    signature: b64url(o.signature, "signature"),
  };
}

/** passkeyChallenge is base64url(SHA-256(PAE(payloadType, payload))). */
export function passkeyChallenge(pae: Uint8Array): string {
  return sha256(pae).toString("base64url");
}

interface ClientData {
  type?: unknown;
  challenge?: unknown;
  origin?: unknown;
  crossOrigin?: unknown;
  hasTopOrigin: boolean;
}

/** A minimal JSON reader that refuses duplicate keys at any depth. */
class JsonReader {
  i = 0;
  constructor(readonly s: string) {}
  ws() {
    while (this.i < this.s.length && " \t\r\n".includes(this.s[this.i])) this.i++;
  }
  fail(msg: string): never {
    throw new Error(msg);
  }
  value(depth: number): unknown {
    if (depth > 32) this.fail("nests too deep");
    this.ws();
    const c = this.s[this.i];
    if (c === "{") {
      this.i++;
      const seen = new Set<string>();
      const out: Record<string, unknown> = {};
      this.ws();
      if (this.s[this.i] === "}") {
        this.i++;
        return out;
      }
      for (;;) {
        this.ws();
        if (this.s[this.i] !== '"') this.fail("is not valid JSON: expected a key");
        const k = this.string();
        if (seen.has(k)) this.fail(`has the key ${JSON.stringify(k)} twice`);
        seen.add(k);
        this.ws();
        if (this.s[this.i++] !== ":") this.fail("is not valid JSON: expected ':'");
        out[k] = this.value(depth + 1);
        this.ws();
        const d = this.s[this.i++];
        if (d === "}") return out;
        if (d !== ",") this.fail("is not valid JSON: expected ',' or '}'");
      }
    }
    if (c === "[") {
      this.i++;
      this.ws();
      if (this.s[this.i] === "]") {
        this.i++;
        return null;
      }
      for (;;) {
        this.value(depth + 1);
        this.ws();
        const d = this.s[this.i++];
        if (d === "]") return null;
        if (d !== ",") this.fail("is not valid JSON: expected ',' or ']'");
      }
    }
    if (c === '"') return this.string();
    const m = /^(?:true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)/.exec(this.s.slice(this.i));
    if (!m) this.fail("is not valid JSON");
    this.i += m[0].length;
    return m[0] === "true" ? true : m[0] === "false" ? false : m[0] === "null" ? null : Number(m[0]);
  }
  string(): string {
    const m = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(this.s.slice(this.i));
    if (!m) this.fail("is not valid JSON: bad string");
    this.i += m[0].length;
    return JSON.parse(m[0]) as string;
  }
}

function parseClientData(b: Uint8Array): ClientData {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    sigErr("client_data_json", "is not valid UTF-8");
  }
  let top: unknown;
  try {
    const r = new JsonReader(text);
    r.ws();
    if (r.s[r.i] !== "{") r.fail("is not a JSON object");
    top = r.value(0);
    r.ws();
    if (r.i !== r.s.length) r.fail("has data after its JSON object");
  } catch (e) {
    sigErr("client_data_json", (e as Error).message);
  }
  const o = top as Record<string, unknown>;
  for (const k of ["type", "challenge", "origin"]) {
    if (!(k in o)) sigErr("client_data_json", `has no ${JSON.stringify(k)} member`);
    if (typeof o[k] !== "string") sigErr("client_data_json", `member ${JSON.stringify(k)} is not a string`);
  }
  if ("crossOrigin" in o && typeof o.crossOrigin !== "boolean") sigErr("client_data_json", 'member "crossOrigin" is not a boolean');
  return { type: o.type, challenge: o.challenge, origin: o.origin, crossOrigin: o.crossOrigin, hasTopOrigin: "topOrigin" in o };
}

const P256_N = BigInt("0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551");

/** derToP1363 reads a strict DER ECDSA signature into r||s (32 bytes each), 0 < r, s < n. */
function derToP1363(b: Uint8Array): Uint8Array {
  const bad = (m: string): never => sigErr("signature", m);
  if (b.length < 8 || b[0] !== 0x30 || b[1] !== b.length - 2 || b[1] >= 0x80) bad("ES256 signature is not strict DER");
  let i = 2;
  const int = (): bigint => {
    if (b[i] !== 0x02) bad("ES256 signature is not strict DER");
    const n = b[i + 1];
    if (n === 0 || n > 33 || i + 2 + n > b.length) bad("ES256 signature is not strict DER");
    const v = b.subarray(i + 2, i + 2 + n);
    if (v[0] & 0x80) bad("ES256 signature is not strict DER (negative integer)");
    if (n > 1 && v[0] === 0 && !(v[1] & 0x80)) bad("ES256 signature is not strict DER (non-minimal integer)");
    i += 2 + n;
    return BigInt("0x" + (Buffer.from(v).toString("hex") || "0"));
  };
  const r = int();
  const s = int();
  if (i !== b.length) bad(`ES256 signature has ${b.length - i} bytes after its DER`);
  if (r <= 0n || s <= 0n || r >= P256_N || s >= P256_N) bad("ES256 signature's r or s is out of range 1..n-1");
  const out = new Uint8Array(64);
  out.set(Buffer.from(r.toString(16).padStart(64, "0"), "hex"), 0);
  out.set(Buffer.from(s.toString(16).padStart(64, "0"), "hex"), 32);
  return out;
}

/**
 * verifyPasskey runs custody's one passkey check (W3C WebAuthn L3 §7.2, the
 * statement's PAE as the challenge) and throws a PasskeyError naming the
 * field and the rule on any failure.
 */
export function verifyPasskey(k: Passkey, keyId: string, paeBytes: Uint8Array, sig: Uint8Array | Assertion): void {
  // Step 3: the sig is an assertion object.
  const a = sig instanceof Uint8Array ? parseAssertion(sig) : sig;
  // Steps 5-7: the keyid names the enrolled credential.
  if (keyId !== k.keyId) throw new PasskeyError("bad_signature", "signatures[0].keyid", `keyid ${keyId} does not name the given passkey ${k.keyId}`);
  const cData = a.clientDataJSON, authData = a.authenticatorData;
  // Steps 9-10: UTF-8 JSON, no duplicate keys.
  const c = parseClientData(cData);
  // Step 11: type.
  if (c.type !== "webauthn.get") sigErr("client_data_json.type", `type ${JSON.stringify(c.type)} is not webauthn.get`);
  // Step 12: challenge = base64url(SHA-256(PAE)).
  const want = passkeyChallenge(paeBytes);
  if (c.challenge !== want) sigErr("client_data_json.challenge", `challenge ${JSON.stringify(c.challenge)} is not ${want}, the SHA-256 of this envelope's PAE`);
  // Step 13: origin byte-equal to an enrolled origin.
  if (!k.origins.includes(c.origin as string)) sigErr("client_data_json.origin", `origin ${JSON.stringify(c.origin)} is not one of the enrolled origins ${JSON.stringify(k.origins)}`);
  // Step 14: no topOrigin, crossOrigin absent or false.
  if (c.hasTopOrigin) sigErr("client_data_json.topOrigin", "has a topOrigin member; a passkey signs custody statements only in a top-level page");
  if (c.crossOrigin === true) sigErr("client_data_json.crossOrigin", "crossOrigin is true; a passkey signs custody statements only in a top-level page");
  if (authData.length < 37) sigErr("authenticator_data", `is ${authData.length} bytes, shorter than 37 (rpIdHash, flags, signCount)`);
  // Step 15: rpIdHash.
  if (!equal(authData.subarray(0, 32), sha256(k.rpId))) sigErr("authenticator_data.rpIdHash", `does not start with SHA-256 of rp_id ${JSON.stringify(k.rpId)}`);
  const flags = authData[32];
  // Steps 16-18: UP, UV, BS only with BE.
  if (!(flags & 0x01)) sigErr("authenticator_data.flags", "the user-present (UP) flag is not set");
  if (!(flags & 0x04)) sigErr("authenticator_data.flags", "the user-verified (UV) flag is not set");
  if (flags & 0x10 && !(flags & 0x08)) sigErr("authenticator_data.flags", "backup-state (BS) is set without backup-eligible (BE)");
  // Step 20 (and 24): no attested data; trailing bytes only with ED.
  if (flags & 0x40) sigErr("authenticator_data.flags", "the attested-credential-data (AT) flag is set in an assertion");
  const ed = (flags & 0x80) !== 0;
  if (ed !== authData.length > 37) {
    if (ed) sigErr("authenticator_data", "the extension-data (ED) flag is set but no extension data follows");
    sigErr("authenticator_data", `${authData.length - 37} bytes follow signCount without the extension-data (ED) flag`);
  }
  // Steps 21-22: the signature over authData || SHA-256(cData).
  const signed = Buffer.concat([authData, sha256(cData)]);
  let ok: boolean;
  if (k.keyType === KEY_TYPE_ES256) {
    const rs = derToP1363(a.signature);
    ok = nodeVerify("sha256", signed, { key: k.key, dsaEncoding: "ieee-p1363" }, rs);
  } else {
    if (a.signature.length !== 64) sigErr("signature", `an Ed25519 passkey signature is 64 raw bytes, got ${a.signature.length}`);
    ok = nodeVerify(null, signed, k.key, a.signature);
  }
  if (!ok) sigErr("signature", `${k.keyType === KEY_TYPE_ES256 ? "ES256" : "Ed25519"} signature does not verify under passkey ${keyId.slice(0, 16)}`);
  // Step 23: the counter is not checked (synced passkeys send 0).
}

