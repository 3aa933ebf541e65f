/**
 * A runtime's own check that a held receipt was approved (DESIGN §7
 * "Running an approved step"): from a bundle it verified itself (checkpoint,
 * inclusion proofs, every signature, passkeys included), never from the
 * server's word. It finds the rules in force on the receipt's chain that
 * match it, its deadline, and the APPROVALs logged for it, and decides
 * held, approved, rejected, expired or closed.
 */
import { createHash } from "node:crypto";
import { Bundle, verifyBundle } from "./bundle.js";
import type { ReadLeaf } from "./leaf.js";
import { parsePasskey } from "./passkey.js";
import { parsePublicKey } from "./keys.js";
import { ApprovalRule, match } from "./scope.js";
import { Approval, Confirm, Delegate, grantDescriptor, Principal, Receipt, Revoke, Stop } from "./statement.js";

export type ApprovalStateName = "held" | "approved" | "rejected" | "expired" | "closed" | "not_held";

/** What the runtime concluded about a held receipt. */
export interface ApprovalCheck {
  state: ApprovalStateName;
  /** Why, in a sentence naming the receipt, the rule or the entry. */
  reason: string;
  receipt?: Receipt;
  receiptIndex?: number;
  /** The deadline as an RFC 3339 time (logged_at + the smallest matched ttl, or the earliest grant expiry). */
  deadline?: string;
  /** The deadline in nanoseconds since the epoch. */
  deadlineNs?: bigint;
  /** The names whose APPROVAL counted. */
  approvedBy: string[];
}

const sha256hex = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

/** timeNs reads an RFC 3339 UTC time with optional fractional seconds as nanoseconds since the epoch. */
export function timeNs(s: string): bigint {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z$/.exec(s);
  if (!m) throw new Error(`${JSON.stringify(s)} is not an RFC 3339 UTC time`);
  const secs = BigInt(Date.parse(m[1] + "Z") / 1000);
  return secs * 1_000_000_000n + BigInt((m[2] ?? "").padEnd(9, "0") || "0");
}

function nsTime(ns: bigint): string {
  const secs = ns / 1_000_000_000n;
  const frac = (ns % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/, "");
  return new Date(Number(secs) * 1000).toISOString().slice(0, 19) + (frac ? "." + frac : "") + "Z";
}

const covers = (set: string[] | undefined, id: string) => set === undefined || set.some((p) => match(p, id));

/** ruleMatches is DESIGN §7's "matches": action, target and step under the rule's sets; with above, some key reserved above it. */
export function ruleMatches(r: ApprovalRule, rc: Receipt): boolean {
  if (!covers(r.capabilities, rc.action) || !covers(r.targets, rc.target) || !covers(r.step_ids, rc.step_id)) return false;
  if (r.above === undefined) return true;
  return Object.entries(r.above).some(([k, v]) => (rc.reserve?.[k] ?? 0) > v);
}

/**
 * checkApproval verifies bundle (a workflow bundle holding the receipt and
 * the entries after it) against the log's key set and decides the held
 * receipt's state from what the bundle proves. A bundle that does not
 * verify throws.
 */
