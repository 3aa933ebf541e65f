// Signing in the browser: the APPROVAL statement's canonical JSON (RFC
// 8785), its DSSE PAE, the SHA-256 challenge, the passkey assertion and
// the passkey sig of DESIGN §1. The server never sees a key.

const enc = new TextEncoder();

// canonicalize is RFC 8785 for what the console signs: objects, arrays,
// strings, booleans and safe integers (ECMAScript's JSON.stringify of a
// string or an integer is already RFC 8785's; keys sort by UTF-16 units).
export function canonicalize(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw new Error("only safe integers are signed here: " + v);
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(canonicalize).join(",") + "]";
  if (typeof v === "object") {
    const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonicalize(v[k])).join(",") + "}";
  }
  throw new Error("cannot sign a " + typeof v);
}

export function b64(bytes) {
  let s = "";
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s);
}

export function b64url(bytes) {
  return b64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function unb64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

// pae is DSSE's pre-authentication encoding.
export function pae(type, body) {
  const head = enc.encode("DSSEv1 " + enc.encode(type).length + " " + type + " " + body.length + " ");
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

// keyId is the key id of a passkey: hex SHA-256 of its SPKI DER.
export async function keyId(publicKeyB64) {
  return hex(await sha256(unb64(publicKeyB64)));
}

// signStatement has the passkey sign doc as kind (payloadType) and returns
// the DSSE envelope's canonical JSON text.
export async function signStatement(passkey, keyid, payloadType, doc) {
  const payload = enc.encode(canonicalize(doc));
  const challenge = await sha256(pae(payloadType, payload));
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
  return canonicalize({ payload: b64(payload), payloadType, signatures: [{ keyid, sig: b64(enc.encode(sig)) }] });
}
