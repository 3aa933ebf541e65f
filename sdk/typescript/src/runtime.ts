/**
 * Runtime: an agent (or a person) with a key and a name, writing to one
 * log — the Go client.Runtime's counterpart. It fills statement headers
 * (timestamp, log, actor, seq), seals grants, signs and appends, and
 * `execute` gates an irreversible step: pending receipt, durable verified
 * acceptance, a connected STOP watch, only then the step, then its outcome.
 * It fails closed.
 */
import { createHash, randomBytes } from "node:crypto";
import type { ApprovalCheck } from "./approval.js";
import { canonicalize } from "./canonical.js";
import { AppendResult, ApprovalState, Client } from "./client.js";
import { HTTPError, RefusedError } from "./errors.js";
import { PrivateKey } from "./keys.js";
import { ApprovalRule, formatTime, optionalSet, canonicalSet } from "./scope.js";
import { Confirm, Delegate, GrantFields, Receipt, Resume, Revoke, seal, signStatement, Statement, Stop } from "./statement.js";

/** A statement before the runtime fills its header. */
export type Unsigned<T extends Statement> = Omit<T, "timestamp" | "log" | "actor" | "seq"> & Partial<Pick<T, "timestamp" | "log" | "actor" | "seq">>;

/** A step execute gates. */
export interface Step {
  /** The pending receipt's id (default: a fresh one). */
  receiptId?: string;
  /** Default: the grant's. */
  workflow?: string;
  stepId: string;
  action: string;
  target: string;
  /** The id of the grant (CONFIRM or DELEGATE) the agent acts under. */
  auth: string;
  /** Default: the grant's. */
  scopeHash?: string;
  /** Every limit key in force on the chain must be reserved (0 is allowed). */
  reserve?: Record<string, number>;
  /**
   * The exact call (e.g. a tool call's arguments): its JCS SHA-256 is the
   * pending receipt's params_sha256, shown to approvers, and is recomputed
   * before a held step runs.
   */
  params?: unknown;
}

/** What a step did. Returning nothing records success (a thrown error records failure). */
export interface Outcome {
  result?: "success" | "failure" | "partial";
  consumed?: Record<string, number>;
  sideEffects?: Record<string, string>;
  evidence?: string[];
  error?: string;
}

/** Hook points (all optional). A before* hook vetoes by throwing: nothing is written and execute/confirm rejects. */
export interface Hooks {
  /** Sees a CONFIRM before it is signed (a person's confirmation step). */
  beforeConfirm?: (confirm: Confirm) => void | Promise<void>;
  /** Sees the verified acceptance of a CONFIRM. */
  afterConfirm?: (answer: AppendResult) => void | Promise<void>;
  /** Sees a step before its pending receipt is written. */
  beforeExecute?: (step: Step) => void | Promise<void>;
  /** Sees what a step did, after its outcome was written (or failed to be: error says). */
  afterExecute?: (step: Step, outcome: Outcome, error?: unknown) => void | Promise<void>;
  /** Sees a STOP covering a running step, just before its AbortSignal fires. */
  onStop?: (stop: Stop, index: number) => void;
  /** Sees a STOP that hands the workflow over to this runtime's agent (takeover_to is its name). */
  onTakeover?: (stop: Stop, index: number) => void;
  /** Sees every verified answer this runtime gets, accepted or denied, to ship it to an audit sink. */
  emitReceipt?: (answer: AppendResult) => void;
}

/** A grant (CONFIRM or DELEGATE) to make. Sets are made canonical for you. */
export interface GrantSpec {
  id?: string;
  /** CONFIRM: required; DELEGATE: default the parent's. */
  workflow?: string;
  grantee: string;
  granteeKey: Uint8Array | string;
  steps?: string[];
  targets: string[];
  capabilities: string[];
  principals?: string[];
  limits?: Record<string, number>;
  ttlSeconds: number;
  revocable?: boolean;
  /** CONFIRM only. */
  risk?: "low" | "medium" | "high";
  /** Approval rules (DESIGN §7), written sorted by rule_id. */
  approvals?: ApprovalRule[];
}

