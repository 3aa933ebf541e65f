// Signing in the browser, with the TypeScript SDK's own code (sdk.js, built
// from sdk/typescript/src): a statement's canonical bytes (RFC 8785, the
// strict profile, its schema checked), its DSSE PAE, the passkey challenge
// (SHA-256 of the PAE, DESIGN §1), then the passkey's assertion as the
// envelope's sig. The server never sees a key.

import { canonicalize, statementBytes, pae, payloadType, passkeyChallenge, parsePasskey, toBase64 } from "./sdk.js";

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
