// One workflow's page: the timeline and delegation tree of the server's
// replay report (GET /v1/workflows/{id}/replay), checked here against the
// bundle it came with using the TypeScript SDK's verifier (sdk.js): the
// checkpoint's signature by the log's key, every entry's inclusion proof,
// every envelope's signature, the back-links; then each row, grant and
// STOP shown is compared with the verified entry at its index. It updates
// when the workflow's event stream says an entry was added. Stop, Resume
// and Revoke are statements the person's passkey signs here. Everything an
// agent wrote is set with textContent.
import { verifyBundle, statementId, canonicalize, KeySet, decodeBase64Strict } from "./sdk.js";
import { hex, appendSigned, refusal } from "./sign.js";
import { currentPrincipal, mayStop, mayResume, mayRevoke } from "./principal.js";
import { api, getJSON, el, status } from "./api.js";

const wf = new URLSearchParams(location.search).get("id") || "";
let me = null;
let report = null;
let lastIndex = 0;

// logKey is the log's checkpoint verifier key this browser checks with:
// pinned in localStorage the first time it is read from the server (trust
// on first use; paste the key given out of band into
// localStorage["custody.vkey"] to pin it beforehand), and a server whose
// key differs from the pinned one is not believed.
async function logKey() {
  const info = await getJSON("v1/log");
  const slot = "custody.vkey." + new URL(api).pathname;
  let pinned = localStorage.getItem(slot);
  let source = "pinned in this browser";
  if (!pinned) {
    pinned = info.verifier_key;
    localStorage.setItem(slot, pinned);
    source = "read from the server and pinned now (trust on first use)";
  }
  document.getElementById("vkey").textContent = pinned;
  const src = document.getElementById("vkey-source");
  if (info.verifier_key !== pinned) {
    status(src, "error", "the server now names another key: " + info.verifier_key);
  } else {
    status(src, "muted", "(" + source + ")");
  }
  return pinned;
}

// checkShown compares what the page shows of the report with the entries
// the SDK verified: it returns the problem with each row, grant and STOP
// (undefined when it matches).
function checkShown(rep, entries) {
  const problems = new Map();
  const at = (i, what) => {
    const e = entries.get(i);
    if (!e) problems.set(what, "entry " + i + " is not in the verified bundle");
    return e;
  };
  const differ = (what, field, shown, signed) => {
    if (shown === undefined || shown === null) return;
    if (signed === undefined || signed === null || canonicalize(shown) !== canonicalize(signed)) {
      problems.set(what, field + " shown is not the signed statement's");
    }
  };
  // The fields a row shows of a statement (replay's what()), each
  // compared with the signed one.
  const fields = (what, r, st) => {
    const target = { CONFIRM: st.grantee && st.grantee.name, DELEGATE: st.grantee && st.grantee.name, REVOKE: st.target_ref,
      RESUME: st.stop_ref, APPROVAL: st.receipt_ref, STOP: st.stop_scope === "step" ? st.step_id : st.workflow_id }[st.type];
    if (st.type === "RECEIPT") {
      differ(what, "action", r.action, st.action);
      differ(what, "target", r.target, st.target);
      differ(what, "step", r.step, st.step_id);
      differ(what, "side effects", r.side_effects, st.side_effects);
      differ(what, "error", r.error, st.error);
      differ(what, "reserve", r.reserve, st.reserve);
      differ(what, "consumed", r.consumed, st.consumed);
    } else if (target !== undefined) {
      differ(what, "target", r.target, target);
    }
    if (st.type === "APPROVAL") differ(what, "reason", r.approval_reason, st.reason);
  };
  for (const r of rep.timeline || []) {
    const e = at(r.index, "row " + r.index);
    if (!e) continue;
    const st = e.statement, what = "row " + r.index;
    differ(what, "logged_at", r.logged_at, e.leaf.logged_at);
    if (st.type === "DENIAL") {
      if (r.decision !== "denied") problems.set(what, "a DENIAL shown as " + r.decision);
      differ(what, "denial id", r.denial_id, st.denial_id);
      differ(what, "reason code", r.reason_code, st.reason_code);
      differ(what, "reason", r.reason, st.reason);
      differ(what, "id", r.id, st.statement_id);
      if (st.envelope) {
        // The denied statement, whose envelope the SDK checked against
        // envelope_sha256 (and its signature when its signer is bound).
        try {
          fields(what, r, JSON.parse(new TextDecoder().decode(decodeBase64Strict(st.envelope.payload))));
        } catch (e) {
          problems.set(what, "the denied statement cannot be read: " + e.message);
        }
      }
      continue;
    }
    if (r.kind !== st.type) problems.set(what, "kind " + r.kind + " shown, " + st.type + " signed");
    differ(what, "id", r.id, statementId(st));
    fields(what, r, st);
  }
  for (const g of rep.grants || []) {
    const e = at(g.index, "grant " + g.id);
    if (!e || g.denied) continue;
    differ("grant " + g.id, "id", g.id, statementId(e.statement));
    differ("grant " + g.id, "grantee", g.grantee, e.statement.grantee && e.statement.grantee.name);
  }
  for (const s of rep.stops || []) {
    const e = at(s.index, "stop " + s.id);
    if (!e) continue;
    differ("stop " + s.id, "id", s.id, e.statement.request_id);
    differ("stop " + s.id, "reason", s.reason, e.statement.reason);
  }
  return problems;
}

