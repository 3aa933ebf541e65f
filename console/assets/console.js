// The custody console: a view over the server's HTTP API. Everything the
// ledger returns (and so everything an agent wrote) is written with
// textContent or as an attribute value, never parsed as markup.

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
  while (!signal.aborted) {
    try {
      const q = approver ? "v1/approvals?approver=" + encodeURIComponent(approver) : "v1/approvals";
      const body = await getJSON(q, signal);
      const held = body.held || [];
      const key = JSON.stringify(held);
      if (key !== last) {
        last = key;
        list.replaceChildren(...held.map(heldCard));
      }
      status.className = "muted";
      status.textContent = held.length + " held" + (approver ? " for " + approver : "") + "; updated " + new Date().toLocaleTimeString();
    } catch (e) {
      if (signal.aborted) return;
      status.className = "error";
      status.textContent = "could not read the held receipts: " + e.message;
    }
    await new Promise((res) => setTimeout(res, 400));
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
  input.value = params.get("approver") || "";
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    pollApprovals(input.value.trim());
  });
  pollApprovals(input.value.trim());
}

start();
