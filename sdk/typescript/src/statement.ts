/**
 * Statements (DESIGN §2): the nine kinds as plain objects whose fields are
 * the wire names, their closed schemas and field rules (the Go package
 * statement's), sealing (a grant's scope_hash) and signing.
 *
 * A statement here is exactly the JSON that gets signed: build it as an
 * object literal, `seal` it if it is a CONFIRM or DELEGATE, and
 * `signStatement` it. Runtime fills the header (timestamp, log, actor, seq)
 * for you.
 */
import { canonicalize, checkProfile, parseCanonical } from "./canonical.js";
import { CustodyFormatError, CustodyKeyError } from "./errors.js";
import { Envelope, envelopeText, Kind, KINDS, signEnvelope } from "./envelope.js";
import { PrivateKey, parsePublicKey } from "./keys.js";
import { parseVerifierKey } from "./note.js";
import { ApprovalRule, checkIdentifier, checkLimits, deriveDescriptor, identifierProblem, parseTime, Scope, ScopeDescriptor, scopeHash } from "./scope.js";
import { isLowerHex64, utf8 } from "./encoding.js";
import { parsePasskey } from "./passkey.js";

/** Fields every statement carries. */
export interface Header {
  type: Kind;
  /** RFC 3339 UTC, whole seconds: 2026-03-19T08:12:00Z. */
  timestamp: string;
  /** The log's origin. */
  log: string;
  /** The signing key's bound name. */
  actor: string;
  /** Per signing key, from 1. */
  seq: number;
}

export interface Genesis extends Header {
  type: "GENESIS";
  genesis_id: string;
  admin_key: string;
  log_key: string;
  max_depth?: number;
  clock_skew_seconds?: number;
  max_ttl_seconds?: number;
}

export interface Principal extends Header {
  type: "PRINCIPAL";
  principal_id: string;
  /** log_key: the admin names a new DENIAL-signing key (name = the log's origin). */
  op: "enroll" | "add_key" | "retire" | "log_key";
  name: string;
  /** Standard base64 of the raw Ed25519 key, or of a passkey's SPKI DER. */
  public_key: string;
  /** A passkey (DESIGN §1): absent for an Ed25519 key. */
  key_type?: "webauthn-es256" | "webauthn-ed25519";
  credential_id?: string;
  rp_id?: string;
  origins?: string[];
  /** What the passkey may sign (default APPROVAL, RESUME, STOP). */
  allowed_types?: string[];
}

/** PASSKEY_KINDS may be listed in allowed_types; DEFAULT_ALLOWED_TYPES apply when it is absent. */
export const PASSKEY_KINDS = ["APPROVAL", "CONFIRM", "RESUME", "REVOKE", "STOP"];
export const DEFAULT_ALLOWED_TYPES = ["APPROVAL", "RESUME", "STOP"];

export interface Grantee {
  name: string;
  public_key: string;
}

/** What CONFIRM and DELEGATE share. */
export interface GrantFields {
  grantee: Grantee;
  scope: Scope;
  limits?: Record<string, number>;
  ttl_seconds: number;
  revocable: boolean;
  scope_hash: string;
  /** Approval rules (DESIGN §7), sorted by rule_id. */
  approvals?: ApprovalRule[];
}

export interface Confirm extends Header, GrantFields {
  type: "CONFIRM";
  confirm_id: string;
  risk_level?: "low" | "medium" | "high";
}

export interface Delegate extends Header, GrantFields {
  type: "DELEGATE";
  delegation_id: string;
  parent_ref: string;
  parent_scope_hash: string;
}

export interface Revoke extends Header {
  type: "REVOKE";
  revoke_id: string;
  workflow_id: string;
  target_ref: string;
  reason: string;
}

export type ReceiptResult = "pending" | "success" | "failure" | "partial";