function showVerification(rep, bundle, vkey) {
  const out = document.getElementById("verify");
  let verdict;
  try {
    verdict = verifyBundle(bundle, vkey);
  } catch (e) {
    status(out, "error", "NOT verified: " + e.message);
    return new Map();
  }
  if (!verdict.valid) {
    status(out, "error", "NOT verified: " + verdict.failure);
    return new Map([["bundle", verdict.failure]]);
  }
  const problems = checkShown(rep, verdict.entries);
  const cp = verdict.checkpoint;
  const shown = (rep.timeline || []).length;
  if (problems.size) {
    const [what, why] = problems.entries().next().value;
    status(out, "error", "NOT verified: " + problems.size + " shown item(s) differ from the signed entries; " + what + ": " + why);
  } else {
    status(out, "verified", "verified: the " + shown + " entries shown are in the checkpoint of size " + cp.size +
      " signed by " + KeySet.parse(vkey).origin + " (root " + hex(cp.root).slice(0, 16) + "…), with their inclusion proofs, signatures and back-links");
  }
  return problems;
}

function dd(dl, name, value) {
  dl.append(el("dt", name), el("dd", value === undefined || value === null || value === "" ? "—" : value));
}

function renderSummary(rep) {
  const dl = document.getElementById("summary");
  dl.replaceChildren();
  const inForce = (rep.stops || []).filter((s) => !s.resumed);
  dd(dl, "owner", rep.owner);
  dd(dl, "entries", (rep.timeline || []).filter((r) => !r.trust_chain).length + " in the workflow, under the checkpoint of size " + rep.checkpoint_size);
  dd(dl, "stopped", inForce.length ? inForce.map((s) => (s.scope === "chain" ? "the workflow" : "step " + s.step) + " by " + s.by + " (" + s.takeover_mode + ")").join("; ") : "no");
  const held = (rep.pending_receipts || []).filter((p) => p.held && p.held.state === "held");
  dd(dl, "held for approval", held.length ? held.map((p) => p.id + " (" + p.step + ")").join(", ") : "none");
  dd(dl, "violations", (rep.timeline || []).filter((r) => r.decision === "denied").length + " denied");
  dd(dl, "the server's replay", rep.verified ? "verified" : "FAILED: " + (rep.failure ? rep.failure.check + ": " + rep.failure.detail : ""));
}

function says(r) {
  const parts = [];
  if (r.reason) parts.push(r.reason);
  if (r.approval_of) parts.push(r.approval_of);
  if (r.approval_reason) parts.push(r.approval_reason);
  if (r.error) parts.push("error: " + r.error);
  if (r.side_effects) parts.push(JSON.stringify(r.side_effects));
  if (r.reserve) parts.push("reserve " + JSON.stringify(r.reserve));
  if (r.consumed) parts.push("consumed " + JSON.stringify(r.consumed));
  if (r.held) parts.push("held: " + r.held.state + (r.held.why ? " (" + r.held.why + ")" : ""));
  return parts.join("; ");
}

