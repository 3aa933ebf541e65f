/**
 * DSSE v1 envelopes (DESIGN §1): exactly one Ed25519 signature over
 *
 *     PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
 *
 * with payloadType `application/vnd.custody.<kind>.v1+json`, standard
 * base64 decoded strictly, and the key id the lowercase hex SHA-256 of the
 * signer's raw public key.
 */
import { createHash } from "node:crypto";
import { canonicalize } from "./canonical.js";
import { CustodyFormatError } from "./errors.js";
import { keyId, PrivateKey, verifySignature } from "./keys.js";
import { decodeBase64Strict, isLowerHex64, toBase64, utf8 } from "./encoding.js";
import { Assertion, isPasskeySig, parseAssertion, Passkey, verifyPasskey } from "./passkey.js";

/** The nine statement kinds, as a statement's `type` spells them. */
export const KINDS = ["GENESIS", "PRINCIPAL", "CONFIRM", "DELEGATE", "REVOKE", "RECEIPT", "STOP", "RESUME", "APPROVAL", "DENIAL"] as const;
export type Kind = (typeof KINDS)[number];

/** payloadType is the DSSE payloadType of a kind: application/vnd.custody.<kind>.v1+json. */
export function payloadType(kind: Kind): string {
  if (!KINDS.includes(kind)) throw new CustodyFormatError("schema_invalid", "type", `${JSON.stringify(kind)} is not a statement kind`);
  return `application/vnd.custody.${kind.toLowerCase()}.v1+json`;
}

/** kindOfPayloadType is the inverse of payloadType (undefined for any other string). */
export function kindOfPayloadType(pt: string): Kind | undefined {
  return KINDS.find((k) => payloadType(k) === pt);
}

/** An envelope as JSON holds it. */
export interface Envelope {
  payloadType: string;
  payload: string;
  signatures: { keyid: string; sig: string }[];
}

/** An envelope read and checked for form (not yet for its signature). */
export interface ParsedEnvelope {
  envelope: Envelope;
  kind: Kind;
  payloadType: string;
  /** The raw statement bytes the signature covers. */
  payload: Uint8Array;
  keyId: string;
  /** 64 bytes of Ed25519, or (longer) a passkey assertion object. */
  sig: Uint8Array;
  /** The passkey assertion the sig holds, if it takes that form. */
  assertion?: Assertion;
}

/** pae is DSSE v1's pre-authentication encoding. */
export function pae(type: string, body: Uint8Array): Uint8Array {
  const head = utf8(`DSSEv1 ${utf8(type).length} ${type} ${body.length} `);
  const out = new Uint8Array(head.length + body.length);
  out.set(head, 0);
  out.set(body, head.length);
  return out;
}

/** signEnvelope signs payload bytes as a statement of kind and returns the envelope. */
export function signEnvelope(key: PrivateKey, kind: Kind, payload: Uint8Array): Envelope {
  const pt = payloadType(kind);
  const sig = key.sign(pae(pt, payload));
  return { payloadType: pt, payload: toBase64(payload), signatures: [{ keyid: key.keyId, sig: toBase64(sig) }] };
}

/** envelopeText is an envelope's canonical JSON: what the ledger is sent, and what a DENIAL's envelope_sha256 hashes. */
export function envelopeText(env: Envelope): string {
  return canonicalize(env);
}

function envErr(path: string, msg: string): never {
  throw new CustodyFormatError("bad_envelope", path, msg);
}

function closed(obj: unknown, path: string, fields: string[]): Record<string, unknown> {
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) envErr(path, "must be a JSON object");
  for (const k of Object.keys(obj)) if (!fields.includes(k)) envErr(path ? `${path}.${k}` : k, "unknown field");
  for (const k of fields) if (!(k in obj)) envErr(path ? `${path}.${k}` : k, "is missing");
  return obj as Record<string, unknown>;
}

/**
 * parseEnvelope reads an envelope (JSON text, bytes, or the parsed object)
 * and checks its form: closed schema, a custody payloadType, exactly one
 * signature, a 64-hex key id, strict base64, a 64-byte signature.
 */