/** A STOP to write. */
export interface StopSpec {
  id?: string;
  workflow: string;
  /** Absent: stop the whole chain. */
  step?: string;
  takeover?: "human" | "pause" | "delegate_to_other_agent";
  takeoverTo?: string;
  reason: string;
}

/** The abort reason of a step's signal when a STOP covering it arrived while it ran. */
export class StoppedError extends Error {
  override name = "StoppedError";
  constructor(readonly stop: Stop, readonly index: number) {
    super(`stopped: ${stop.stop_scope === "step" ? `step ${stop.step_id} of ` : ""}workflow ${stop.workflow_id} by STOP ${stop.request_id} at index ${index} (takeover ${stop.takeover_mode}): ${stop.reason}`);
  }
}

/** The ledger denied a statement (a DENIAL of it is logged and verified). */
export class DeniedError extends Error {
  override name = "DeniedError";
  readonly reasonCode: string;
  constructor(readonly answer: AppendResult) {
    super(`denied: ${answer.reason_code}: ${answer.reason} (DENIAL at index ${answer.index})`);
    this.reasonCode = answer.reason_code ?? "";
  }
}

/** execute never ran the step; cause says why (a DeniedError, RefusedError, HTTPError, UnverifiedError, a veto, no STOP watch). */
export class NotExecutedError extends Error {
  override name = "NotExecutedError";
  constructor(message: string, readonly execution: Execution, options?: { cause?: unknown }) {
    super(`the step was not executed: ${message}`, options);
  }
}

/** What execute did. */
export interface Execution {
  /** The accepted pending receipt. */
  pending?: AppendResult;
  /** fn was called. */
  ran: boolean;
  /** The outcome receipt, once logged. */
  outcome?: AppendResult;
  /** The STOP that aborted the step, if one did. */
  stopped?: StoppedError;
  /** For a held step: the runtime's own check that it was approved. */
  approval?: ApprovalCheck;
}

/** newId returns a fresh statement id: <prefix>_<16 random hex digits>. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(8).toString("hex")}`;
}

/** Options of a Runtime. */
export interface RuntimeOptions {
  /** The name the log binds (or will bind) to the key; omitted: asked of the ledger at the first append. */
  name?: string;
  hooks?: Hooks;
  /** The clock of statement timestamps (default Date.now). */
  now?: () => Date;
  /** How long execute waits for the workflow's event stream before refusing to run a step (ms, default 10000). */
  watchTimeoutMs?: number;
  /** How long execute waits for a held step's approval (ms, default 600000); past it the step does not run (approval_timeout). */
  approvalWaitMs?: number;
}

/** The reasons a held step does not run; its failure outcome's error starts with one. */
export type ApprovalFailure = "approval_rejected" | "approval_expired" | "approval_closed" | "approval_timeout" | "ledger_unavailable" | "params_mismatch";

/** A held step that did not run, and why (execute rejects with a NotExecutedError whose cause is this). */
export class NotApprovedError extends Error {
  override name = "NotApprovedError";
  constructor(readonly code: ApprovalFailure, reason: string) {
    super(`${code}: ${reason}`);
  }
}

/** paramsSha256 is the lowercase hex SHA-256 of the JCS of a call's parameters. */
export function paramsSha256(params: unknown): string {
  return createHash("sha256").update(canonicalize(params)).digest("hex");
}

/** A running step, as its workflow's STOP watch sees it. */
interface WatchSub {
  step: Step & { workflow: string };
  /** The index of its pending receipt: STOPs after it cover it. */
  after: number;
  ex: Execution;
  ctrl: AbortController;
  /** The STOPs already delivered to it. */
  seen: Set<number>;
  /** Resolves when the watch can reach the step. */
  ready?: Promise<void>;
}