export function checkApproval(bundle: Bundle | string, verifierKeys: string, receiptId: string, stepId?: string): ApprovalCheck {
  const v = verifyBundle(bundle, verifierKeys);
  if (!v.valid) throw new Error(`the bundle does not verify: ${v.failure}`);
  const entries = [...v.entries.entries()].sort((a, b) => a[0] - b[0]);
  const out: ApprovalCheck = { state: "not_held", reason: "", approvedBy: [] };

  // Names bound to keys, and when each name was first enrolled.
  const nameOf = new Map<string, { name: string; retiredAt?: number }>();
  const enrolledAt = new Map<string, number>();
  const grants = new Map<string, Confirm | Delegate>();
  const issuer = new Map<string, string>(); // grant id -> the key id that signed it
  let rcEntry: ReadLeaf | undefined;
  let rcIndex = -1;
  for (const [i, r] of entries) {
    const st = r.statement;
    if (st.type === "PRINCIPAL") {
      const p = st as Principal;
      const kid = p.key_type ? parsePasskey(p.key_type, p.public_key, p.rp_id ?? "", p.origins ?? []).keyId : sha256hex(parsePublicKey(p.public_key));
      if (p.op === "enroll" || p.op === "add_key") {
        nameOf.set(kid, { name: p.name });
        if (!enrolledAt.has(p.name)) enrolledAt.set(p.name, i);
      } else if (p.op === "retire") {
        const k = nameOf.get(kid);
        if (k) k.retiredAt = i;
      }
    }
    if (st.type === "CONFIRM") grants.set((st as Confirm).confirm_id, st as Confirm);
    if (st.type === "DELEGATE") grants.set((st as Delegate).delegation_id, st as Delegate);
    if (st.type === "CONFIRM" || st.type === "DELEGATE") issuer.set(st.type === "CONFIRM" ? (st as Confirm).confirm_id : (st as Delegate).delegation_id, r.envelope.keyId);
    if (st.type === "RECEIPT" && (st as Receipt).receipt_id === receiptId && (st as Receipt).result === "pending") {
      rcEntry = r;
      rcIndex = i;
    }
  }
  if (!rcEntry) throw new Error(`the bundle does not hold the pending receipt ${receiptId}`);
  const rc = rcEntry.statement as Receipt;
  out.receipt = rc;
  out.receiptIndex = rcIndex;
  if (stepId !== undefined && rc.step_id !== stepId) throw new Error(`receipt ${receiptId} is for step ${rc.step_id}, not ${stepId}`);
  const rcHash = sha256hex(rcEntry.envelope.payload);

  // The chain of grants and the rules in force that match the receipt.
  const chain: (Confirm | Delegate)[] = [];
  for (let id: string | undefined = rc.authorization_ref; id !== undefined; ) {
    const g = grants.get(id);
    if (!g) throw new Error(`the bundle does not hold grant ${id} of receipt ${receiptId}'s chain`);
    chain.push(g);
    id = g.type === "DELEGATE" ? (g as Delegate).parent_ref : undefined;
    if (chain.length > 64) throw new Error("the chain of grants does not end");
  }
  const loggedAt = timeNs(rcEntry.leaf.logged_at);
  const matched: { grant: string; rule: ApprovalRule; by: Set<string> }[] = [];
  let deadline: bigint | undefined;
  let expiry: bigint | undefined;
  for (const g of chain) {
    const gid = g.type === "CONFIRM" ? (g as Confirm).confirm_id : (g as Delegate).delegation_id;
    for (const r of g.approvals ?? []) {
      if (!ruleMatches(r, rc)) continue;
      matched.push({ grant: gid, rule: r, by: new Set() });
      const d = loggedAt + BigInt(r.ttl_seconds) * 1_000_000_000n;
      if (deadline === undefined || d < deadline) deadline = d;
    }
    const e = timeNs(grantDescriptor(g).expires_at);
    if (expiry === undefined || e < expiry) expiry = e;
  }
  if (matched.length === 0) {
    out.reason = `receipt ${receiptId} matches no approval rule in force on its chain`;
    return out;
  }
  if (expiry !== undefined && expiry < deadline!) deadline = expiry;
  out.deadlineNs = deadline;
  out.deadline = nsTime(deadline!);
  const chainIds = new Set(chain.map((g) => (g.type === "CONFIRM" ? (g as Confirm).confirm_id : (g as Delegate).delegation_id)));
  const answered = new Set<string>();
  const issuers = new Set([...chainIds].map((id) => issuer.get(id)));

  const describe = (m: (typeof matched)[number]) => `rule ${m.rule.rule_id} of ${m.grant} (quorum ${m.rule.quorum} of ${m.rule.approvers.join(", ")})`;
  for (const [i, r] of entries) {
    if (i <= rcIndex) continue;
    const st = r.statement;
    const at = timeNs(r.leaf.logged_at);
    if (st.type === "STOP") {
      const s = st as Stop;
      if (s.workflow_id === rc.workflow_id && (s.stop_scope === "chain" || rc.step_id === s.step_id || rc.step_id.startsWith(s.step_id + "/"))) {
        return { ...out, state: "closed", reason: `receipt ${receiptId} was closed by STOP ${s.request_id} at index ${i}` };
      }
    }
    if (st.type === "REVOKE" && chainIds.has((st as Revoke).target_ref)) {
      return { ...out, state: "closed", reason: `receipt ${receiptId} was closed by REVOKE ${(st as Revoke).revoke_id} of ${(st as Revoke).target_ref} at index ${i}` };
    }
    if (st.type === "PRINCIPAL" && (st as Principal).op === "retire") {
      const p = st as Principal;
      const kid = p.key_type ? parsePasskey(p.key_type, p.public_key, p.rp_id ?? "", p.origins ?? []).keyId : sha256hex(parsePublicKey(p.public_key));
      if (issuers.has(kid)) return { ...out, state: "closed", reason: `receipt ${receiptId} was closed by the retirement of ${p.name}'s key ${kid.slice(0, 16)}, which issued a grant on its chain (index ${i})` };
    }
    if (st.type !== "APPROVAL") continue;
    const a = st as Approval;
    if (a.receipt_ref !== receiptId) continue;
    // Every check of DESIGN §7 the bundle can show; an APPROVAL that fails
    // one does not count (a ledger should have denied it).
    if (a.receipt_sha256 !== rcHash || a.workflow_id !== rc.workflow_id) continue;
    if (at >= deadline!) continue;
    const who = nameOf.get(r.envelope.keyId);
    if (!who || who.name !== a.actor || (who.retiredAt !== undefined && who.retiredAt < i)) continue;
    const enrolled = enrolledAt.get(a.actor);
    if (enrolled === undefined || enrolled > rcEntry.leaf.trust_head) continue;
    const eligible = matched.filter((m) => covers(m.rule.approvers, a.actor));
    if (eligible.length === 0 || answered.has(a.actor)) continue;
    answered.add(a.actor);
    if (a.decision === "reject") {
      return { ...out, state: "rejected", reason: `receipt ${receiptId} was rejected by ${a.actor} (APPROVAL ${a.approval_id} at index ${i})${a.reason ? `: ${a.reason}` : ""}` };
    }
    for (const m of eligible) m.by.add(a.actor);
    if (matched.every((m) => m.by.size >= m.rule.quorum)) {
      out.approvedBy = [...new Set(matched.flatMap((m) => [...m.by]))].sort();
      return { ...out, state: "approved", reason: `receipt ${receiptId} was approved by ${out.approvedBy.join(", ")} (last APPROVAL ${a.approval_id} at index ${i})` };
    }
  }
  const missing = matched.filter((m) => m.by.size < m.rule.quorum).map(describe).join("; ");
  return { ...out, state: "held", reason: `receipt ${receiptId} waits for ${missing} until ${out.deadline}` };
}