export interface Receipt extends Header {
  type: "RECEIPT";
  receipt_id: string;
  workflow_id: string;
  step_id: string;
  action: string;
  target: string;
  authorization_ref: string;
  result: ReceiptResult;
  scope_hash: string;
  /** Pending only. */
  reserve?: Record<string, number>;
  /** Pending only: lowercase hex SHA-256 of the JCS of the exact call. */
  params_sha256?: string;
  /** Outcome only. */
  consumed?: Record<string, number>;
  /** Outcome only: the pending receipt's id. */
  pending_ref?: string;
  side_effects?: Record<string, string>;
  evidence_refs?: string[];
  /** Outcome only. */
  error?: string;
}

export interface Stop extends Header {
  type: "STOP";
  request_id: string;
  workflow_id: string;
  stop_scope: "step" | "chain";
  step_id?: string;
  takeover_mode: "human" | "pause" | "delegate_to_other_agent";
  takeover_to?: string;
  reason: string;
}

export interface Resume extends Header {
  type: "RESUME";
  resume_id: string;
  workflow_id: string;
  stop_ref: string;
}

export interface Approval extends Header {
  type: "APPROVAL";
  approval_id: string;
  workflow_id: string;
  receipt_ref: string;
  /** Lowercase hex SHA-256 of the held receipt envelope's payload bytes. */
  receipt_sha256: string;
  decision: "approve" | "reject";
  reason?: string;
}

export interface Denial extends Header {
  type: "DENIAL";
  denial_id: string;
  envelope?: Envelope;
  /** The refused envelope's canonical length, exactly when envelope is left out (it would not fit in a leaf). */
  envelope_size?: number;
  envelope_sha256: string;
  signer_keyid: string;
  statement_type: Kind;
  statement_id?: string;
  workflow_id?: string;
  reason_code: string;
  reason: string;
}

export type Statement = Genesis | Principal | Confirm | Delegate | Revoke | Receipt | Stop | Resume | Approval | Denial;

/** The id field of each kind. */
export const ID_FIELD: Record<Kind, string> = {
  GENESIS: "genesis_id", PRINCIPAL: "principal_id", CONFIRM: "confirm_id", DELEGATE: "delegation_id",
  REVOKE: "revoke_id", RECEIPT: "receipt_id", STOP: "request_id", RESUME: "resume_id", APPROVAL: "approval_id", DENIAL: "denial_id",
};

/** statementId is a statement's id (its kind's id field). */
export function statementId(st: Statement): string {
  return (st as unknown as Record<string, string>)[ID_FIELD[st.type]]!;
}

/** workflowOf is the workflow a statement belongs to ("" for GENESIS, PRINCIPAL and a DENIAL naming none). */
export function workflowOf(st: Statement): string {
  switch (st.type) {
    case "CONFIRM":
    case "DELEGATE":
      return st.scope?.workflow_id ?? "";
    case "GENESIS":
    case "PRINCIPAL":
      return "";
    default:
      return st.workflow_id ?? "";
  }
}

const HEADER = ["type", "timestamp", "log", "actor", "seq"];
const GRANT = ["grantee", "scope", "limits", "ttl_seconds", "revocable", "scope_hash", "approvals"];
const FIELDS: Record<Kind, string[]> = {
  GENESIS: [...HEADER, "genesis_id", "admin_key", "log_key", "max_depth", "clock_skew_seconds", "max_ttl_seconds"],
  PRINCIPAL: [...HEADER, "principal_id", "op", "name", "public_key", "key_type", "credential_id", "rp_id", "origins", "allowed_types"],
  CONFIRM: [...HEADER, "confirm_id", ...GRANT, "risk_level"],
  DELEGATE: [...HEADER, "delegation_id", "parent_ref", "parent_scope_hash", ...GRANT],
  REVOKE: [...HEADER, "revoke_id", "workflow_id", "target_ref", "reason"],
  RECEIPT: [...HEADER, "receipt_id", "workflow_id", "step_id", "action", "target", "authorization_ref", "result", "scope_hash",
    "reserve", "params_sha256", "consumed", "pending_ref", "side_effects", "evidence_refs", "error"],
  STOP: [...HEADER, "request_id", "workflow_id", "stop_scope", "step_id", "takeover_mode", "takeover_to", "reason"],
  RESUME: [...HEADER, "resume_id", "workflow_id", "stop_ref"],
  APPROVAL: [...HEADER, "approval_id", "workflow_id", "receipt_ref", "receipt_sha256", "decision", "reason"],
  DENIAL: [...HEADER, "denial_id", "envelope", "envelope_size", "envelope_sha256", "signer_keyid", "statement_type", "statement_id", "workflow_id", "reason_code", "reason"],
};

