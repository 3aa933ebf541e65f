// WebAuthn options and answers as JSON, for the console's registration
// (enroll.js) and sign-in (session.js): the server (go-webauthn) sends
// options with base64url byte strings, and reads the answer the same way.

function unb64url(s) {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function b64url(buf) {
  let s = "";
  for (const b of new Uint8Array(buf)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const descriptors = (list) => (list || []).map((d) => ({ ...d, id: unb64url(d.id) }));

// creationOptions turns the server's creation options into what
// navigator.credentials.create takes.
export function creationOptions(o) {
  if (PublicKeyCredential.parseCreationOptionsFromJSON) return PublicKeyCredential.parseCreationOptionsFromJSON(o);
  return { ...o, challenge: unb64url(o.challenge), user: { ...o.user, id: unb64url(o.user.id) }, excludeCredentials: descriptors(o.excludeCredentials) };
}

// requestOptions turns the server's request options into what
// navigator.credentials.get takes.
export function requestOptions(o) {
  if (PublicKeyCredential.parseRequestOptionsFromJSON) return PublicKeyCredential.parseRequestOptionsFromJSON(o);
  return { ...o, challenge: unb64url(o.challenge), allowCredentials: descriptors(o.allowCredentials) };
}

// answer is the authenticator's answer as the server reads it.
export function answer(cred) {
  if (typeof cred.toJSON === "function") return cred.toJSON();
  const r = cred.response, out = { id: cred.id, rawId: b64url(cred.rawId), type: cred.type, clientExtensionResults: cred.getClientExtensionResults(), response: { clientDataJSON: b64url(r.clientDataJSON) } };
  if (r.attestationObject) {
    out.response.attestationObject = b64url(r.attestationObject);
    if (r.getTransports) out.response.transports = r.getTransports();
  } else {
    out.response.authenticatorData = b64url(r.authenticatorData);
    out.response.signature = b64url(r.signature);
    if (r.userHandle) out.response.userHandle = b64url(r.userHandle);
  }
  return out;
}

// post sends body as JSON to path (relative to the console) and returns
// the parsed answer; a refusal throws an Error with the server's reason.
export async function post(path, body) {
  const r = await fetch(new URL(path, document.baseURI), {
    method: "POST", credentials: "same-origin", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", Accept: "application/json" },
  });
  const text = await r.text();
  let doc = {};
  try { doc = JSON.parse(text); } catch { doc = { reason: text.trim() }; }
  if (!r.ok) throw new Error(doc.reason || doc.error || r.status + " " + r.statusText);
  return doc;
}

// ceremonyError says why the browser's WebAuthn call failed, in words.
export function ceremonyError(e) {
  if (e && e.name === "NotAllowedError") return "the passkey prompt was cancelled or timed out (" + e.message + ")";
  if (e && e.name === "InvalidStateError") return "this authenticator already holds a passkey of this name on this log (" + e.message + ")";
  if (e && e.name === "SecurityError") return "this page's origin cannot use passkeys of this relying party (" + e.message + ")";
  return e && e.message ? e.message : String(e);
}