export function parseEnvelope(input: string | Uint8Array | Envelope): ParsedEnvelope {
  let obj: unknown = input;
  if (typeof input === "string" || input instanceof Uint8Array) {
    try {
      obj = JSON.parse(typeof input === "string" ? input : new TextDecoder("utf-8", { fatal: true }).decode(input));
    } catch (e) {
      envErr("", `not a JSON envelope: ${(e as Error).message}`);
    }
  }
  const env = closed(obj, "", ["payload", "payloadType", "signatures"]);
  if (typeof env.payloadType !== "string" || typeof env.payload !== "string" || !Array.isArray(env.signatures)) {
    envErr("", "payloadType and payload are strings, signatures an array");
  }
  const kind = kindOfPayloadType(env.payloadType as string);
  if (!kind) envErr("payloadType", `${JSON.stringify(env.payloadType)} is not application/vnd.custody.<kind>.v1+json for a custody statement kind`);
  const sigs = env.signatures as unknown[];
  if (sigs.length !== 1) envErr("signatures", `must hold exactly one signature, got ${sigs.length}`);
  const s = closed(sigs[0], "signatures[0]", ["keyid", "sig"]);
  if (typeof s.keyid !== "string" || !isLowerHex64(s.keyid)) envErr("signatures[0].keyid", "must be 64 lowercase hex digits (SHA-256 of the public key)");
  let payload: Uint8Array, sig: Uint8Array;
  try {
    payload = decodeBase64Strict(env.payload as string);
  } catch (e) {
    envErr("payload", (e as Error).message);
  }
  if (payload.length === 0) envErr("payload", "must not be empty");
  try {
    sig = decodeBase64Strict(s.sig as string);
  } catch (e) {
    envErr("signatures[0].sig", (e as Error).message);
  }
  let assertion: Assertion | undefined;
  if (isPasskeySig(sig)) assertion = parseAssertion(sig);
  else if (sig.length !== 64) envErr("signatures[0].sig", `must decode to 64 bytes (Ed25519) or to a passkey assertion object, got ${sig.length} bytes`);
  const envelope: Envelope = { payloadType: env.payloadType as string, payload: env.payload as string, signatures: [{ keyid: s.keyid, sig: s.sig as string }] };
  return { envelope, kind, payloadType: envelope.payloadType, payload, keyId: s.keyid, sig, ...(assertion ? { assertion } : {}) };
}

/** A key the log bound: an Ed25519 public key (32 bytes) or a passkey. */
export type BoundKey = Uint8Array | Passkey;

/**
 * verifyEnvelope reports whether the envelope's one signature is by key (and
 * its keyid names it): Ed25519 over PAE, or for a passkey the one passkey
 * check (verifyPasskey). An Ed25519 signature never verifies under a
 * passkey, nor an assertion under an Ed25519 key.
 */
export function verifyEnvelope(p: ParsedEnvelope, key: BoundKey): boolean {
  if (key instanceof Uint8Array) {
    return p.sig.length === 64 && keyId(key) === p.keyId && verifySignature(key, pae(p.payloadType, p.payload), p.sig);
  }
  try {
    checkPasskeyEnvelope(p, key);
    return true;
  } catch {
    return false;
  }
}

/** checkPasskeyEnvelope is verifyEnvelope for a passkey that throws a PasskeyError naming the field and the rule. */
export function checkPasskeyEnvelope(p: ParsedEnvelope, key: Passkey): void {
  if (!p.assertion) throw new CustodyFormatError("bad_signature", "signatures[0].sig", `key ${p.keyId.slice(0, 16)} is a passkey, and the sig is not a passkey assertion`);
  verifyPasskey(key, p.keyId, pae(p.payloadType, p.payload), p.assertion);
}

/**
 * dedupHash is the ledger's identity of a submission: SHA-256 over
 * "custody/submission/v1\0" and the length-prefixed (uint64 big-endian)
 * payloadType, payload and signature bytes. Two envelopes with the same
 * dedupHash are the same submission. For a passkey envelope the signature
 * bytes are malleable and randomised, so its identity is
 * "custody/submission-passkey/v1\0" over payloadType, payload and keyid
 * (DESIGN §1).
 */
export function dedupHash(p: ParsedEnvelope): string {
  const passkey = isPasskeySig(p.sig);
  const h = createHash("sha256").update(passkey ? "custody/submission-passkey/v1\x00" : "custody/submission/v1\x00");
  for (const part of [utf8(p.payloadType), p.payload, passkey ? utf8(p.keyId) : p.sig]) {
    const n = Buffer.alloc(8);
    n.writeBigUInt64BE(BigInt(part.length));
    h.update(n).update(part);
  }
  return h.digest("hex");
}
