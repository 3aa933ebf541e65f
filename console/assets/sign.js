// Signing in the browser, with the TypeScript SDK's own code (sdk.js, built
// from sdk/typescript/src): a statement's canonical bytes (RFC 8785, the
// strict profile, its schema checked), its DSSE PAE, the passkey challenge
// (SHA-256 of the PAE, DESIGN §1), then the passkey's assertion as the
// envelope's sig. The server never sees a key.

import { canonicalize, statementBytes, pae, payloadType, passkeyChallenge, parsePasskey, toBase64 } from "./sdk.js";
import { api, getJSON } from "./api.js";

export function b64url(bytes) {
  return toBase64(new Uint8Array(bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function unb64url(s) {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

export function unb64(s) {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

export function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

// keyId is the key id of a passkey file's key (the SDK's parsePasskey,
// which also checks the key, its rp_id and origins): hex SHA-256 of its
// SPKI DER.
export function keyId(file) {
  return parsePasskey(file.key_type, file.public_key, file.rp_id, file.origins || []).keyId;
}

// signStatement has the passkey sign doc, a statement of kind doc.type
// whose payloadType is type, and returns the DSSE envelope's canonical
// JSON text.
export async function signStatement(passkey, keyid, type, doc) {
  if (type !== payloadType(doc.type)) throw new Error("payloadType " + type + " is not that of a " + doc.type);
  const payload = statementBytes(doc);
  const challenge = unb64url(passkeyChallenge(pae(type, payload)));
  const cred = await navigator.credentials.get({
    publicKey: {
      challenge,
      rpId: passkey.rp_id,
      allowCredentials: [{ type: "public-key", id: unb64(passkey.credential_id) }],
      userVerification: "required",
      timeout: 120000,
    },
  });
  const r = cred.response;
  const sig = canonicalize({
    authenticator_data: b64url(r.authenticatorData),
    client_data_json: b64url(r.clientDataJSON),
    signature: b64url(r.signature),
  });
  return canonicalize({ payload: toBase64(payload), payloadType: type, signatures: [{ keyid, sig: toBase64(new TextEncoder().encode(sig)) }] });
}

// appendSigned has signer's passkey sign a statement of kind made of
// fields and the header it fills in here (actor, log, seq, type,
// timestamp), appends it, and returns the ledger's answer: { status, ok,
// body, doc }. A body that is not JSON is kept as its reason.
export async function appendSigned(signer, kind, fields) {
  const [info, ks] = await Promise.all([getJSON("v1/log"), getJSON("v1/keys/" + signer.keyid + "/seq")]);
  const doc = Object.assign({}, fields, {
    actor: signer.name, log: info.origin, seq: ks.next_seq, type: kind,
    timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
  });
  const env = await signStatement(signer.passkey, signer.keyid, payloadType(kind), doc);
  const r = await fetch(new URL("v1/entries", api), {
    method: "POST", body: env, credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
  });
  const text = await r.text();
  let body = {};
  try { body = JSON.parse(text); } catch { body = { reason: text.trim() }; }
  return { status: r.status, ok: r.ok, body, doc };
}

// refusal is the sentence for an answer that did not accept the statement.
export function refusal(a) {
  const b = a.body;
  return "the ledger answered " + a.status + ": " + (b.verdict ? b.verdict + " " : "") + (b.reason_code || b.code || "") + ": " + (b.reason || b.error || "");
}
