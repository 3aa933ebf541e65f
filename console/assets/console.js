// The custody console: a view over the server's HTTP API. Everything the
// ledger returns (and so everything an agent wrote) is written with
// textContent or as an attribute value, never parsed as markup.

import { keyId, hex, appendSigned, refusal } from "./sign.js";


// The passkey this browser signs with (its public file, no secret), kept
// in localStorage.
let signer = null;

async function loadSigner(text) {
  const status = document.getElementById("signer");
  try {
    const pk = JSON.parse(text);
    if (!pk || typeof pk.public_key !== "string" || typeof pk.credential_id !== "string" || typeof pk.rp_id !== "string") {
      throw new Error("a passkey file has public_key, credential_id and rp_id");
    }
    const keyid = keyId(pk);
    const ks = await getJSON("v1/keys/" + keyid + "/seq");
    if (!ks.bound) throw new Error("key " + keyid + " is not enrolled on this log");
    if (ks.retired) throw new Error("key " + keyid + " (" + ks.name + ") is retired");
    signer = { passkey: pk, keyid, name: ks.name };
    localStorage.setItem("custody.passkey", text);
    status.className = "muted";
    status.textContent = "signing as " + ks.name + " (key " + keyid + ")";
    const approver = document.getElementById("approver");
    if (!approver.value) {
      approver.value = ks.name;
      pollApprovals(ks.name);
    }
  } catch (e) {
    signer = null;
    status.className = "error";
    status.textContent = "this passkey cannot sign here: " + e.message;
  }
}

// decide builds the APPROVAL for h, has the passkey sign it and appends
// it; the ledger's answer is shown in the card.
async function decide(h, decision, reason, out) {
  out.className = "muted";
  out.textContent = "waiting for your passkey…";
  // The card stays while its decision is made: the list may see the
  // receipt leave before the ledger's answer reaches the page.
  const li = out.closest("li");
  if (li && !li.dataset.decided) li.dataset.decided = "pending";
  const undecided = () => { if (li && li.dataset.decided === "pending") delete li.dataset.decided; };
  try {
    if (!signer) throw new Error("choose your passkey first");
    const rnd = hex(crypto.getRandomValues(new Uint8Array(8)));
    const fields = {
      approval_id: "apr_" + rnd, decision, receipt_ref: h.receipt_id, receipt_sha256: h.receipt_sha256,
      workflow_id: h.workflow_id,
    };
    if (reason) fields.reason = reason;
    const a = await appendSigned(signer, "APPROVAL", fields);
    if (!a.ok) {
      out.className = "error";
      out.textContent = refusal(a);
      undecided();
      return;
    }
    out.className = "answer";
    out.textContent = "the ledger answered " + a.status + " " + (a.body.verdict || "") + " at index " + (a.body.index ?? "?");
    decided(li);
  } catch (e) {
    out.className = "error";
    out.textContent = "not sent: " + e.message;
    undecided();
  }
}

// decided marks a card this page decided: it stays, with the ledger's
// answer, after the receipt leaves the list of held receipts.
function decided(li) {
  if (!li) return;
  li.dataset.decided = "1";
  li.classList.add("decided");
  for (const b of li.querySelectorAll("button")) b.disabled = true;
}

// signAndAppend has the signer's passkey sign a statement of kind made of
// fields and appends it; it returns the ledger's answer as a sentence.
async function signAndAppend(kind, fields) {
  if (!signer) throw new Error("choose your passkey first");
  const a = await appendSigned(signer, kind, fields);
  if (!a.ok) throw new Error(refusal(a));
  return "the ledger answered " + a.status + " " + (a.body.verdict || "") + " at index " + (a.body.index ?? "?");
}

async function stopWorkflow(ev) {
  ev.preventDefault();
  const out = document.getElementById("stop-status");
  out.className = "muted";
  out.textContent = "waiting for your passkey…";
  try {
    const wf = document.getElementById("stop-workflow").value.trim();
    if (!wf) throw new Error("name the workflow");
    const rnd = hex(crypto.getRandomValues(new Uint8Array(8)));
    out.textContent = await signAndAppend("STOP", {
      request_id: "stop_" + rnd, workflow_id: wf, stop_scope: "chain",
      takeover_mode: document.getElementById("stop-mode").value,
      reason: document.getElementById("stop-reason").value.trim() || "stopped from the console",
    });
    out.className = "answer";
  } catch (e) {
    out.className = "error";
    out.textContent = e.message.startsWith("the ledger") ? e.message : "not sent: " + e.message;
  }
}

// The API sits next to the console: /console/ -> /v1/..., and
// /logs/NAME/console/ -> /logs/NAME/v1/....
const api = new URL("../", document.baseURI);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(dl, name, value) {
  dl.append(el("dt", name), el("dd", value === undefined || value === null || value === "" ? "—" : value));
}

async function getJSON(path, signal) {
  const r = await fetch(new URL(path, api), { signal, headers: { Accept: "application/json" }, credentials: "same-origin" });
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const why = body && body.error ? (body.code ? body.code + ": " : "") + body.error : r.status + " " + r.statusText;
    throw new Error(why);
  }
  return body;
}