function renderTimeline(rep, problems) {
  const body = document.querySelector("#timeline tbody");
  body.replaceChildren(...(rep.timeline || []).filter((r) => !r.trust_chain).map((r) => {
    const tr = el("tr", undefined, r.decision === "denied" ? "denied" : "");
    tr.dataset.index = r.index;
    const what = [r.action, r.target ? "→ " + r.target : "", r.step ? "step " + r.step : "", r.result].filter(Boolean).join(" ");
    const problem = problems.get("row " + r.index) || problems.get("bundle");
    for (const [text, cls] of [[r.index, "num"], [r.logged_at], [r.kind + (r.id ? " " + r.id : "")], [r.actor], [what],
      [r.decision + (r.reason_code ? " " + r.reason_code : "")], [says(r)],
      [problem ? "✗ " + problem : "✓ verified", problem ? "error" : "verified"]]) {
      tr.append(el("td", text === undefined || text === "" ? "—" : text, cls));
    }
    if (r.kind === "RECEIPT" && r.step && r.result === "pending" && r.decision === "accepted" && !r.outcome) {
      const b = el("button", "stop this step", "stop-step");
      b.type = "button";
      b.addEventListener("click", () => {
        const step = document.getElementById("stop-step");
        step.value = r.step;
        step.dispatchEvent(new Event("input"));
        document.getElementById("stop-reason").focus();
      });
      tr.children[4].append(b);
    }
    return tr;
  }));
}

function renderTree(rep, problems) {
  const grants = (rep.grants || []).filter((g) => !g.denied);
  const kids = new Map();
  for (const g of grants) {
    const p = grants.some((o) => o.id === g.parent) ? g.parent : "";
    if (!kids.has(p)) kids.set(p, []);
    kids.get(p).push(g);
  }
  const node = (g) => {
    const li = el("li");
    li.dataset.grant = g.id;
    const box = el("div", undefined, "grant" + (g.revoked ? " revoked" : "") + (g.expired ? " expired" : ""));
    box.append(el("strong", g.grantee), el("span", " ← " + g.issuer + " (" + g.kind + " " + g.id + ")"));
    box.append(el("div", g.capabilities.join(", ") + " on " + (g.targets || []).join(", ") +
      ((g.limits || []).length ? "; " + g.limits.map((l) => l.key + " " + l.charged + " of " + l.limit).join(", ") : "") +
      (g.expires_at ? "; until " + g.expires_at : ""), "muted"));
    for (const [flag, text] of [[g.revoked, "revoked" + (g.revoked_via ? " via " + g.revoked_via : "")], [g.expired, "expired"], [g.stopped, "stopped by " + g.stopped]]) {
      if (flag) box.append(el("span", text, "badge bad"));
    }
    const problem = problems.get("grant " + g.id) || problems.get("bundle");
    box.append(el("span", problem ? "✗ " + problem : "✓ verified", problem ? "badge bad" : "badge"));
    if (mayRevoke(me, rep, g)) {
      const reason = el("input");
      reason.placeholder = "reason";
      reason.className = "reason";
      const b = el("button", "Revoke", "revoke");
      b.type = "button";
      b.addEventListener("click", () => act("REVOKE", { revoke_id: newId("revoke"), workflow_id: wf, target_ref: g.id,
        reason: reason.value.trim() || "revoked from the console" }));
      const f = el("div", undefined, "actions");
      f.append(reason, b);
      box.append(f);
    }
    li.append(box);
    const sub = kids.get(g.id);
    if (sub) {
      const ul = el("ul");
      ul.append(...sub.map(node));
      li.append(ul);
    }
    return li;
  };
  document.getElementById("tree").replaceChildren(...(kids.get("") || []).map(node));
}

function renderStops(rep, problems) {
  const ul = document.getElementById("stops");
  const stops = rep.stops || [];
  if (!stops.length) {
    ul.replaceChildren(el("li", "no STOP in this workflow", "muted"));
    return;
  }
  ul.replaceChildren(...stops.map((s) => {
    const li = el("li", undefined, "card");
    li.dataset.stop = s.id;
    li.append(el("strong", (s.scope === "chain" ? "the workflow" : "step " + s.step) + " stopped by " + s.by + " (" + s.takeover_mode +
      (s.takeover_to ? " → " + s.takeover_to : "") + ")"));
    li.append(el("div", s.reason), el("div", s.id + " at #" + s.index + (s.resumed ? "; resumed by " + s.resumed_by : "; in force"), "muted"));
    const problem = problems.get("stop " + s.id) || problems.get("bundle");
    li.append(el("span", problem ? "✗ " + problem : "✓ verified", problem ? "badge bad" : "badge"));
    if (mayResume(me, rep, s)) {
      const b = el("button", "Resume", "resume");
      b.type = "button";
      b.addEventListener("click", () => act("RESUME", { resume_id: newId("resume"), workflow_id: wf, stop_ref: s.id }));
      li.append(b);
    }
    return li;
  }));
}

function renderAttention(rep) {
  const ul = document.getElementById("attention");
  const items = rep.attention || [];
  ul.replaceChildren(...(items.length ? items.map((a) => el("li", a.kind + (a.index !== undefined ? " #" + a.index : "") + ": " + a.text)) : [el("li", "nothing", "muted")]));
}

