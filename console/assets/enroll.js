// The registration page: a WebAuthn registration (user verification
// required) the server checks with go-webauthn, which answers the passkey
// file custody principal enroll --passkey FILE takes. Everything from the
// server is written as text.

import { creationOptions, answer, post, ceremonyError } from "./webauthn.js";

let download = null;

async function register(ev) {
  ev.preventDefault();
  const status = document.getElementById("enroll-status");
  const name = document.getElementById("enroll-name").value.trim();
  document.getElementById("enroll-result").hidden = true;
  status.className = "muted";
  status.textContent = "asking the server to begin…";
  try {
    const begun = await post("enroll/begin", { name });
    status.textContent = "waiting for your passkey…";
    let cred;
    try {
      cred = await navigator.credentials.create({ publicKey: creationOptions(begun.publicKey) });
    } catch (e) {
      throw new Error(ceremonyError(e));
    }
    const done = await post("enroll/finish", answer(cred));
    show(done);
    status.className = "answer";
    status.textContent = "registered a passkey for " + done.name + ": key id " + done.keyid;
  } catch (e) {
    status.className = "error";
    status.textContent = "not registered: " + e.message;
  }
}

function show(done) {
  const file = "passkey-" + done.name.replace(/[^A-Za-z0-9._-]+/g, "_") + ".json";
  document.getElementById("enroll-keyid").textContent = done.keyid;
  document.getElementById("enroll-file").value = done.file;
  document.getElementById("enroll-command").textContent =
    "custody principal enroll --admin-key ADMIN.key --name " + done.name + " --passkey " + file +
    "\n(or, for a name already enrolled: custody principal add-key --admin-key ADMIN.key --name " + done.name + " --passkey " + file + ")";
  if (download) URL.revokeObjectURL(download);
  download = URL.createObjectURL(new Blob([done.file], { type: "application/json" }));
  const a = document.getElementById("enroll-download");
  a.href = download;
  a.download = file;
  document.getElementById("enroll-result").hidden = false;
}

async function copy() {
  const text = document.getElementById("enroll-file");
  const status = document.getElementById("enroll-status");
  try {
    await navigator.clipboard.writeText(text.value);
    status.textContent = "copied the passkey file";
  } catch {
    text.select();
    status.textContent = "select the text and copy it (the browser did not let the page copy)";
  }
}

async function start() {
  try {
    const r = await fetch(new URL("../v1/log", document.baseURI), { headers: { Accept: "application/json" } });
    const info = await r.json();
    document.getElementById("log").textContent = "log " + (info.origin || "");
  } catch (e) {
    document.getElementById("log").textContent = "could not read the log: " + e.message;
  }
  document.getElementById("enroll-form").addEventListener("submit", register);
  document.getElementById("enroll-copy").addEventListener("click", copy);
  const name = new URLSearchParams(location.search).get("name");
  if (name) document.getElementById("enroll-name").value = name;
}

start();
