/**
 * The event stream of a workflow (GET /v1/workflows/{id}/events): a
 * text/event-stream whose events are entries, each with `id:` its index.
 * events() follows it and reconnects when it drops, resuming with
 * Last-Event-ID = the last index it yielded, so the caller sees every entry
 * once, in log order, across reconnections and server restarts.
 */
import { decodeBase64Strict, toBase64 } from "./encoding.js";
import { HTTPError, UnverifiedError } from "./errors.js";
import { parseLeaf, ReadLeaf } from "./leaf.js";
import { leafHash } from "./merkle.js";

/**
 * What events() needs of a Client: its servers, the one it talks to now,
 * and its fetch. A Client is one; this module does not import client.ts,
 * which imports it.
 */
export interface StreamSource {
  readonly servers: readonly string[];
  readonly url: string;
  readonly fetchFn: typeof fetch;
}

/** One leaf of the log as the read API serves it; `read` is what the SDK read from the leaf itself. */
export interface Entry {
  index: number;
  logged_at: string;
  kind: string;
  id: string;
  actor: string;
  key_id: string;
  seq: number;
  workflow_id?: string;
  prev_in_workflow?: number;
  trust_head: number;
  /** Standard base64 of the leaf hash. */
  leaf_hash: string;
  /** Standard base64 of the exact leaf bytes. */
  leaf: string;
  statement: unknown;
  /** The leaf read and checked by the SDK: trust this rather than the decoded fields beside it. */
  read?: ReadLeaf;
}

export interface EventStreamOptions {
  /** Start after this index (default 0: from the workflow's first entry). */
  after?: number;
  /** Ends the stream. */
  signal?: AbortSignal;
  /** A stream silent this long (ms) is taken for dead and reconnected (default 45000; the server sends a comment every 15 s). */
  idleTimeoutMs?: number;
  /** The longest wait between reconnections (ms, default 2000). */
  maxBackoffMs?: number;
  /** Called after each successful (re)connection, with the index the stream resumes after. */
  onConnect?: (after: number) => void;
  /** Called when a connection drops, with why; the stream then reconnects. */
  onDisconnect?: (err: unknown) => void;
  /**
   * The Custody-Stream-Step header for each (re)connection (a runtime's
   * proof that it executes a step of the workflow: the server then counts
   * the stream in capacity kept for steps, not against the per-address
   * caps). Undefined: sent without. A server that refuses it (403) is
   * asked again without it.
   */
  stepProof?: () => string | undefined;
}

function wait(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** events is Client.events. */
export async function* events(client: StreamSource, workflow: string, opts: EventStreamOptions = {}): AsyncGenerator<Entry> {
  let after = opts.after ?? 0;
  const idleMs = opts.idleTimeoutMs ?? 45000;
  const maxBackoff = opts.maxBackoffMs ?? 2000;
  let backoff = 50;
  const path = `/v1/workflows/${encodeURIComponent(workflow)}/events`;
  // With several servers (one log in PostgreSQL), any of them serves the
  // stream: after a drop, the next one is tried.
  let si = Math.max(0, client.servers.indexOf(client.url));
  let proofRefused = false;
  while (!opts.signal?.aborted) {
    const url = client.servers[si % client.servers.length] + path;
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(opts.signal!.reason);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const resetIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => ctrl.abort(new Error(`event stream silent for ${idleMs} ms`)), idleMs);
    };
    try {
      resetIdle();
      const headers: Record<string, string> = { accept: "text/event-stream", "last-event-id": String(after) };
      const proof = proofRefused ? undefined : opts.stepProof?.();
      if (proof) headers["custody-stream-step"] = proof;
      const resp = await client.fetchFn(url, { headers, signal: ctrl.signal });
      if (resp.status !== 200 || !resp.body) {
        await resp.body?.cancel();
        if (proof && resp.status === 403) proofRefused = true;
        throw new HTTPError(resp.status, "", `events of ${workflow}`);
      }
      opts.onConnect?.(after);
      backoff = 50;
      const decoder = new TextDecoder("utf-8");
      let buf = "";
      let id = "", event = "", data: string[] | null = null;
      for await (const chunk of resp.body as unknown as AsyncIterable<Uint8Array>) {
        resetIdle();
        buf += decoder.decode(chunk, { stream: true });
        if (buf.length > 4 << 20) throw new UnverifiedError("event stream: an event over 4 MiB");
        let nl: number;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
          if (line === "") {
            if (data !== null && (event === "" || event === "entry")) {
              let e: Entry;
              try {
                e = JSON.parse(data.join("\n")) as Entry;
              } catch (err) {
                throw new UnverifiedError(`event stream: ${(err as Error).message}`);
              }
              if (id !== String(e.index) || !(e.index > after)) {
                throw new UnverifiedError(`event stream: entry ${e.index} (id ${JSON.stringify(id)}) after ${after}`);
              }
              checkEntry(e);
              after = e.index;
              yield e;
            }
            id = event = "";
            data = null;
            continue;
          }
          if (line.startsWith(":")) continue; // a comment: keep-alive
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "id") id = value;
          else if (field === "event") event = value;
          else if (field === "data") (data ??= []).push(value);
        }
      }
      throw new Error("event stream: the server ended it");
    } catch (err) {
      if (opts.signal?.aborted) return;
      opts.onDisconnect?.(err);
      si++;
    } finally {
      clearTimeout(idle);
      opts.signal?.removeEventListener("abort", onAbort);
      ctrl.abort();
    }
    await wait(backoff, opts.signal);
    backoff = Math.min(2 * backoff, maxBackoff);
  }
}

/**
 * checkEntry checks an entry's leaf_hash against its leaf, reads the leaf,
 * and replaces the server's decoded fields (kind, id, statement) by what
 * the leaf says, so nothing but the leaf is trusted.
 */
export function checkEntry(e: Entry): Entry {
  let leaf: Uint8Array;
  try {
    leaf = decodeBase64Strict(String(e.leaf));
  } catch {
    throw new UnverifiedError(`entry ${e.index}: the leaf is not base64`);
  }
  if (toBase64(leafHash(leaf)) !== e.leaf_hash) throw new UnverifiedError(`entry ${e.index}: leaf_hash is not the hash of its leaf`);
  let read: ReadLeaf;
  try {
    read = parseLeaf(leaf);
  } catch (err) {
    throw new UnverifiedError(`entry ${e.index}: ${(err as Error).message}`);
  }
  if (read.envelope.kind !== e.kind) throw new UnverifiedError(`entry ${e.index}: kind ${e.kind}, the leaf holds a ${read.envelope.kind}`);
  e.read = read;
  return e;
}