function newId(prefix) {
  return prefix + "_" + hex(crypto.getRandomValues(new Uint8Array(8)));
}

// act has the person's passkey sign a statement of kind (its header filled
// in here) and appends it; the ledger's answer is shown.
async function act(kind, fields) {
  const out = document.getElementById("answer");
  status(out, "muted", "waiting for your passkey…");
  try {
    if (!me) throw new Error("sign in, or choose your passkey file, on the console's first page");
    const a = await appendSigned(me, kind, fields);
    if (!a.ok || a.body.verdict !== "accepted") {
      status(out, "error", refusal(a));
    } else {
      status(out, "answer", "the ledger answered " + a.status + " " + a.body.verdict + ": " + kind + " " + statementIdOf(kind, a.doc) + " at index " + a.body.index);
    }
    refresh();
  } catch (e) {
    status(out, "error", "not sent: " + e.message);
  }
}

function statementIdOf(kind, doc) {
  return { STOP: doc.request_id, RESUME: doc.resume_id, REVOKE: doc.revoke_id }[kind] || "";
}

function stopSubmit(ev) {
  ev.preventDefault();
  const step = document.getElementById("stop-step").value.trim();
  const mode = document.getElementById("stop-mode").value;
  const fields = { request_id: newId("stop"), workflow_id: wf, stop_scope: step ? "step" : "chain", takeover_mode: mode,
    reason: document.getElementById("stop-reason").value.trim() || "stopped from the console" };
  if (step) fields.step_id = step;
  if (mode === "delegate_to_other_agent") fields.takeover_to = document.getElementById("stop-to").value.trim();
  act("STOP", fields);
}

let refreshing = null;
let drawn = "";
let again = false;

// refresh reads the replay and the bundle, verifies, and draws; calls
// while one runs make one more run after it, half a second later.
async function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    let first = true;
    do {
      // At most two replays a second for one page, however busy the
      // workflow: each is a heavy read on the server.
      if (!first) await new Promise((res) => setTimeout(res, 500));
      first = false;
      again = false;
      try {
        const [vkey, body] = await Promise.all([logKey(), getJSON("v1/workflows/" + encodeURIComponent(wf) + "/replay")]);
        me = await currentPrincipal().catch(() => null);
        const key = JSON.stringify([body, me && me.keyid, vkey]);
        if (key === drawn) continue; // nothing new: keep what is on the page (and what is typed in it)
        drawn = key;
        report = body.report;
        const problems = showVerification(report, body.bundle, vkey);
        renderSummary(report);
        renderTimeline(report, problems);
        renderTree(report, problems);
        renderStops(report, problems);
        renderAttention(report);
        const canStop = mayStop(me, report);
        document.getElementById("stop-form").hidden = !canStop;
        document.querySelectorAll("button.stop-step").forEach((b) => { b.hidden = !canStop; });
        document.getElementById("signer").textContent = me ? "signing as " + me.name + " (key " + me.keyid.slice(0, 16) + "…, " + me.via + ")" :
          "nobody to sign: sign in, or choose a passkey file, on the console's first page to stop, resume or revoke";
        const bundle = document.getElementById("bundle");
        bundle.href = new URL("v1/bundle?index=" + report.subject + "&workflow=1", api).href;
        bundle.download = wf.replace(/[^A-Za-z0-9._-]/g, "_") + ".bundle.json";
        lastIndex = Math.max(lastIndex, report.subject);
      } catch (e) {
        status(document.getElementById("verify"), "error", "could not read the workflow: " + e.message);
      }
    } while (again);
    refreshing = null;
  })();
  return refreshing;
}

// follow listens to the workflow's event stream from the newest entry
// shown and refreshes on each new one.
function follow() {
  const es = new EventSource(new URL("v1/workflows/" + encodeURIComponent(wf) + "/events?after=" + lastIndex, api));
  es.addEventListener("entry", () => refresh());
  es.addEventListener("resume", () => refresh());
}

async function start() {
  document.getElementById("title").textContent = "workflow " + wf;
  document.title = "custody console: " + wf;
  document.getElementById("stop-form").addEventListener("submit", stopSubmit);
  document.getElementById("stop-step").addEventListener("input", (ev) => {
    document.getElementById("stop-button").textContent = ev.target.value.trim() ? "Stop step" : "Stop workflow";
  });
  document.getElementById("stop-mode").addEventListener("change", (ev) => {
    document.getElementById("stop-to").hidden = ev.target.value !== "delegate_to_other_agent";
  });
  await refresh();
  follow();
}

start();