function invalid(path: string, msg: string): never {
  throw new CustodyFormatError("schema_invalid", path, msg);
}

type Obj = Record<string, unknown>;

function str(o: Obj, k: string, path = k): string {
  const v = o[k];
  if (typeof v !== "string") invalid(path, v === undefined ? "is required" : "must be a string");
  return v;
}
function ident(o: Obj, k: string, path = k): void {
  const s = str(o, k, path);
  const prob = identifierProblem(s);
  if (prob) invalid(path, `identifier ${JSON.stringify(s)} ${prob}`);
}
function optIdent(o: Obj, k: string): void {
  if (o[k] !== undefined) ident(o, k);
}
function text(o: Obj, k: string, path = k): void {
  if (str(o, k, path) === "") invalid(path, "must not be empty");
}
function hash(o: Obj, k: string): void {
  const s = str(o, k);
  if (!isLowerHex64(s)) invalid(k, `${JSON.stringify(s)} is not 64 lowercase hex digits`);
}
function pubkey(o: Obj, k: string, path = k): void {
  try {
    parsePublicKey(str(o, k, path));
  } catch (e) {
    if (e instanceof CustodyKeyError) invalid(path, e.message);
    throw e;
  }
}
function oneOf(o: Obj, k: string, allowed: string[]): void {
  const s = str(o, k);
  if (!allowed.includes(s)) invalid(k, `${JSON.stringify(s)} is not one of ${allowed.map((a) => JSON.stringify(a)).join(", ")}`);
}
function int(o: Obj, k: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  const v = o[k];
  if (typeof v !== "number" || !Number.isSafeInteger(v)) invalid(k, v === undefined ? "is required" : "must be an integer");
  if (v < min || v > max) invalid(k, `${v} is outside ${min}..${max}`);
}
function absent(o: Obj, k: string, why: string): void {
  if (o[k] !== undefined) invalid(k, `not allowed ${why}`);
}
function limits(o: Obj, k: string): void {
  if (o[k] === undefined) return;
  try {
    checkLimits(k, o[k] as Record<string, number>, true);
  } catch (e) {
    // Inside a statement a malformed limit map is a schema fault, as in Go.
    if (e instanceof CustodyFormatError) invalid(e.path, e.message.slice(e.path.length + 2));
    throw e;
  }
}
function closedObj(v: unknown, path: string, fields: string[], required: string[]): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) invalid(path, "must be a JSON object");
  for (const [k, x] of Object.entries(v)) {
    if (x !== undefined && !fields.includes(k)) invalid(path ? `${path}.${k}` : k, "unknown field (schemas are closed)");
  }
  for (const k of required) if ((v as Obj)[k] === undefined) invalid(path ? `${path}.${k}` : k, "is required");
  return v as Obj;
}

function header(o: Obj): void {
  const ts = str(o, "timestamp");
  if (parseTime(ts) === null) invalid("timestamp", `timestamp ${JSON.stringify(ts)} is not RFC 3339 UTC with whole seconds (like 2026-03-19T08:12:00Z)`);
  ident(o, "log");
  ident(o, "actor");
  int(o, "seq", 1);
}

