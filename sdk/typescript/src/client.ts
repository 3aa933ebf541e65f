/**
 * Client: a verified connection to one custody ledger over HTTP (the Go
 * package client's counterpart). It trusts nothing the server says that it
 * can check: an append answer is returned only once the checkpoint's
 * signature (a C2SP signed note by the log's key), the inclusion proof of
 * the leaf, and the leaf's content (the exact envelope submitted, or a
 * DENIAL of exactly it signed by the log's DENIAL-signing key) all verify.
 *
 * What a verified answer does not prove: that the server shows every
 * client the same tree (use `consistency` between checkpoints you keep, or
 * witnesses), nor that the decision was right (verify a bundle with
 * `custody verify`; see verifyBundle for what this SDK checks of one).
 */
import { createHash } from "node:crypto";
import { canonicalize } from "./canonical.js";
import { HTTPError, NotWitnessedError, RefusedError, UnverifiedError } from "./errors.js";
import { WitnessEvaluation, WitnessPolicy } from "./witness.js";
import { ApprovalCheck, checkApproval } from "./approval.js";
import { dedupHash, envelopeText, ParsedEnvelope, parseEnvelope, verifyEnvelope } from "./envelope.js";
import { anySignal, decodeBase64Strict, toBase64, toHex } from "./encoding.js";
import { parseLeaf, ReadLeaf } from "./leaf.js";
import { leafHash, verifyConsistency, verifyInclusion } from "./merkle.js";
import { Checkpoint, KeySet, parseVerifierKey } from "./note.js";
import { Denial, Genesis, Principal, Statement } from "./statement.js";
import { Bundle, BundleVerdict, verifyBundle } from "./bundle.js";
import { checkEntry, EventStreamOptions, events, Entry } from "./events.js";

export type { Entry } from "./events.js";
export { checkEntry } from "./events.js";

