/**
 * Leaves (DESIGN §5): what the tree hashes, the canonical JSON
 * `{"envelope":{...},"logged_at":"...","prev_in_workflow":N,"trust_head":M}`.
 */
import { parseCanonical } from "./canonical.js";
import { Envelope, ParsedEnvelope, parseEnvelope } from "./envelope.js";
import { parseStatement, Statement } from "./statement.js";

/** The largest leaf: tlog-tiles prefixes entries with a uint16 length. */
export const MAX_LEAF_SIZE = 65535;

export interface Leaf {
  envelope: Envelope;
  /** The ledger's acceptance time, RFC 3339 UTC, fractional seconds without trailing zeros. */
  logged_at: string;
  /** The previous leaf of the same workflow (or trust chain); absent for the first. */
  prev_in_workflow?: number;
  /** The latest GENESIS/PRINCIPAL leaf when this one was sequenced. */
  trust_head: number;
}

/** A leaf read whole: the leaf, its envelope and the statement inside (not yet checked against any key). */
export interface ReadLeaf {
  leaf: Leaf;
  envelope: ParsedEnvelope;
  statement: Statement;
}

const LOGGED_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d*[1-9])?Z$/;

/**
 * parseLeaf reads leaf bytes: at most 65,535 bytes, canonical JSON, closed
 * schema, a well-formed envelope whose payload is a valid statement of the
 * kind its payloadType names.
 */
export function parseLeaf(bytes: Uint8Array): ReadLeaf {
  if (bytes.length > MAX_LEAF_SIZE) throw new Error(`leaf of ${bytes.length} bytes exceeds the ${MAX_LEAF_SIZE}-byte limit`);
  const v = parseCanonical(bytes, "leaf") as Record<string, unknown>;
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("leaf: not a JSON object");
  for (const k of Object.keys(v)) {
    if (!["envelope", "logged_at", "prev_in_workflow", "trust_head"].includes(k)) throw new Error(`leaf: unknown field ${JSON.stringify(k)}`);
  }
  if (typeof v.logged_at !== "string" || !LOGGED_AT.test(v.logged_at)) throw new Error(`leaf: logged_at ${JSON.stringify(v.logged_at)} is not RFC 3339 UTC without trailing zeros`);
  if (typeof v.trust_head !== "number" || v.trust_head < 0) throw new Error("leaf: trust_head is not an index");
  if (v.prev_in_workflow !== undefined && (typeof v.prev_in_workflow !== "number" || v.prev_in_workflow < 0)) throw new Error("leaf: prev_in_workflow is not an index");
  const envelope = parseEnvelope(v.envelope as Envelope);
  const statement = parseStatement(envelope.kind, envelope.payload);
  return { leaf: v as unknown as Leaf, envelope, statement };
}