function grant(o: Obj): void {
  const g = closedObj(o.grantee, "grantee", ["name", "public_key"], ["name", "public_key"]);
  ident(g, "name", "grantee.name");
  pubkey(g, "public_key", "grantee.public_key");
  limits(o, "limits");
  int(o, "ttl_seconds", 1);
  if (typeof o.revocable !== "boolean") invalid("revocable", o.revocable === undefined ? "is required" : "must be true or false");
  hash(o, "scope_hash");
  const s = closedObj(o.scope, "scope", ["workflow_id", "capabilities", "targets", "step_ids", "principals"], ["workflow_id", "capabilities", "targets"]);
  // The scope's grammar and canonical sets are checked on its descriptor;
  // the instant used here does not matter. Its faults are non_canonical.
  try {
    deriveDescriptor(s as unknown as Scope, o.limits as Record<string, number> | undefined, "1970-01-01T00:00:00Z", o.ttl_seconds as number,
      o.approvals as ApprovalRule[] | undefined);
  } catch (e) {
    // As in Go (statement.scopeError): the fault is the scope's, named by
    // the inner message; non_canonical stays, anything else is schema_invalid.
    if (e instanceof CustodyFormatError) {
      const path = e.path.startsWith("approvals") ? "approvals" : "scope";
      throw new CustodyFormatError(e.code === "non_canonical" ? "non_canonical" : "schema_invalid", path, e.message);
    }
    throw e;
  }
}