/** One event stream of a workflow, shared by the runtime's running steps of it. */
interface Watch {
  workflow: string;
  /** The stream started after this index, or the STOPs it saw up to here were dropped from stops. */
  startAfter: number;
  subs: Set<WatchSub>;
  /** The STOPs it has seen (the latest few thousand), for steps that join later. */
  stops: Array<[number, Stop]>;
  ctrl: AbortController;
  ended: boolean;
  /** Resolves when the stream is connected (at once if it is). */
  connected: () => Promise<void>;
}

/** A Runtime signs as one key and appends through one Client. Appends are made one at a time, so each carries the next seq. */
export class Runtime {
  readonly client: Client;
  readonly key: PrivateKey;
  readonly hooks: Hooks;
  now: () => Date;
  watchTimeoutMs: number;
  approvalWaitMs: number;
  #name: string;
  #next = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #watches = new Map<string, Watch>();

  constructor(client: Client, key: PrivateKey, options: RuntimeOptions = {}) {
    this.client = client;
    this.key = key;
    this.hooks = options.hooks ?? {};
    this.#name = options.name ?? "";
    this.now = options.now ?? (() => new Date());
    this.watchTimeoutMs = options.watchTimeoutMs ?? 10000;
    this.approvalWaitMs = options.approvalWaitMs ?? 600000;
  }

  /** The runtime's bound name ("" until known). */
  get name(): string {
    return this.#name;
  }

  /**
   * append fills a statement's header, seals it, signs it and appends it,
   * resolving to the verified answer (accepted or denied) as
   * Client.append does. Denied statements consume no seq; after a
   * seq_mismatch or an answer that never came, the next seq is asked of the
   * ledger again.
   */
  append<T extends Statement>(st: Unsigned<T>, signal?: AbortSignal): Promise<AppendResult> {
    const run = this.#queue.then(() => this.#append(st as unknown as Statement, signal));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #append(st: Statement, signal?: AbortSignal): Promise<AppendResult> {
    if (this.#next === 0 || this.#name === "") {
      const ks = await this.client.keySeq(this.key.keyId, signal);
      this.#next = ks.next_seq;
      if (this.#name === "") {
        if (!ks.bound || !ks.name) throw new Error(`key ${this.key.keyId} is not bound in the log: give the runtime its name`);
        this.#name = ks.name;
      }
    }
    st.timestamp = formatTime(this.now());
    st.log = this.client.origin;
    st.actor = this.#name;
    st.seq = this.#next;
    seal(st);
    const env = signStatement(this.key, st);
    let answer: AppendResult;
    try {
      answer = await this.client.append(env, signal);
    } catch (e) {
      if (!(e instanceof RefusedError)) this.#next = 0; // the outcome is unknown: ask the ledger next time
      throw e;
    }
    if (answer.accepted) this.#next = st.seq + 1;
    else if (answer.reason_code === "seq_mismatch") this.#next = 0;
    this.hooks.emitReceipt?.(answer);
    return answer;
  }

  /** appendOrThrow is append, rejecting with a DeniedError on a denial. */
  async appendOrThrow<T extends Statement>(st: Unsigned<T>, signal?: AbortSignal): Promise<AppendResult> {
    const a = await this.append(st, signal);
    if (!a.accepted) throw new DeniedError(a);
    return a;
  }