/** Options of a Client. */
export interface ClientOptions {
  /**
   * The log's checkpoint verifier key (`custody checkpoint --verifier-key`), or its
   * key set after a checkpoint key rotation, one key a line. Get it out of
   * band: every answer is checked against it.
   */
  logKey: string;
  /** Per-request timeout in milliseconds (default 30000). */
  timeoutMs?: number;
  /**
   * How many times an append answered 503 or lost in transport is sent
   * again (default 3; 0 never). Resending is safe: the ledger answers a
   * byte-identical submission with its first decision.
   */
  retries?: number;
  /** Cap on the wait between retries in milliseconds (default 2000), whatever Retry-After says. */
  maxRetryWaitMs?: number;
  /**
   * With several servers: how long (ms) an append keeps trying them,
   * following a not_leader answer's leader or going round the list after a
   * 503 or a transport failure, before it gives up (default 15000, a few
   * lease lifetimes; 0: no more than retries).
   */
  failoverWaitMs?: number;
  /**
   * With several servers: how long (ms) an append waits for a server's
   * answer before it asks the others who sequences the log (default 1000;
   * 0: never). If another server leads, or names another leader, the
   * append is sent there and the stalled request abandoned (a frozen or
   * cut-off leader holds it until its fault ends); otherwise it keeps
   * waiting, asking again every stallWaitMs. So a client moves on within
   * about a lease time plus stallWaitMs.
   */
  stallWaitMs?: number;
  /**
   * A witness policy (its text, or parsed) every accepted pending RECEIPT
   * must stand under: the answer's checkpoint must carry valid cosignatures
   * of its quorum (a server in witness finality mode sends them), or the
   * client waits up to witnessWaitMs (default 10000) for the server's newest
   * witnessed checkpoint to include the entry. Otherwise append rejects
   * with a NotWitnessedError and execute does not run the step.
   */
  witnessPolicy?: string | WitnessPolicy;
  witnessWaitMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

/** The verified answer to an append. */
export interface AppendResult {
  /** held: a pending RECEIPT that an approval rule holds (HTTP 202): durably logged, but not to be run until approved (DESIGN §7). */
  verdict: "accepted" | "denied" | "held";
  /** The statement is in the log (accepted or held). */
  /** The index of the entry: the statement, or the DENIAL of it. */
  index: number;
  accepted: boolean;
  /** Denials: the reason code (the same as the DENIAL's). */
  reason_code?: string;
  reason?: string;
  /** This exact submission was decided before; nothing new was appended. */
  duplicate: boolean;
  notes: string[];
  /** The exact leaf bytes at index. */
  leaf: Uint8Array;
  /** The leaf read: its envelope and statement (for a denial, the DENIAL). */
  entry: ReadLeaf;
  /** The checkpoint the answer is proven under, verified. */
  checkpoint: Checkpoint;
  /** The checkpoint's signed note text. */
  checkpointText: string;
  /** The inclusion proof of leaf at index under checkpoint. */
  proof: Uint8Array[];
  /** With a witness policy, for a pending RECEIPT: who cosigned checkpoint. */
  witnessed?: WitnessEvaluation;
  /** Held: the receipt is logged and waits for approval (advisory fields: the runtime checks approvals itself). */
  held?: boolean;
  expires_at?: string;
  rules?: { grant: string; rule_id: string; approvers: string[]; quorum: number }[];
}

/** The server's (advisory) state of a held receipt, GET /v1/approvals/{id}. */
export interface ApprovalState {
  receipt_id: string;
  index: number;
  state: "held" | "approved" | "rejected" | "expired" | "closed";
  expires_at: string;
  approvals?: { index: number; approval_id: string; actor: string; decision: string }[];
  reason?: string;
}

/** An inclusion proof, verified. */
export interface Inclusion {
  index: number;
  size: number;
  leaf_hash: string;
  root: string;
  proof: string[];
  /** Set when size is the latest checkpoint's; then root is the signed one. */
  checkpoint?: string;
}

/** A consistency proof, verified. */
export interface Consistency {
  from: number;
  to: number;
  from_root: string;
  to_root: string;
  proof: string[];
}

/** What the log binds to a key, and the seq its next statement must carry. */
export interface KeySeq {
  key_id: string;
  next_seq: number;
  bound: boolean;
  name?: string;
  role?: string;
  retired?: boolean;
}

/** The server's description of its log. */
export interface LogInfo {
  origin: string;
  verifier_key: string;
  size: number;
  root: string;
  checkpoint: string;
}

/** The most an append answer may be: a leaf (64 KiB as base64), a checkpoint and a proof. */
const MAX_ANSWER = 256 << 10;
/** The most a JSON document may be (a workflow page). */
const MAX_DOC = 256 << 20;

function hashes(list: unknown, what: string): Uint8Array[] {
  if (!Array.isArray(list)) throw new UnverifiedError(`${what}: not a list of hashes`);
  return list.map((h) => {
    let b: Uint8Array;
    try {
      b = decodeBase64Strict(String(h));
    } catch {
      throw new UnverifiedError(`${what}: ${JSON.stringify(h)} is not base64`);
    }
    if (b.length !== 32) throw new UnverifiedError(`${what}: a hash of ${b.length} bytes`);
    return b;
  });
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Reads an error answer. */
async function httpError(resp: Response): Promise<HTTPError> {
  const text = await resp.text().catch(() => "");
  let code = "", reason = text.trim().slice(0, 1000);
  try {
    const doc = JSON.parse(text) as { reason_code?: unknown; reason?: unknown };
    if (typeof doc.reason_code === "string") code = doc.reason_code;
    if (typeof doc.reason === "string") reason = doc.reason;
  } catch {
    /* not JSON: keep the text */
  }
  let leader = resp.headers.get("custody-leader") ?? "";
  try {
    const doc = JSON.parse(text) as { leader?: unknown };
    if (typeof doc.leader === "string" && doc.leader) leader = doc.leader;
  } catch {
    /* not JSON */
  }
  const ra = Number(resp.headers.get("retry-after") ?? "");
  const he = new HTTPError(resp.status, code, reason, Number.isInteger(ra) && ra >= 0 ? ra * 1000 : 0);
  he.leader = leader;
  return he;
}

/** Reads at most limit bytes of a body. */
async function readBody(resp: Response, limit: number): Promise<Uint8Array> {
  const len = Number(resp.headers.get("content-length") ?? "NaN");
  if (len > limit) {
    await resp.body?.cancel();
    throw new UnverifiedError(`the answer is ${len} bytes, more than ${limit}`);
  }
  const chunks: Uint8Array[] = [];
  let n = 0;
  if (resp.body) {
    for await (const c of resp.body as unknown as AsyncIterable<Uint8Array>) {
      n += c.length;
      if (n > limit) throw new UnverifiedError(`the answer exceeds ${limit} bytes`);
      chunks.push(c);
    }
  }
  return new Uint8Array(Buffer.concat(chunks));
}

/** Splits and checks a comma-separated list of server URLs. */
function parseBases(list: string): string[] {
  return list.split(",").map((raw) => {
    const b = raw.trim();
    let u: URL | undefined;
    try {
      u = new URL(b);
    } catch {
      u = undefined;
    }
    if (!u || (u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw new TypeError(`ledger URL ${JSON.stringify(b)}: want http://host:port or https://host (several: separated by commas)`);
    }
    return b.replace(/\/+$/, "");
  });
}

/**
 * A verified connection to one log. Safe to share between concurrent
 * callers. baseURL may list several servers of one log separated by commas
 * (a log in PostgreSQL served by several `custody serve --store`): appends
 * then go to the one that sequences the log and follow it through a
 * failover, and reads go to any. Every answer is verified the same way
 * whichever server gave it.
 */
/**
 * transportProblem says why a fetch failed, cause included: Node's fetch
 * rejects with just "fetch failed" and keeps the reason (ECONNREFUSED and
 * the address, a DNS failure, a reset) in `cause`, an AggregateError when
 * several addresses were tried.
 */
function transportProblem(e: unknown): string {
  const parts: string[] = [];
  const seen = new Set<unknown>();
  let cur: unknown = e;
  while (cur instanceof Error && !seen.has(cur) && parts.length < 6) {
    seen.add(cur);
    if (cur instanceof AggregateError && cur.errors.length > 0) {
      parts.push([...new Set(cur.errors.map((x) => (x instanceof Error ? x.message : String(x))))].join("; "));
      break;
    }
    if (cur.message && !parts.includes(cur.message)) parts.push(cur.message);
    cur = (cur as Error & { cause?: unknown }).cause;
  }
  if (cur !== undefined && !(cur instanceof Error) && parts.length < 6) parts.push(String(cur));
  return parts.length > 0 ? parts.join(": ") : String(e);
}

export class Client {
  /** The servers, without trailing slashes. */
  readonly servers: readonly string[];
  #cur = 0;
  /** The log's origin (the verifier key's name). */
  readonly origin: string;
  /** The checkpoint key set every answer is checked against. */
  readonly keys: KeySet;
  readonly #opts: Required<Omit<ClientOptions, "logKey" | "witnessPolicy">>;
  /** The witness policy pending receipts must stand under, if any. */
  readonly witnessPolicy?: WitnessPolicy;
  readonly #checkpoints = new Map<string, Checkpoint>();
  /**
   * Keys whose DENIALs are taken without a bundle, by key id: the
   * checkpoint keys (GENESIS's log key is among them, and signs DENIALs
   * until the admin rotates the DENIAL key; the Go client does the same).
   * A DENIAL signed by any other key is proven from its bundle.
   */
  readonly #denialKeys = new Map<string, Uint8Array>();

  constructor(baseURL: string, options: ClientOptions) {
    this.servers = parseBases(baseURL);
    if (!options || typeof options.logKey !== "string") throw new TypeError("Client needs { logKey }: the log's checkpoint verifier key");
    try {
      this.keys = KeySet.parse(options.logKey);
    } catch (e) {
      throw new TypeError(`checkpoint verifier key: ${(e as Error).message}`);
    }
    this.origin = this.keys.origin;
    this.#opts = {
      timeoutMs: options.timeoutMs ?? 30000,
      retries: options.retries ?? 3,
      maxRetryWaitMs: options.maxRetryWaitMs ?? 2000,
      failoverWaitMs: options.failoverWaitMs ?? 15000,
      stallWaitMs: options.stallWaitMs ?? 1000,
      witnessWaitMs: options.witnessWaitMs ?? 10000,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    };
    if (options.witnessPolicy !== undefined) {
      this.witnessPolicy = typeof options.witnessPolicy === "string" ? WitnessPolicy.parse(options.witnessPolicy) : options.witnessPolicy;
    }
    for (const k of this.keys.keys) this.#denialKeys.set(toHex(createHash("sha256").update(k.publicKey).digest()), k.publicKey);
  }

  /** The fetch this client uses (for the event stream). */
  get fetchFn(): typeof fetch {
    return this.#opts.fetch;
  }

  /** The base URL of the server tried first. */
  get url(): string {
    return this.servers[this.#cur % this.servers.length]!;
  }

  /** Moves on from server i after a failure there, unless another request moved on already. */
  #next(i: number): void {
    if (this.#cur === i) this.#cur = (i + 1) % this.servers.length;
  }

  /** Makes the server a not_leader answer named the first tried, if it is one of the client's. */
  #follow(leader: string): boolean {
    const i = this.servers.indexOf(leader.replace(/\/+$/, ""));
    if (i < 0) return false;
    this.#cur = i;
    return true;
  }

  /**
   * Fetches path and returns the body of a 200 answer. With several
   * servers, a transport failure or a 503 moves on to the next one, once
   * round the list, and so does a server that gives no answer in
   * stallWaitMs and does not answer /readyz either (it is frozen or cut
   * off).
   */
  async get(path: string, limit = MAX_DOC, signal?: AbortSignal): Promise<Uint8Array> {
    for (let attempt = 0; ; attempt++) {
      const i = this.#cur % this.servers.length;
      const last = attempt + 1 >= this.servers.length || signal?.aborted === true;
      const timeout = AbortSignal.timeout(this.#opts.timeoutMs);
      const stalled = new AbortController();
      const signals = [timeout, stalled.signal];
      if (signal) signals.push(signal);
      let resp: Response;
      try {
        const sent = this.#opts.fetch(this.servers[i] + path, { signal: anySignal(signals) });
        resp = last || this.#opts.stallWaitMs <= 0 ? await sent : await this.#unlessFrozen(sent, i, stalled);
      } catch (e) {
        if (last) throw new Error(`ledger server: GET ${path}: ${transportProblem(e)}`, { cause: e });
        this.#next(i);
        continue;
      }
      if (resp.status === 503 && !last) {
        await resp.body?.cancel();
        this.#next(i);
        continue;
      }
      if (resp.status !== 200) throw await httpError(resp);
      return readBody(resp, limit);
    }
  }

  async getJSON<T>(path: string, signal?: AbortSignal): Promise<T> {
    const body = await this.get(path, MAX_DOC, signal);
    try {
      return JSON.parse(Buffer.from(body).toString("utf8")) as T;
    } catch (e) {
      throw new UnverifiedError(`${path}: not JSON: ${(e as Error).message}`);
    }
  }

  /**
   * Posts an envelope, retrying 503s and transport failures as
   * options.retries says and, with several servers, following the
   * sequencer through a failover for up to failoverWaitMs. Resending is
   * safe: the ledger answers a byte-identical submission with its first
   * decision, whichever server sequences it.
   */
  async #post(path: string, body: string, signal?: AbortSignal): Promise<Response> {
    const start = Date.now();
    const n = this.servers.length;
    for (let attempt = 0; ; attempt++) {
      const i = this.#cur % n;
      const more = attempt < this.#opts.retries || (n > 1 && this.#opts.failoverWaitMs > 0 && Date.now() - start < this.#opts.failoverWaitMs);
      let wait: number;
      try {
        const timeout = AbortSignal.timeout(this.#opts.timeoutMs);
        const stalled = new AbortController();
        const signals = [timeout, stalled.signal];
        if (signal) signals.push(signal);
        const sent = this.#opts.fetch(this.servers[i] + path, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: anySignal(signals),
        });
        let resp: Response;
        if (n > 1 && this.#opts.stallWaitMs > 0) {
          const got = await this.#watch(sent, i);
          if ("leader" in got) {
            // Another server leads: go there now.
            stalled.abort(new Error(`the sequencer moved to ${got.leader}`));
            sent.then((r) => r.body?.cancel(), () => {});
            this.#follow(got.leader);
            continue;
          }
          resp = got.resp;
        } else {
          resp = await sent;
        }
        if (resp.status !== 503 || !more) return resp;
        const he = await httpError(resp);
        wait = Math.max(he.retryAfterMs, 50 * 2 ** Math.min(attempt, 6));
        if (n > 1) {
          if (he.reasonCode === "not_leader" && he.leader && he.leader.replace(/\/+$/, "") !== this.servers[i] && this.#follow(he.leader)) {
            wait = 0; // the sequencer is named: go there now
          } else {
            this.#next(i);
            wait = Math.min(wait, 200);
          }
        }
      } catch (e) {
        if (signal?.aborted || !more) {
          throw new Error(`ledger server: POST ${path}: ${transportProblem(e)}`, { cause: e });
        }
        this.#next(i);
        wait = Math.min(50 * 2 ** Math.min(attempt, 6), 500);
        if (n > 1 && attempt % n !== n - 1) wait = 0; // try the next server at once, pause after a round
      }
      if (wait > 0) await sleep(Math.min(wait, this.#opts.maxRetryWaitMs), signal);
    }
  }

  /**
   * Waits for a request's answer; every stallWaitMs without one, asks the
   * other servers who sequences the log, and gives up on server i once one
   * of them leads or names another leader of the client's list.
   */
  async #watch(sent: Promise<Response>, i: number): Promise<{ resp: Response } | { leader: string }> {
    let settled: { resp: Response } | undefined;
    let failed = false;
    let why: unknown;
    const res = sent.then(
      (r) => (settled = { resp: r }),
      (e) => {
        failed = true;
        why = e;
        throw e;
      },
    );
    res.catch(() => {});
    for (;;) {
      let t: ReturnType<typeof setTimeout> | undefined;
      const stall = new Promise<undefined>((r) => {
        t = setTimeout(() => r(undefined), this.#opts.stallWaitMs);
      });
      const w = await Promise.race([res, stall]).finally(() => clearTimeout(t));
      if (w) return w;
      const leader = await this.#leaderElsewhere(i);
      if (settled) return settled;
      if (failed) throw why;
      if (leader) return { leader };
    }
  }

  /**
   * Waits for a read's answer; every stallWaitMs without one, asks server
   * i's /readyz, and aborts the read (throwing) if that gets no answer in
   * stallWaitMs either. A slow read on a live server is left alone.
   */
  async #unlessFrozen(sent: Promise<Response>, i: number, stalled: AbortController): Promise<Response> {
    let settled: Response | undefined;
    const res = sent.then((r) => (settled = r));
    res.catch(() => {});
    for (;;) {
      let t: ReturnType<typeof setTimeout> | undefined;
      const stall = new Promise<undefined>((r) => {
        t = setTimeout(() => r(undefined), this.#opts.stallWaitMs);
      });
      const w = await Promise.race([res, stall]).finally(() => clearTimeout(t));
      if (w) return w;
      let alive = false;
      try {
        const r = await this.#opts.fetch(this.servers[i] + "/readyz", { signal: AbortSignal.timeout(this.#opts.stallWaitMs) });
        await r.body?.cancel();
        alive = true;
      } catch {
        alive = false;
      }
      if (settled) return settled;
      if (!alive) {
        stalled.abort(new Error(`${this.servers[i]} gives no answer (frozen or cut off)`));
        sent.then((r) => r.body?.cancel(), () => {});
        throw new Error(`${this.servers[i]} gives no answer`);
      }
    }
  }

  /** Asks every server but i (at once, each for at most stallWaitMs) who leads; a leader of the list other than server i, or "". */
  async #leaderElsewhere(i: number): Promise<string> {
    const me = this.servers[i];
    const asks = this.servers.map(async (b, j) => {
      if (j === i) return "";
      try {
        const r = await this.#opts.fetch(b + "/readyz", { signal: AbortSignal.timeout(this.#opts.stallWaitMs) });
        const text = await r.text();
        let leader = "";
        for (const line of text.split("\n")) {
          if (line === "role leader") leader = b;
          else if (!leader && line.startsWith("leader ") && line.includes("://")) leader = line.slice(7).trim().replace(/\/+$/, "");
        }
        return leader;
      } catch {
        return "";
      }
    });
    return new Promise((resolve) => {
      let left = asks.length;
      for (const a of asks) {
        a.then((l) => {
          if (l && l !== me && this.servers.includes(l)) resolve(l);
          if (--left === 0) resolve("");
        });
      }
    });
  }

  /** openCheckpoint verifies a signed checkpoint by the log's keys and returns its content (throws UnverifiedError). */
  openCheckpoint(text: string): Checkpoint {
    const hit = this.#checkpoints.get(text);
    if (hit) return hit;
    let cp: Checkpoint;
    try {
      cp = this.keys.openCheckpoint(text);
    } catch (e) {
      throw new UnverifiedError(`checkpoint: ${(e as Error).message}`);
    }
    if (this.#checkpoints.size >= 64) this.#checkpoints.clear();
    this.#checkpoints.set(text, cp);
    return cp;
  }

  /**
   * append submits one signed envelope (its JSON text, as signStatement
   * returns it) and resolves to the verified answer once the decision is
   * durable under a signed checkpoint: verdict "accepted" (the statement is
   * in the log at index) or "denied" (a DENIAL of it is, with reason_code).
   *
   * It rejects with a RefusedError when the ledger refused it without
   * logging anything, an UnverifiedError when the answer does not verify
   * (never trust such a server), and an HTTPError or a transport error when
   * no decision came. Only a resolved promise is a decision.
   */
  async append(envelope: string, signal?: AbortSignal): Promise<AppendResult> {
    let own: ParsedEnvelope | undefined;
    let ownError: unknown;
    try {
      own = parseEnvelope(envelope);
    } catch (e) {
      ownError = e;
    }
    const resp = await this.#post("/v1/entries", envelope, signal);
    if (resp.status === 400 || resp.status === 413 || resp.status === 429) {
      const he = await httpError(resp);
      throw new RefusedError(he.status, he.reasonCode, he.reason);
    }
    if (resp.status !== 200 && resp.status !== 202 && resp.status !== 403) throw await httpError(resp);
    const body = await readBody(resp, MAX_ANSWER);
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(Buffer.from(body).toString("utf8"));
    } catch (e) {
      throw new UnverifiedError(`the answer is not an append response: ${(e as Error).message}`);
    }
    if (!own) {
      throw new UnverifiedError(`the server logged a decision for an envelope that does not parse (${(ownError as Error).message})`);
    }
    const r = await this.#verifyAnswer(doc, own, resp.status, signal);
    if (r.accepted && this.witnessPolicy && own.kind === "RECEIPT" && (r.entry.statement as { result?: string }).result === "pending") {
      await this.#requireWitnessed(r, signal);
    }
    return r;
  }

  /**
   * Makes sure an accepted pending RECEIPT stands under a checkpoint that
   * meets the witness policy: the answer's own, or the server's newest
   * witnessed checkpoint (GET /v1/checkpoint/witnessed?size=&wait=, which
   * the server holds until the quorum is met), waited for up to
   * witnessWaitMs, with the leaf's inclusion proof under it. Every piece is
   * checked: the log's signature, the cosignatures, the proof.
   */
  async #requireWitnessed(r: AppendResult, signal?: AbortSignal): Promise<void> {
    const p = this.witnessPolicy!;
    const own = p.evaluate(r.checkpointText);
    if (own.satisfied) {
      r.witnessed = own;
      return;
    }
    const deadline = Date.now() + this.#opts.witnessWaitMs;
    let wait = 20;
    let last = "";
    for (;;) {
      try {
        // The server waits (up to waitMs) until a checkpoint that includes
        // the entry meets its quorum, and answers the moment one does; a
        // server that answers at once is asked again with backoff.
        const waitMs = Math.max(0, Math.min(deadline - Date.now(), this.#opts.timeoutMs - 1000));
        const path = `/v1/checkpoint/witnessed?size=${r.index + 1}&wait=${waitMs}`;
        const text = Buffer.from(await this.get(path, 64 << 10, signal)).toString("utf8");
        const cp = this.openCheckpoint(text);
        const ev = p.evaluate(text);
        // A witnessed checkpoint that does not meet this client's policy is
        // not a lie (the server's policy may differ): keep waiting.
        if (!ev.satisfied) {
          last = `the server's newest witnessed checkpoint does not meet the policy (${ev.quorum}): missing ${ev.missing.join(", ")}${ev.invalid.length ? `, invalid ${ev.invalid.join(", ")}` : ""}`;
        } else if (cp.size > r.index) {
          const inc = await this.getJSON<Inclusion>(`/v1/proof/inclusion?index=${r.index}&size=${cp.size}`, signal);
          const proof = hashes(inc.proof, "inclusion proof");
          try {
            verifyInclusion(r.index, cp.size, leafHash(r.leaf), proof, cp.root);
          } catch (e) {
            throw new UnverifiedError(`inclusion under the witnessed checkpoint: ${(e as Error).message}`);
          }
          Object.assign(r, { checkpoint: cp, checkpointText: text, proof, witnessed: ev });
          return;
        } else {
          last = `the newest witnessed checkpoint has ${cp.size} entries`;
        }
      } catch (e) {
        if (e instanceof UnverifiedError) throw e;
        last = (e as Error).message;
      }
      if (Date.now() + wait > deadline) {
        throw new NotWitnessedError(`entry ${r.index} is logged, but no checkpoint that includes it met the witness quorum (${p}) within ${this.#opts.witnessWaitMs} ms: ${last}`);
      }
      await sleep(wait, signal);
      wait = Math.min(2 * wait, 500);
    }
  }

  /** Checks an append answer (see append). */
  async #verifyAnswer(doc: Record<string, unknown>, own: ParsedEnvelope, status: number, signal?: AbortSignal): Promise<AppendResult> {
    const verdict = doc.verdict;
    if (!((verdict === "accepted" && status === 200) || (verdict === "held" && status === 202) || (verdict === "denied" && status === 403))) {
      throw new UnverifiedError(`verdict ${JSON.stringify(verdict)} with HTTP ${status}`);
    }
    if (typeof doc.checkpoint !== "string") throw new UnverifiedError("the answer has no checkpoint");
    const cp = this.openCheckpoint(doc.checkpoint);
    const index = doc.index;
    if (typeof index !== "number" || !Number.isSafeInteger(index) || index < 0) throw new UnverifiedError(`index ${JSON.stringify(index)}`);
    if (index >= cp.size) throw new UnverifiedError(`index ${index} is not under the checkpoint of size ${cp.size}`);
    const proof = hashes(doc.inclusion_proof ?? [], "inclusion proof");
    let leaf: Uint8Array;
    try {
      leaf = decodeBase64Strict(String(doc.leaf));
    } catch {
      throw new UnverifiedError("the leaf is not base64");
    }
    try {
      verifyInclusion(index, cp.size, leafHash(leaf), proof, cp.root);
    } catch (e) {
      throw new UnverifiedError((e as Error).message);
    }
    let entry: ReadLeaf;
    try {
      entry = parseLeaf(leaf);
    } catch (e) {
      throw new UnverifiedError(`leaf ${index}: ${(e as Error).message}`);
    }
    const result: AppendResult = {
      verdict, index, accepted: verdict === "accepted" || verdict === "held", duplicate: doc.duplicate === true,
      notes: Array.isArray(doc.notes) ? doc.notes.map(String) : [], leaf, entry, checkpoint: cp, checkpointText: doc.checkpoint, proof,
    };
    if (verdict === "accepted" || verdict === "held") {
      if (dedupHash(entry.envelope) !== dedupHash(own)) throw new UnverifiedError(`leaf ${index} holds another envelope than the one submitted`);
      if (verdict === "held") {
        const st = entry.statement as { type: string; result?: string };
        if (st.type !== "RECEIPT" || st.result !== "pending") throw new UnverifiedError(`a ${st.type} answered held; only a pending RECEIPT is held`);
        result.held = true;
        if (typeof doc.expires_at === "string") result.expires_at = doc.expires_at;
        if (Array.isArray(doc.rules)) result.rules = doc.rules as AppendResult["rules"];
      }
      return result;
    }
    // A denial: the leaf is a DENIAL, signed by the log's DENIAL key, of
    // exactly this submission, with the code the answer gives.
    if (doc.denial_index !== index) throw new UnverifiedError("a denial without its denial_index");
    if (entry.envelope.kind !== "DENIAL") throw new UnverifiedError(`leaf ${index} is a ${entry.envelope.kind}, not a DENIAL`);
    const signer = this.#denialKeys.get(entry.envelope.keyId);
    if (!signer || !verifyEnvelope(entry.envelope, signer)) {
      // After a DENIAL key rotation, DENIALs are signed by a key the trust
      // chain names, not a checkpoint key: prove it from the DENIAL's bundle.
      await this.#proveDenialKey(index, leaf, signal);
    }
    const d = entry.statement as Denial;
    const sum = createHash("sha256").update(canonicalize(own.envelope)).digest("hex");
    if (d.envelope_sha256 !== sum) throw new UnverifiedError(`DENIAL ${index} names another submission`);
    if (d.reason_code !== doc.reason_code || d.reason !== doc.reason) {
      throw new UnverifiedError(`DENIAL ${index} says ${d.reason_code}, the answer ${String(doc.reason_code)}`);
    }
    result.reason_code = d.reason_code;
    result.reason = d.reason;
    return result;
  }

  /** head fetches and verifies the latest checkpoint. */
  async head(signal?: AbortSignal): Promise<{ checkpoint: Checkpoint; text: string }> {
    const text = Buffer.from(await this.get("/checkpoint", 64 << 10, signal)).toString("utf8");
    return { checkpoint: this.openCheckpoint(text), text };
  }

  /** log fetches the server's description of its log and checks it is the log this client verifies against. */
  async log(signal?: AbortSignal): Promise<LogInfo> {
    const out = await this.getJSON<LogInfo>("/v1/log", signal);
    let ok = out.origin === this.origin;
    try {
      ok &&= KeySet.parse(out.verifier_key).current().some((k) => this.keys.contains(k));
    } catch {
      ok = false;
    }
    if (!ok) throw new UnverifiedError(`the server serves log ${out.origin} (key ${out.verifier_key}), not ${this.keys.toString()}`);
    return out;
  }

  /**
   * entry fetches the entry at index and reads its leaf (whose hash is
   * recomputed). Its inclusion is not checked: use inclusion or a bundle.
   */
  async entry(index: number, signal?: AbortSignal): Promise<Entry> {
    const e = await this.getJSON<Entry>(`/v1/entries/${index}`, signal);
    if (e.index !== index) throw new UnverifiedError(`asked for entry ${index}, got ${e.index}`);
    return checkEntry(e);
  }

  /** statement fetches the entry of a statement (or DENIAL) id. */
  async statement(id: string, signal?: AbortSignal): Promise<Entry> {
    return checkEntry(await this.getJSON<Entry>(`/v1/statements/${encodeURIComponent(id)}`, signal));
  }

  /**
   * inclusion fetches an inclusion proof of index in the tree of size
   * (omitted: the latest) and verifies it; for the latest size, against
   * the signed checkpoint. For an older size the root is only as good as a
   * consistency proof to a checkpoint makes it.
   */
  async inclusion(index: number, size?: number, signal?: AbortSignal): Promise<Inclusion> {
    const out = await this.getJSON<Inclusion>(`/v1/proof/inclusion?index=${index}${size ? `&size=${size}` : ""}`, signal);
    const proof = hashes(out.proof, "inclusion proof");
    const [lh, root] = hashes([out.leaf_hash, out.root], "inclusion proof");
    if (out.index !== index || (size && out.size !== size)) throw new UnverifiedError(`asked for ${index} in ${size ?? "the latest"}, got ${out.index} in ${out.size}`);
    if (out.checkpoint) {
      const cp = this.openCheckpoint(out.checkpoint);
      if (cp.size !== out.size || toBase64(cp.root) !== toBase64(root!)) throw new UnverifiedError("the proof's root is not the checkpoint's");
    }
    try {
      verifyInclusion(out.index, out.size, lh!, proof, root!);
    } catch (e) {
      throw new UnverifiedError((e as Error).message);
    }
    return out;
  }

  /**
   * consistency fetches a consistency proof between two tree sizes (to
   * omitted: the latest) and verifies it against the roots the server
   * gives. To bind it to checkpoints you hold, use proveConsistency.
   */
  async consistency(from: number, to?: number, signal?: AbortSignal): Promise<Consistency> {
    const out = await this.getJSON<Consistency>(`/v1/proof/consistency?from=${from}${to ? `&to=${to}` : ""}`, signal);
    if (out.from !== from || (to && out.to !== to)) throw new UnverifiedError(`asked for ${from}..${to ?? "latest"}, got ${out.from}..${out.to}`);
    const proof = hashes(out.proof, "consistency proof");
    const [r1, r2] = hashes([out.from_root, out.to_root], "consistency proof");
    try {
      verifyConsistency(out.from, out.to, proof, r1!, r2!);
    } catch (e) {
      throw new UnverifiedError((e as Error).message);
    }
    return out;
  }

  /**
   * proveConsistency checks that the log grew from one signed checkpoint to
   * another by appending only: both are verified against the log's keys,
   * and the server's consistency proof must lead from the older root to
   * the newer one (the roots are the checkpoints', not the server's word).
   * newer defaults to the latest checkpoint. It resolves to the newer
   * checkpoint, to be kept for the next check; a server that rewrote
   * history, or shows this client a fork, fails it with an UnverifiedError.
   */
  async proveConsistency(older: string | Checkpoint, newer?: string | Checkpoint, signal?: AbortSignal): Promise<Checkpoint> {
    const a = typeof older === "string" ? this.openCheckpoint(older) : older;
    const b = newer === undefined ? (await this.head(signal)).checkpoint : typeof newer === "string" ? this.openCheckpoint(newer) : newer;
    if (b.size < a.size) throw new UnverifiedError(`the newer checkpoint (size ${b.size}) is smaller than the older (size ${a.size}): a log never shrinks`);
    let proof: Uint8Array[] = [];
    if (a.size > 0 && b.size > a.size) {
      const out = await this.getJSON<Consistency>(`/v1/proof/consistency?from=${a.size}&to=${b.size}`, signal);
      proof = hashes(out.proof, "consistency proof");
    }
    try {
      verifyConsistency(a.size, b.size, proof, a.root, b.root);
    } catch (e) {
      throw new UnverifiedError(`checkpoints of size ${a.size} and ${b.size}: ${(e as Error).message}`);
    }
    return b;
  }

  /** bundle fetches the custody-bundle/v1 of a statement id (wholeWorkflow: up to the workflow's latest entry). Not verified: see verifyBundle. */
  async bundle(id: string, wholeWorkflow = false, signal?: AbortSignal): Promise<Bundle> {
    return this.getJSON<Bundle>(`/v1/bundle/${encodeURIComponent(id)}${wholeWorkflow ? "?workflow=1" : ""}`, signal);
  }

  /**
   * approvalState asks the server for a held receipt's state (GET
   * /v1/approvals/{id}), waiting up to waitMs (at most 60000, and below the
   * request timeout) for it to leave "held". Advisory only: never run a
   * step on this answer; checkApproval decides from a verified bundle.
   */
  async approvalState(receiptId: string, waitMs = 0, signal?: AbortSignal): Promise<ApprovalState> {
    const w = Math.floor(Math.max(0, Math.min(waitMs, 60000, this.#opts.timeoutMs - 1000)));
    return this.getJSON<ApprovalState>(`/v1/approvals/${encodeURIComponent(receiptId)}${w > 0 ? `?wait=${w}` : ""}`, signal);
  }

  /**
   * checkApproval fetches the workflow bundle of subject (default the
   * receipt; give the newest APPROVAL's id so that the bundle's trust chain
   * binds every approver's key), verifies it against the log's keys and
   * decides the held receipt's state itself (see the function
   * checkApproval). A bundle that does not verify is an UnverifiedError.
   */
  async checkApproval(receiptId: string, subject = receiptId, stepId?: string, signal?: AbortSignal): Promise<ApprovalCheck> {
    const b = await this.bundle(subject, true, signal);
    try {
      return checkApproval(b, this.keys.toString(), receiptId, stepId);
    } catch (e) {
      throw new UnverifiedError(`the approvals of ${receiptId}: ${(e as Error).message}`);
    }
  }

  /** bundleAt is bundle for the entry at index. */
  async bundleAt(index: number, wholeWorkflow = false, signal?: AbortSignal): Promise<Bundle> {
    return this.getJSON<Bundle>(`/v1/bundle?index=${index}${wholeWorkflow ? "&workflow=1" : ""}`, signal);
  }

  /** tlogProof fetches the C2SP tlog-proof text of the entry at index. */
  async tlogProof(index: number, signal?: AbortSignal): Promise<string> {
    return Buffer.from(await this.get(`/v1/bundle?format=tlog-proof&index=${index}`, 1 << 20, signal)).toString("utf8");
  }

  /**
   * verifyBundle fetches the bundle of a statement id and verifies it
   * against the log's keys (see the function verifyBundle for what that
   * covers). A bundle that fails is an UnverifiedError.
   */
  async verifyBundle(id: string, wholeWorkflow = false, signal?: AbortSignal): Promise<BundleVerdict> {
    const v = verifyBundle(await this.bundle(id, wholeWorkflow, signal), this.keys.toString());
    if (!v.valid) throw new UnverifiedError(`bundle of ${id}: ${v.failure}`);
    return v;
  }

  /** workflow fetches a workflow's entries in log order after index after (0: all), following pages. */
  async workflow(id: string, after = 0, signal?: AbortSignal): Promise<Entry[]> {
    const all: Entry[] = [];
    for (let page = 0; page < 1_000_000; page++) {
      const w = await this.getJSON<{ entries: Entry[]; more?: boolean }>(`/v1/workflows/${encodeURIComponent(id)}?after=${after}`, signal);
      for (const e of w.entries ?? []) {
        if (e.index <= after) throw new UnverifiedError(`workflow ${id}: entries out of order`);
        checkEntry(e);
        after = e.index;
        all.push(e);
      }
      if (!w.more || (w.entries ?? []).length === 0) return all;
    }
    throw new Error(`workflow ${id}: too many pages`);
  }

  /** keySeq fetches what the log binds to a key id and the seq its next statement must carry. */
  async keySeq(keyId: string, signal?: AbortSignal): Promise<KeySeq> {
    const out = await this.getJSON<KeySeq>(`/v1/keys/${encodeURIComponent(keyId)}/seq`, signal);
    if (out.key_id !== keyId || !Number.isSafeInteger(out.next_seq) || out.next_seq < 1) throw new UnverifiedError(`key ${keyId}: malformed answer`);
    return out;
  }

  /**
   * events follows a workflow's entries after index after, in log order,
   * reconnecting with the last index seen when the stream drops (so it
   * misses nothing and repeats nothing), until signal aborts or the caller
   * stops iterating. See EventStreamOptions.
   */
  events(workflow: string, options: EventStreamOptions = {}): AsyncIterable<Entry> {
    return events(this, workflow, options);
  }

  /**
   * Proves the key of a DENIAL at index that no checkpoint key signed: its
   * bundle (fetched from the server, verified offline against the
   * checkpoint keys) carries the trust chain, and verifyBundle requires the
   * DENIAL to be signed by the DENIAL key in force at its index (GENESIS's
   * log key, or the one the latest admin PRINCIPAL of op log_key names).
   * The bundle must prove exactly the answer's leaf. Nothing is cached: a
   * later rotation would retire the key.
   */
  async #proveDenialKey(index: number, leaf: Uint8Array, signal?: AbortSignal): Promise<void> {
    let b: Bundle;
    try {
      b = await this.bundleAt(index, false, signal);
    } catch (e) {
      throw new UnverifiedError(`DENIAL ${index} is not signed by a checkpoint key, and its bundle could not be fetched to prove its key: ${(e as Error).message}`);
    }
    const v = verifyBundle(b, this.keys.toString());
    if (!v.valid) throw new UnverifiedError(`DENIAL ${index} is not signed by a checkpoint key, and its bundle does not verify: ${v.failure}`);
    if (b.subject !== index) throw new UnverifiedError(`DENIAL ${index}: its bundle proves entry ${b.subject}`);
    const e = b.entries.find((x) => x.index === index);
    if (!e || e.leaf !== toBase64(leaf)) throw new UnverifiedError(`DENIAL ${index}: its bundle holds another leaf at ${index}`);
  }

  /** The keys this client accepts on a DENIAL, by key id. */
  denialKeyIds(): string[] {
    return [...this.#denialKeys.keys()];
  }
}


export type { Genesis, Principal, Statement };
export { parseVerifierKey };
export { envelopeText };