const RULES: Record<Kind, (o: Obj) => void> = {
  GENESIS(o) {
    ident(o, "genesis_id");
    pubkey(o, "admin_key");
    const lk = str(o, "log_key");
    let name: string;
    try {
      name = parseVerifierKey(lk).name;
    } catch (e) {
      invalid("log_key", `not a signed-note verifier key: ${(e as Error).message}`);
    }
    if (name !== o.log) invalid("log_key", `key name ${JSON.stringify(name)} is not the log's origin ${JSON.stringify(o.log)}`);
    if (o.max_depth !== undefined) int(o, "max_depth", 1, 16);
    if (o.clock_skew_seconds !== undefined) int(o, "clock_skew_seconds", 1);
    if (o.max_ttl_seconds !== undefined) int(o, "max_ttl_seconds", 1);
  },
  PRINCIPAL(o) {
    ident(o, "principal_id");
    oneOf(o, "op", ["enroll", "add_key", "retire", "log_key"]);
    ident(o, "name");
    if (o.key_type === undefined) {
      pubkey(o, "public_key");
      if (o.credential_id !== undefined || o.rp_id !== undefined || o.origins !== undefined || o.allowed_types !== undefined) {
        invalid("key_type", "credential_id, rp_id, origins and allowed_types belong to a passkey; key_type is absent (an Ed25519 key)");
      }
      return;
    }
    const kt = str(o, "key_type");
    if (kt !== "webauthn-es256" && kt !== "webauthn-ed25519") invalid("key_type", `${JSON.stringify(kt)} is not webauthn-es256 or webauthn-ed25519 (absent for an Ed25519 key)`);
    if (o.op === "log_key") invalid("key_type", "the log's DENIAL key is an Ed25519 key, never a passkey");
    try {
      parsePasskey(kt, str(o, "public_key"), str(o, "rp_id"), o.origins as string[]);
    } catch (e) {
      if (e instanceof CustodyFormatError) invalid(e.path, e.message.slice(e.path.length + 2));
      throw e;
    }
    const cid = str(o, "credential_id");
    const raw = Buffer.from(cid, "base64");
    if (raw.length === 0 || raw.length > 1023 || raw.toString("base64") !== cid) invalid("credential_id", "must be the canonical standard base64 of 1..1023 bytes (WebAuthn's limit)");
    if (o.allowed_types !== undefined) {
      const at = o.allowed_types;
      if (!Array.isArray(at)) invalid("allowed_types", "must be an array");
      at.forEach((t, i) => {
        if (!PASSKEY_KINDS.includes(t as string)) invalid("allowed_types", `${JSON.stringify(t)} is not a kind a principal signs (${PASSKEY_KINDS.join(", ")})`);
        if (i > 0 && !((at[i - 1] as string) < (t as string))) invalid("allowed_types", `must be sorted without repeats: ${JSON.stringify(t)} after ${JSON.stringify(at[i - 1])}`);
      });
    }
  },
  CONFIRM(o) {
    ident(o, "confirm_id");
    grant(o);
    if (o.risk_level !== undefined) oneOf(o, "risk_level", ["low", "medium", "high"]);
  },
  DELEGATE(o) {
    ident(o, "delegation_id");
    ident(o, "parent_ref");
    hash(o, "parent_scope_hash");
    grant(o);
  },
  REVOKE(o) {
    ident(o, "revoke_id");
    ident(o, "workflow_id");
    ident(o, "target_ref");
    text(o, "reason");
  },
  RECEIPT(o) {
    for (const k of ["receipt_id", "workflow_id", "step_id", "action", "target", "authorization_ref"]) ident(o, k);
    oneOf(o, "result", ["pending", "success", "failure", "partial"]);
    hash(o, "scope_hash");
    if (o.result === "pending") {
      limits(o, "reserve");
      if (o.params_sha256 !== undefined) hash(o, "params_sha256");
      absent(o, "consumed", "on a pending receipt");
      absent(o, "pending_ref", "on a pending receipt");
      absent(o, "error", "on a pending receipt");
    } else {
      absent(o, "reserve", "on an outcome receipt (reserve belongs to the pending one)");
      absent(o, "params_sha256", "on an outcome receipt (it belongs to the pending one)");
      if (o.pending_ref === undefined) invalid("pending_ref", "an outcome receipt must name its pending receipt");
      ident(o, "pending_ref");
      limits(o, "consumed");
      if (o.error !== undefined) text(o, "error");
    }
    if (o.side_effects !== undefined) {
      const se = closedObj(o.side_effects, "side_effects", Object.keys(o.side_effects as Obj), []);
      for (const k of Object.keys(se)) {
        const prob = identifierProblem(k);
        if (prob) invalid(`side_effects.${k}`, `identifier ${JSON.stringify(k)} ${prob}`);
        str(se, k, `side_effects.${k}`);
      }
    }
    if (o.evidence_refs !== undefined) {
      if (!Array.isArray(o.evidence_refs)) invalid("evidence_refs", "must be an array of strings");
      o.evidence_refs.forEach((_, i) => text(o.evidence_refs as unknown as Obj, String(i), `evidence_refs[${i}]`));
    }
  },
  STOP(o) {
    ident(o, "request_id");
    ident(o, "workflow_id");
    oneOf(o, "stop_scope", ["step", "chain"]);
    if (o.stop_scope === "step") {
      if (o.step_id === undefined) invalid("step_id", "a step STOP must name its step");
      ident(o, "step_id");
    } else {
      absent(o, "step_id", "on a chain STOP");
    }
    oneOf(o, "takeover_mode", ["human", "pause", "delegate_to_other_agent"]);
    if (o.takeover_mode === "delegate_to_other_agent") {
      if (o.takeover_to === undefined) invalid("takeover_to", "takeover_mode delegate_to_other_agent must name the agent to take over");
      ident(o, "takeover_to");
    } else {
      absent(o, "takeover_to", "unless takeover_mode is delegate_to_other_agent");
    }
    text(o, "reason");
  },
  RESUME(o) {
    ident(o, "resume_id");
    ident(o, "workflow_id");
    ident(o, "stop_ref");
  },
  APPROVAL(o) {
    ident(o, "approval_id");
    ident(o, "workflow_id");
    ident(o, "receipt_ref");
    hash(o, "receipt_sha256");
    oneOf(o, "decision", ["approve", "reject"]);
    if (o.reason !== undefined) text(o, "reason");
  },
  DENIAL(o) {
    ident(o, "denial_id");
    if (o.envelope_size !== undefined) {
      int(o, "envelope_size", 1);
      if (o.envelope !== undefined) invalid("envelope_size", "not allowed beside the envelope (it says how long a left-out envelope was)");
    }
    hash(o, "envelope_sha256");
    hash(o, "signer_keyid");
    const t = str(o, "statement_type");
    if (!KINDS.includes(t as Kind)) invalid("statement_type", `${JSON.stringify(t)} is not a statement kind`);
    optIdent(o, "statement_id");
    optIdent(o, "workflow_id");
    if (o.envelope !== undefined) {
      const e = closedObj(o.envelope, "envelope", ["payload", "payloadType", "signatures"], ["payload", "payloadType", "signatures"]);
      str(e, "payload", "envelope.payload");
      str(e, "payloadType", "envelope.payloadType");
      if (!Array.isArray(e.signatures)) invalid("envelope.signatures", "must be an array");
      e.signatures.forEach((sig, i) => {
        const so = closedObj(sig, `envelope.signatures[${i}]`, ["keyid", "sig"], ["keyid", "sig"]);
        str(so, "keyid", `envelope.signatures[${i}].keyid`);
        str(so, "sig", `envelope.signatures[${i}].sig`);
      });
    }
    const rc = str(o, "reason_code");
    if (!/^[a-z_]{1,64}$/.test(rc)) invalid("reason_code", `${JSON.stringify(rc)} is not a reason code`);
    text(o, "reason");
  },
};