function heldCard(h) {
  const li = el("li", undefined, "card");
  li.dataset.receiptId = h.receipt_id;
  li.dataset.held = JSON.stringify(h);
  li.append(el("h3", (h.action || "") + " → " + (h.target || "")));
  const dl = el("dl");
  row(dl, "receipt", h.receipt_id);
  row(dl, "workflow", h.workflow_id);
  row(dl, "step", h.step_id);
  row(dl, "agent", h.actor);
  row(dl, "reserve", h.reserve ? JSON.stringify(h.reserve) : "");
  row(dl, "params sha256", h.params_sha256);
  row(dl, "expires", h.expires_at);
  row(dl, "chain of grants", (h.chain || []).join(" ← "));
  for (const r of h.rules || []) {
    row(dl, "rule " + r.rule_id, "grant " + r.grant + "; " + r.quorum + " of " + (r.approvers || []).join(", ") +
      "; approved so far: " + ((r.approved_by || []).join(", ") || "nobody"));
  }
  li.append(dl);
  const details = el("details");
  details.append(el("summary", "the exact statement"), el("pre", JSON.stringify(h.statement, null, 2)));
  li.append(details);
  const actions = el("div", undefined, "actions");
  const reason = el("input");
  reason.placeholder = "reason (optional)";
  reason.className = "reason";
  const approve = el("button", "Approve");
  const reject = el("button", "Reject");
  approve.type = reject.type = "button";
  approve.className = "approve";
  reject.className = "reject";
  const out = el("p", undefined, "muted");
  out.setAttribute("role", "status");
  approve.addEventListener("click", () => decide(h, "approve", reason.value.trim(), out));
  reject.addEventListener("click", () => decide(h, "reject", reason.value.trim(), out));
  actions.append(reason, approve, reject, out);
  li.append(actions);
  return li;
}

let controller = null;

async function pollApprovals(approver) {
  if (controller) controller.abort();
  controller = new AbortController();
  const signal = controller.signal;
  const list = document.getElementById("approvals");
  const status = document.getElementById("approvals-status");
  let last = "";
  // A long poll: the server answers as soon as the list differs from the
  // one this page has (its ETag), or 304 after the wait.
  let etag = "", count = 0;
  while (!signal.aborted) {
    let pause = false;
    try {
      const q = (approver ? "v1/approvals?approver=" + encodeURIComponent(approver) + "&" : "v1/approvals?") + "wait=25000";
      const headers = { Accept: "application/json" };
      if (etag) headers["If-None-Match"] = etag;
      const r = await fetch(new URL(q, api), { signal, headers, credentials: "same-origin" });
      if (r.status !== 304) {
        const body = await r.json().catch(() => null);
        if (!r.ok) throw new Error(body && body.reason ? (body.reason_code ? body.reason_code + ": " : "") + body.reason : r.status + " " + r.statusText);
        etag = r.headers.get("ETag") || "";
        pause = !etag; // a server without ETags: poll
        const held = body.held || [];
        count = held.length;
        const key = JSON.stringify(held);
        if (key !== last) {
          last = key;
          // Keep the cards still held (and what they show); add new ones.
          // Cards decided here stay, with the ledger's answer.
          const old = new Map(Array.from(list.children, (li) => [li.dataset.receiptId, li]));
          const ids = new Set(held.map((h) => h.receipt_id));
          const next = held.map((h) => {
            const li = old.get(h.receipt_id);
            return li && (li.dataset.decided || li.dataset.held === JSON.stringify(h)) ? li : heldCard(h);
          }).concat(Array.from(old.values()).filter((li) => li.dataset.decided && !ids.has(li.dataset.receiptId)));
          // Move only what moves: a card kept stays where it is.
          for (const li of Array.from(list.children)) if (!next.includes(li)) li.remove();
          next.forEach((li, i) => { if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null); });
        }
      }
      status.className = "muted";
      status.textContent = count + " held" + (approver ? " for " + approver : "") + "; updated " + new Date().toLocaleTimeString();
    } catch (e) {
      if (signal.aborted) return;
      status.className = "error";
      status.textContent = "could not read the held receipts: " + e.message;
      pause = true;
    }
    if (pause) await new Promise((res) => setTimeout(res, 400));
  }
}

async function start() {
  try {
    const info = await getJSON("v1/log");
    document.getElementById("log").textContent = "log " + (info.origin || "") + ", size " + (info.size ?? "");
  } catch (e) {
    document.getElementById("log").textContent = "could not read the log: " + e.message;
  }
  const form = document.getElementById("approver-form");
  const input = document.getElementById("approver");
  const params = new URLSearchParams(location.search);
  input.value = params.get("approver") || signedIn;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    pollApprovals(input.value.trim());
  });
  pollApprovals(input.value.trim());
  document.getElementById("stop-form").addEventListener("submit", stopWorkflow);
  const file = document.getElementById("passkey-file");
  file.value = localStorage.getItem("custody.passkey") || "";
  document.getElementById("passkey-save").addEventListener("click", () => loadSigner(file.value));
  if (file.value && !signedIn) loadSigner(file.value); // signed in: that passkey signs
}

// Signed in (session.js): list the held receipts of the person signed in
// (unless the address names an approver) and sign with their passkey.
let signedIn = "";
document.addEventListener("custody:session", (ev) => {
  const s = ev.detail;
  signedIn = s.signed_in ? s.name : "";
  if (!s.signed_in) return;
  const input = document.getElementById("approver");
  if (!new URLSearchParams(location.search).get("approver") && input.value !== s.name) {
    input.value = s.name;
    pollApprovals(s.name);
  }
  if (s.passkey && (!signer || signer.keyid !== s.keyid)) loadSigner(JSON.stringify(s.passkey));
});

start();
