// The live list of workflows (GET /v1/workflows, newest first, a page at a
// time), polled; each row links to the workflow's page. Every value is
// written with textContent.
import { getJSON, el, status } from "./api.js";

let before = 0; // 0: the newest page
let last = "";

function cell(tr, text, cls) {
  tr.append(el("td", text === undefined || text === null || text === "" ? "—" : text, cls));
}

function rowOf(w) {
  const tr = el("tr");
  tr.dataset.workflow = w.workflow_id;
  const td = el("td");
  const a = el("a", w.workflow_id);
  a.href = "workflow.html?id=" + encodeURIComponent(w.workflow_id);
  td.append(a);
  tr.append(td);
  cell(tr, w.owner || w.owner_keyid);
  cell(tr, (w.agents || []).join(", ") + (w.more_agents ? ", …" : ""));
  cell(tr, w.last_activity + " (#" + w.last_index + ")");
  cell(tr, w.entries, "num");
  cell(tr, w.held, w.held ? "num warn" : "num");
  cell(tr, w.stopped ? "stopped (" + w.stop_id + ")" : w.step_stops ? w.step_stops + " step stop(s)" : "no", w.stopped ? "warn" : "");
  cell(tr, w.violations, w.violations ? "num warn" : "num");
  return tr;
}

async function poll() {
  const out = document.getElementById("workflows-status");
  const body = document.querySelector("#workflows tbody");
  const older = document.getElementById("older");
  const newest = document.getElementById("newest");
  for (;;) {
    try {
      const page = await getJSON("v1/workflows?limit=50" + (before ? "&before=" + before : ""));
      const key = JSON.stringify(page);
      if (key !== last) {
        last = key;
        body.replaceChildren(...page.workflows.map(rowOf));
        older.hidden = !page.next_before;
        older.dataset.before = page.next_before || "";
        newest.hidden = before === 0;
      }
      status(out, "muted", page.total + " workflows; showing " + page.workflows.length + (before ? " older ones" : ", newest first") +
        "; updated " + new Date().toLocaleTimeString());
    } catch (e) {
      status(out, "error", "could not read the workflows: " + e.message);
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

document.getElementById("older").addEventListener("click", (ev) => {
  before = Number(ev.target.dataset.before) || 0;
  last = "";
});
document.getElementById("newest").addEventListener("click", () => {
  before = 0;
  last = "";
});
poll();