/**
 * validateStatement checks a statement against its kind's closed schema and
 * field rules and the strict JSON profile, throwing a CustodyFormatError
 * (`schema_invalid` or `non_canonical`) naming the field. It does not check
 * what needs the log (references, authority, seq, clock).
 */
export function validateStatement(st: Statement): void {
  if (typeof st !== "object" || st === null || Array.isArray(st)) invalid("", "a statement is a JSON object");
  const o = st as unknown as Obj;
  const kind = o.type as Kind;
  if (typeof kind !== "string" || !KINDS.includes(kind)) invalid("type", `${JSON.stringify(o.type)} is not one of ${KINDS.join(", ")}`);
  closedObj(o, "", FIELDS[kind], []);
  checkProfile(o);
  header(o);
  RULES[kind](o);
}

/**
 * seal sets a CONFIRM's or DELEGATE's scope_hash from its scope, limits,
 * ttl_seconds and timestamp (DESIGN §3) and returns the statement; other
 * kinds are returned unchanged.
 */
export function seal<T extends Statement>(st: T): T {
  if (st.type === "CONFIRM" || st.type === "DELEGATE") {
    st.scope_hash = scopeHash(grantDescriptor(st));
  }
  return st;
}

/** grantDescriptor derives a CONFIRM's or DELEGATE's scope descriptor. */
export function grantDescriptor(g: Confirm | Delegate): ScopeDescriptor {
  return deriveDescriptor(g.scope, g.limits, g.timestamp, g.ttl_seconds, g.approvals);
}

/** statementBytes is the canonical JSON of a valid statement: the payload that gets signed. */
export function statementBytes(st: Statement): Uint8Array {
  validateStatement(st);
  if (st.type === "CONFIRM" || st.type === "DELEGATE") {
    const want = scopeHash(grantDescriptor(st));
    if (st.scope_hash !== want) {
      throw new CustodyFormatError("schema_invalid", "scope_hash", `${st.scope_hash} is not the hash of the grant's scope descriptor (${want}); seal() the statement`);
    }
  }
  return utf8(canonicalize(st));
}

/**
 * signStatement validates a statement (a grant's scope_hash included),
 * signs its canonical bytes in a DSSE envelope and returns the envelope's
 * canonical JSON text, ready for Client.append.
 */
export function signStatement(key: PrivateKey, st: Statement): string {
  return envelopeText(signEnvelope(key, st.type, statementBytes(st)));
}

/** parseStatement reads a payload (canonical JSON) of the given kind and validates it. */
export function parseStatement(kind: Kind, payload: Uint8Array | string): Statement {
  const v = parseCanonical(payload, "statement");
  if ((v as Obj)?.type !== kind) invalid("type", `${JSON.stringify((v as Obj)?.type)} does not match the payload type, which is for ${kind}`);
  validateStatement(v as Statement);
  return v as Statement;
}

export { checkIdentifier };
