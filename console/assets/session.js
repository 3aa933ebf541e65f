// Sign in on the console: a WebAuthn assertion (user verification
// required) by one of the passkeys the log binds to the name typed,
// checked by the server (go-webauthn) against the ledger. The session is
// an HttpOnly cookie the page never reads; it authorises nothing, it only
// tells the page whose held receipts to list and which passkey signs.
// The page learns of it through the "custody:session" event (console.js).

import { requestOptions, answer, post, ceremonyError } from "./webauthn.js";

function announce(s) {
  document.dispatchEvent(new CustomEvent("custody:session", { detail: s }));
}

function show(s) {
  const status = document.getElementById("session-status");
  const signin = document.getElementById("session-signin");
  const signout = document.getElementById("session-signout");
  const name = document.getElementById("session-name");
  if (s.signed_in) {
    status.className = "answer";
    status.textContent = "Signed in as " + s.name + " (passkey " + s.keyid.slice(0, 16) + "…) until " + new Date(s.expires).toLocaleString();
    name.value = s.name;
    localStorage.setItem("custody.name", s.name);
  } else {
    status.className = "muted";
    status.textContent = s.reason || "not signed in";
  }
  name.disabled = signin.hidden = !!s.signed_in;
  signout.hidden = !s.signed_in;
}

async function signIn(ev) {
  ev.preventDefault();
  const status = document.getElementById("session-status");
  const name = document.getElementById("session-name").value.trim();
  status.className = "muted";
  status.textContent = "asking the server to begin…";
  try {
    const begun = await post("session/begin", { name });
    status.textContent = "waiting for your passkey…";
    let cred;
    try {
      cred = await navigator.credentials.get({ publicKey: requestOptions(begun.publicKey) });
    } catch (e) {
      throw new Error(ceremonyError(e));
    }
    const s = await post("session/finish", answer(cred));
    show(s);
    announce(s);
  } catch (e) {
    status.className = "error";
    status.textContent = "not signed in: " + e.message;
  }
}

async function signOut() {
  try {
    const s = await post("session/logout", {});
    show(s);
    announce(s);
  } catch (e) {
    const status = document.getElementById("session-status");
    status.className = "error";
    status.textContent = "could not sign out: " + e.message;
  }
}

async function start() {
  document.getElementById("session-form").addEventListener("submit", signIn);
  document.getElementById("session-signout").addEventListener("click", signOut);
  document.getElementById("session-name").value = localStorage.getItem("custody.name") || "";
  try {
    const r = await fetch(new URL("session", document.baseURI), { credentials: "same-origin", headers: { Accept: "application/json" } });
    const s = await r.json();
    if (!r.ok) throw new Error(s.reason || r.status + " " + r.statusText);
    show(s);
    if (s.signed_in) announce(s);
  } catch (e) {
    const status = document.getElementById("session-status");
    status.className = "error";
    status.textContent = "sign-in is not available here: " + e.message;
  }
}

start();