  #grant(g: GrantSpec, workflow: string): GrantFields {
    const key = typeof g.granteeKey === "string" ? g.granteeKey : Buffer.from(g.granteeKey).toString("base64");
    const scope: GrantFields["scope"] = { workflow_id: workflow, capabilities: canonicalSet(g.capabilities)!, targets: canonicalSet(g.targets)! };
    const steps = optionalSet(g.steps);
    const principals = optionalSet(g.principals);
    if (steps) scope.step_ids = steps;
    if (principals) scope.principals = principals;
    const out: GrantFields = { grantee: { name: g.grantee, public_key: key }, scope, ttl_seconds: g.ttlSeconds, revocable: g.revocable ?? false, scope_hash: "" };
    if (g.limits && Object.keys(g.limits).length > 0) out.limits = { ...g.limits };
    if (g.approvals && g.approvals.length > 0) out.approvals = [...g.approvals].sort((a, b) => (a.rule_id < b.rule_id ? -1 : a.rule_id > b.rule_id ? 1 : 0));
    return out;
  }

  /** confirm grants an agent authority (this runtime's key must be an enrolled principal's); beforeConfirm may veto it. Rejects with a DeniedError on a denial. */
  async confirm(g: GrantSpec, signal?: AbortSignal): Promise<AppendResult> {
    if (!g.workflow) throw new TypeError("confirm: a CONFIRM names its workflow");
    const doc = { type: "CONFIRM", confirm_id: g.id ?? newId("confirm"), ...this.#grant(g, g.workflow), ...(g.risk ? { risk_level: g.risk } : {}) } as Unsigned<Confirm>;
    if (this.hooks.beforeConfirm) {
      try {
        await this.hooks.beforeConfirm(doc as Confirm);
      } catch (e) {
        throw new Error(`beforeConfirm vetoed the CONFIRM: ${(e as Error).message}`, { cause: e });
      }
    }
    const a = await this.appendOrThrow(doc, signal);
    await this.hooks.afterConfirm?.(a);
    return a;
  }

  /** grantOf fetches an accepted CONFIRM or DELEGATE by id (read from its leaf). */
  async grantOf(id: string, signal?: AbortSignal): Promise<Confirm | Delegate> {
    const e = await this.client.statement(id, signal);
    const st = e.read!.statement;
    if (st.type !== "CONFIRM" && st.type !== "DELEGATE") throw new Error(`${id} is a ${st.type}, not a grant`);
    return st;
  }

  /** delegate hands a sub-agent part of the grant parentId (this runtime's key must be its grantee). Rejects with a DeniedError on a denial. */
  async delegate(parentId: string, g: GrantSpec, signal?: AbortSignal): Promise<AppendResult> {
    const parent = await this.grantOf(parentId, signal);
    const doc = {
      type: "DELEGATE", delegation_id: g.id ?? newId("delegate"), parent_ref: parentId, parent_scope_hash: parent.scope_hash,
      ...this.#grant(g, g.workflow ?? parent.scope.workflow_id),
    } as Unsigned<Delegate>;
    return this.appendOrThrow(doc, signal);
  }

  /** stop halts a step (and the steps below it) or, with no step, the whole workflow. Rejects with a DeniedError on a denial. */
  async stop(s: StopSpec, signal?: AbortSignal): Promise<AppendResult> {
    const doc: Unsigned<Stop> = {
      type: "STOP", request_id: s.id ?? newId("stop"), workflow_id: s.workflow, stop_scope: s.step ? "step" : "chain",
      takeover_mode: s.takeover ?? "human", reason: s.reason,
    };
    if (s.step) doc.step_id = s.step;
    if (s.takeoverTo) doc.takeover_to = s.takeoverTo;
    return this.appendOrThrow(doc, signal);
  }

  /** revoke ends a grant and everything below it (workflow default: the grant's). Rejects with a DeniedError on a denial. */
  async revoke(r: { id?: string; target: string; workflow?: string; reason: string }, signal?: AbortSignal): Promise<AppendResult> {
    const workflow = r.workflow ?? (await this.grantOf(r.target, signal)).scope.workflow_id;
    const doc: Unsigned<Revoke> = { type: "REVOKE", revoke_id: r.id ?? newId("revoke"), workflow_id: workflow, target_ref: r.target, reason: r.reason };
    return this.appendOrThrow(doc, signal);
  }

  /** resume lifts the STOP whose request_id is stop. Rejects with a DeniedError on a denial. */
  async resume(r: { id?: string; workflow: string; stop: string }, signal?: AbortSignal): Promise<AppendResult> {
    const doc: Unsigned<Resume> = { type: "RESUME", resume_id: r.id ?? newId("resume"), workflow_id: r.workflow, stop_ref: r.stop };
    return this.appendOrThrow(doc, signal);
  }

  /** receipt appends a RECEIPT; a missing receipt_id gets a fresh one, and a missing scope_hash or workflow_id is read from its grant. */
  async receipt(doc: Partial<Unsigned<Receipt>> & Pick<Receipt, "step_id" | "action" | "target" | "authorization_ref" | "result">, signal?: AbortSignal): Promise<AppendResult> {
    doc.receipt_id ??= newId("receipt");
    if (!doc.scope_hash || !doc.workflow_id) {
      const g = await this.grantOf(doc.authorization_ref, signal);
      doc.scope_hash ??= g.scope_hash;
      doc.workflow_id ??= g.scope.workflow_id;
    }
    return this.append({ type: "RECEIPT", ...doc } as Unsigned<Receipt>, signal);
  }

  /**
   * execute gates an irreversible step. It writes the pending receipt,
   * waits for the ledger's durable, verified acceptance, connects to the
   * workflow's event stream, and only then calls fn with an AbortSignal
   * that a STOP covering the step aborts (its reason a StoppedError). It
   * fails closed: no answer, a denial, an answer that does not verify, or
   * no event stream within watchTimeoutMs means fn never runs and execute
   * rejects with a NotExecutedError (an accepted pending receipt is then
   * closed with a failure outcome). When fn returns or throws, the outcome
   * receipt is written, even after a STOP: it records what happened.
   *
   * It resolves only if fn ran, returned, and its outcome was logged; if fn
   * threw, execute rejects with fn's error once the outcome is written.
   */
  async execute(step: Step, fn: (signal: AbortSignal) => Promise<Outcome | void> | Outcome | void): Promise<Execution> {
    const ex: Execution = { ran: false };
    if (this.hooks.beforeExecute) {
      try {
        await this.hooks.beforeExecute(step);
      } catch (e) {
        throw new NotExecutedError(`beforeExecute: ${(e as Error).message}`, ex, { cause: e });
      }
    }
    const receiptId = step.receiptId ?? newId("receipt");
    const pending: Partial<Unsigned<Receipt>> & Pick<Receipt, "step_id" | "action" | "target" | "authorization_ref" | "result"> = {
      receipt_id: receiptId, step_id: step.stepId, action: step.action, target: step.target, authorization_ref: step.auth, result: "pending",
    };
    if (step.workflow) pending.workflow_id = step.workflow;
    if (step.scopeHash) pending.scope_hash = step.scopeHash;
    if (step.reserve && Object.keys(step.reserve).length > 0) pending.reserve = step.reserve;
    if (step.params !== undefined) pending.params_sha256 = paramsSha256(step.params);
    let answer: AppendResult;
    try {
      answer = await this.receipt(pending);
    } catch (e) {
      throw new NotExecutedError((e as Error).message, ex, { cause: e });
    }
    if (!answer.accepted) {
      const d = new DeniedError(answer);
      throw new NotExecutedError(d.message, ex, { cause: d });
    }
    ex.pending = answer;
    const s: Required<Pick<Step, "workflow" | "scopeHash" | "receiptId">> & Step = { ...step, workflow: pending.workflow_id!, scopeHash: pending.scope_hash!, receiptId };
    if (answer.held) {
      // A person must approve this exact step first (DESIGN §7): wait, then
      // verify the APPROVALs ourselves, or record why it did not run.
      try {
        ex.approval = await this.#awaitApproval(s);
      } catch (e) {
        const err = e instanceof NotApprovedError ? e : new NotApprovedError("ledger_unavailable", (e as Error).message);
        await this.#outcome(s, ex, { result: "failure", error: err.message }).catch(() => undefined);
        throw new NotExecutedError(err.message, ex, { cause: err });
      }
    }

    // Join the workflow's STOP watch (one event stream per workflow, shared
    // by the steps this runtime runs): every STOP logged after the pending
    // receipt reaches the step, none is missed between the two.
    const stepCtrl = new AbortController();
    const sub: WatchSub = { step: s, after: answer.index, ex, ctrl: stepCtrl, seen: new Set() };
    const w = this.#subscribe(sub);
    const finishWatch = async () => {
      this.#unsubscribe(w, sub);
    };
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<string>((r) => (timer = setTimeout(() => r("late"), this.watchTimeoutMs)));
    const ready = await Promise.race([sub.ready!.then(() => "", (e: unknown) => (e as Error).message ?? String(e)), timedOut]);
    clearTimeout(timer);
    if (ready !== "") {
      await finishWatch();
      const why = ready === "late" ? `no event stream for workflow ${s.workflow} within ${this.watchTimeoutMs} ms` : `the STOP watch of workflow ${s.workflow} failed: ${ready}`;
      const err = new NotExecutedError(`${why}, so a STOP could not reach the step`, ex);
      await this.#outcome(s, ex, { result: "failure", error: "not executed: " + err.message }).catch(() => undefined);
      throw err;
    }

    ex.ran = true;
    let out: Outcome = {};
    let ferr: unknown;
    let threw = false;
    try {
      out = (await fn(stepCtrl.signal)) ?? {};
    } catch (e) {
      threw = true;
      ferr = e;
    }
    await finishWatch();
    if (threw) {
      out = { ...out, result: "failure", error: ex.stopped && ferr !== ex.stopped ? `${String((ferr as Error)?.message ?? ferr)}; ${ex.stopped.message}` : String((ferr as Error)?.message ?? ferr) };
    }
    let oerr: unknown;
    try {
      await this.#outcome(s, ex, out);
    } catch (e) {
      oerr = e;
    }
    await this.hooks.afterExecute?.(s, out, ferr ?? oerr);
    if (threw) throw ferr;
    if (oerr) throw oerr;
    return ex;
  }

  /**
   * Waits for a held receipt's approval: the server's long poll says when
   * something changed (advisory), then the runtime fetches the workflow's
   * bundle, verifies it and decides from the APPROVALs it proves. Once
   * approved it checks again against a fresh bundle (a fresh checkpoint)
   * that nothing closed the receipt, that the deadline has not passed, and
   * that params_sha256 is the call's. Anything else throws a
   * NotApprovedError naming the reason.
   */
  async #awaitApproval(s: Step & { receiptId: string }): Promise<ApprovalCheck> {
    const id = s.receiptId;
    const limit = Date.now() + this.approvalWaitMs;
    let deadline = Infinity; // ms, known from the first verified check
    let lastError = "";
    let subject = id;
    const check = async (): Promise<ApprovalCheck | undefined> => {
      try {
        const c = await this.client.checkApproval(id, subject, s.stepId);
        if (c.deadlineNs !== undefined) deadline = Number(c.deadlineNs / 1_000_000n);
        lastError = "";
        return c;
      } catch (e) {
        lastError = (e as Error).message;
        return undefined;
      }
    };
    const decided = (c: ApprovalCheck): boolean => {
      switch (c.state) {
        case "approved":
          return true;
        case "rejected":
          throw new NotApprovedError("approval_rejected", c.reason);
        case "closed":
          throw new NotApprovedError("approval_closed", c.reason);
        case "not_held":
          throw new NotApprovedError("approval_closed", `the ledger held ${id}, but ${c.reason}`);
      }
      if (Date.now() >= deadline) throw new NotApprovedError("approval_expired", `${c.reason}, and the deadline has passed`);
      return false;
    };
    let approved: ApprovalCheck | undefined;
    let first = await check();
    if (first && decided(first)) approved = first;
    while (!approved) {
      const left = Math.min(limit, deadline) - Date.now();
      if (left <= 0) break;
      let st: ApprovalState | undefined;
      try {
        st = await this.client.approvalState(id, left);
      } catch (e) {
        lastError = (e as Error).message;
        await new Promise((r) => setTimeout(r, Math.min(500, Math.max(0, left))));
        continue;
      }
      if (st.state === "held" && first) continue;
      const last = (st.approvals ?? []).reduce<{ index: number; approval_id: string } | undefined>((a, b) => (!a || b.index > a.index ? b : a), undefined);
      subject = last?.approval_id ?? id;
      const c = await check();
      first ??= c;
      if (c && decided(c)) approved = c;
      else if (!c || st.state !== "held") await new Promise((r) => setTimeout(r, 200));
    }
    if (!approved) {
      if (Date.now() >= deadline) throw new NotApprovedError("approval_expired", `receipt ${id} was not approved before its deadline ${new Date(deadline).toISOString()}`);
      if (lastError) throw new NotApprovedError("ledger_unavailable", `receipt ${id}: ${lastError}`);
      throw new NotApprovedError("approval_timeout", `receipt ${id} was not approved within ${this.approvalWaitMs} ms`);
    }
    // Immediately before running: a fresh bundle, checked again.
    const fresh = await check();
    if (!fresh) throw new NotApprovedError("ledger_unavailable", `receipt ${id}: no fresh verified bundle: ${lastError}`);
    if (!decided(fresh)) throw new NotApprovedError("approval_closed", fresh.reason);
    if (Date.now() >= deadline) throw new NotApprovedError("approval_expired", `receipt ${id} was approved, but its deadline ${fresh.deadline} has passed`);
    const want = fresh.receipt?.params_sha256;
    if (want !== undefined && (s.params === undefined || paramsSha256(s.params) !== want)) {
      throw new NotApprovedError("params_mismatch", `receipt ${id} approved params_sha256 ${want}, and the call about to run hashes to ${s.params === undefined ? "nothing" : paramsSha256(s.params)}`);
    }
    return fresh;
  }

  /**
   * Registers a running step with its workflow's STOP watch, opening the
   * watch (one event stream) if none is open. The watch's stream starts
   * after the pending receipt of the step that opened it and reconnects
   * with Last-Event-ID; it is opened with a Custody-Stream-Step proof of a
   * step it covers. A step that joins late gets the STOPs the watch has
   * already seen after its pending receipt; one whose pending receipt is
   * older than the watch's start reads the gap from the log. sub.ready
   * resolves once the stream is connected (and the gap read): only then
   * may the step run.
   */
  #subscribe(sub: WatchSub): Watch {
    const wf = sub.step.workflow;
    let w = this.#watches.get(wf);
    if (!w || w.ended) {
      w = this.#openWatch(wf, sub);
      this.#watches.set(wf, w);
    }
    const watch = w;
    watch.subs.add(sub);
    for (const [index, st] of watch.stops) this.#deliver(sub, st, index);
    const gapEnd = watch.startAfter; // the STOPs the watch saw after it are in watch.stops
    const gap = gapEnd > sub.after
      ? this.client.workflow(wf, sub.after).then((entries) => {
          for (const e of entries) {
            if (e.index > gapEnd) break;
            const st = e.read?.statement;
            if (st?.type === "STOP") this.#deliver(sub, st, e.index);
          }
        })
      : Promise.resolve();
    sub.ready = Promise.all([gap, watch.connected()]).then(() => undefined);
    sub.ready.catch(() => undefined);
    return watch;
  }

  /** A step has ended: it leaves its watch, which closes when its last step has left. */
  #unsubscribe(w: Watch, sub: WatchSub): void {
    w.subs.delete(sub);
    if (w.subs.size === 0) {
      w.ended = true;
      w.ctrl.abort();
      if (this.#watches.get(w.workflow) === w) this.#watches.delete(w.workflow);
    }
  }

  /** Opens a workflow's watch for its first step (already registered when the stream's first proof is made). */
  #openWatch(workflow: string, first: WatchSub): Watch {
    const after = first.after;
    const ctrl = new AbortController();
    let isUp = false;
    let waiters: Array<() => void> = [];
    const w: Watch = {
      workflow, startAfter: after, subs: new Set([first]), stops: [], ctrl, ended: false,
      connected: () => (isUp ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
    };
    const name = this.#name;
    // The proof names the pending receipt of a step the watch covers now
    // (the newest: the server counts at most two streams per step).
    const stepProof = () => {
      let last: WatchSub | undefined;
      for (const sub of w.subs) last = sub;
      if (!last) return undefined;
      const msg = new TextEncoder().encode(`custody event stream for a step v1\n${this.client.origin}\n${workflow}\n${last.after}\n`);
      return `${last.after} ${Buffer.from(this.key.sign(msg)).toString("base64")}`;
    };
    void (async () => {
      try {
        for await (const e of this.client.events(workflow, {
          after, signal: ctrl.signal, stepProof, kinds: ["STOP"],
          onConnect: () => {
            isUp = true;
            const ws = waiters;
            waiters = [];
            for (const r of ws) r();
          },
          onDisconnect: () => (isUp = false),
        })) {
          const st = e.read?.statement;
          if (!st || st.type !== "STOP") continue;
          w.stops.push([e.index, st]);
          if (w.stops.length > 4096) {
            // Steps that join later read the dropped part from the log.
            w.startAfter = w.stops[2047]![0];
            w.stops.splice(0, 2048);
          }
          if (st.takeover_to && st.takeover_to === name) this.hooks.onTakeover?.(st, e.index);
          for (const sub of [...w.subs]) this.#deliver(sub, st, e.index);
        }
      } catch {
        /* the stream ends only when ctrl aborts */
      } finally {
        isUp = false;
        w.ended = true;
        if (this.#watches.get(workflow) === w) this.#watches.delete(workflow);
      }
    })();
    return w;
  }

  /** Aborts a running step that a STOP logged after its pending receipt covers (once per STOP). */
  #deliver(sub: WatchSub, st: Stop, index: number): void {
    if (index <= sub.after || sub.seen.has(index)) return;
    const s = sub.step;
    const covers = st.workflow_id === s.workflow && (st.stop_scope === "chain" || s.stepId === st.step_id || s.stepId.startsWith(st.step_id + "/"));
    if (!covers) return;
    sub.seen.add(index);
    this.hooks.onStop?.(st, index);
    const se = new StoppedError(st, index);
    sub.ex.stopped ??= se;
    sub.ctrl.abort(sub.ex.stopped);
  }

  /** Writes the outcome receipt of an executed (or abandoned) step; it is written even after a STOP. */
  async #outcome(s: Step & { workflow: string; scopeHash: string; receiptId: string }, ex: Execution, out: Outcome): Promise<void> {
    const doc: Partial<Unsigned<Receipt>> & Pick<Receipt, "step_id" | "action" | "target" | "authorization_ref" | "result"> = {
      workflow_id: s.workflow, step_id: s.stepId, action: s.action, target: s.target, authorization_ref: s.auth,
      result: out.result ?? "success", scope_hash: s.scopeHash, pending_ref: s.receiptId,
    };
    if (out.consumed && Object.keys(out.consumed).length > 0) doc.consumed = out.consumed;
    if (out.sideEffects && Object.keys(out.sideEffects).length > 0) doc.side_effects = out.sideEffects;
    if (out.evidence && out.evidence.length > 0) doc.evidence_refs = out.evidence;
    if (out.error && doc.result !== "success") doc.error = out.error;
    const a = await this.receipt(doc, AbortSignal.timeout(30000));
    if (!a.accepted) throw new DeniedError(a);
    ex.outcome = a;
  }
}

export { HTTPError };
