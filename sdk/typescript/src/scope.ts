/**
 * Scope (DESIGN §3): identifiers, patterns, canonical pattern sets, the
 * scope descriptor of a grant and its hash
 *
 *     scope_hash = hex(SHA-256("custody/scope/v1\x00" || JCS(descriptor)))
 *
 * The rules are the Go package scope's, checked the same way and in the
 * same order, so a runtime learns of a non-canonical grant before the
 * ledger denies it. Attenuation (is a child grant strictly narrower than
 * its parent?) is decided by the ledger and by `custody verify`; this SDK
 * does not re-derive it.
 */
import { createHash } from "node:crypto";
import { canonicalize, MAX_SAFE_INTEGER } from "./canonical.js";
import { CustodyFormatError } from "./errors.js";

/** The longest identifier, in bytes. */
export const MAX_IDENTIFIER_LEN = 256;
/** The domain separator hashed before the descriptor. */
export const SCOPE_HASH_PREFIX = "custody/scope/v1\x00";

/** A grant's scope as statements carry it. */
export interface Scope {
  workflow_id: string;
  capabilities: string[];
  targets: string[];
  /** Absent: any step. */
  step_ids?: string[];
  /** Absent: any grantee below. */
  principals?: string[];
}

/** An approval rule of a CONFIRM or DELEGATE (DESIGN §7). */
export interface ApprovalRule {
  rule_id: string;
  capabilities: string[];
  targets?: string[];
  step_ids?: string[];
  above?: Record<string, number>;
  approvers: string[];
  quorum: number;
  ttl_seconds: number;
}

/** The scope descriptor a grant's scope_hash is computed from. */
export interface ScopeDescriptor {
  /** The grant's approval rules, sorted by rule_id. */
  approvals?: ApprovalRule[];
  capabilities: string[];
  expires_at: string;
  limits?: Record<string, number>;
  principals?: string[];
  step_ids?: string[];
  targets: string[];
  workflow_id: string;
}

function nonCanonical(path: string, msg: string): never {
  throw new CustodyFormatError("non_canonical", path, msg);
}

const SEGMENT = /^[A-Za-z0-9._:@+=-]$/;

/** identifierProblem says why s is not an identifier, or "" if it is one. */
export function identifierProblem(s: string): string {
  if (typeof s !== "string") return "is not a string";
  if (s.length === 0) return "is empty";
  const bytes = Buffer.byteLength(s, "utf8");
  if (bytes > MAX_IDENTIFIER_LEN) return `is ${bytes} bytes, over the ${MAX_IDENTIFIER_LEN}-byte limit`;
  let start = 0;
  let dotsOnly = true;
  for (let i = 0; i <= s.length; i++) {
    if (i === s.length || s[i] === "/") {
      if (i === start) return `has an empty segment at byte ${i}`;
      if (dotsOnly) return `has a segment made only of dots (${JSON.stringify(s.slice(start, i))})`;
      start = i + 1;
      dotsOnly = true;
      continue;
    }
    const c = s[i]!;
    if (!SEGMENT.test(c)) {
      return `has ${JSON.stringify(c)} at offset ${i}; only A-Z a-z 0-9 . _ : @ + = - and '/' between segments are allowed`;
    }
    if (c !== ".") dotsOnly = false;
  }
  return "";
}

/** checkIdentifier throws (non_canonical) unless s is an identifier (DESIGN §1). */
export function checkIdentifier(s: string, path = ""): void {
  const p = identifierProblem(s);
  if (p) nonCanonical(path, `identifier ${JSON.stringify(s)} ${p}`);
}

/** patternProblem says why p is not a pattern, or "". */
export function patternProblem(p: string): string {
  if (typeof p !== "string") return "is not a string";
  if (p === "*") return "";
  if (Buffer.byteLength(p, "utf8") > MAX_IDENTIFIER_LEN) return identifierProblem(p);
  if (p.endsWith("/*")) {
    const prefix = p.slice(0, -2);
    if (prefix.includes("*")) return "has '*' that is not the whole final segment";
    if (prefix === "") return `has an empty segment before "/*"`;
    const prob = identifierProblem(prefix);
    return prob ? "has a prefix that " + prob : "";
  }
  if (p.includes("*")) return "has '*' that is not the whole final segment";
  return identifierProblem(p);
}

const isWildcard = (p: string) => p.endsWith("*");

/** match reports whether pattern matches the identifier id. */
export function match(pattern: string, id: string): boolean {
  if (patternProblem(pattern) || identifierProblem(id)) return false;
  if (!isWildcard(pattern)) return pattern === id;
  const prefix = pattern.slice(0, -1);
  return id.length > prefix.length && id.startsWith(prefix);
}

/** patternCovers reports whether every identifier q matches is matched by p. */
export function patternCovers(p: string, q: string): boolean {
  if (patternProblem(p) || patternProblem(q)) return false;
  if (p === q) return true;
  if (!isWildcard(p)) return false;
  const prefix = p.slice(0, -1);
  if (isWildcard(q)) return q.slice(0, -1).startsWith(prefix);
  return q.length > prefix.length && q.startsWith(prefix);
}

/**
 * checkSet throws (non_canonical) unless set is a canonical pattern set:
 * present unless optional, not empty, sorted bytewise, no duplicates, no
 * element covered by another, and an optional set not written ["*"].
 */
export function checkSet(name: string, set: string[] | undefined, optional: boolean): void {
  if (set === undefined && optional) return;
  if (set === undefined) nonCanonical(name, `${name} is required`);
  if (!Array.isArray(set)) nonCanonical(name, `${name} is not an array`);
  if (set.length === 0) nonCanonical(name, `${name} is an empty array; an optional set is omitted instead, a required one needs a pattern`);
  set.forEach((p, i) => {
    const prob = patternProblem(p);
    if (prob) nonCanonical(`${name}[${i}]`, `${name}[${i}] ${JSON.stringify(p)} ${prob}`);
  });
  for (let i = 1; i < set.length; i++) {
    if (set[i - 1] === set[i]) nonCanonical(name, `${name} holds ${JSON.stringify(set[i])} twice`);
    if (set[i - 1]! > set[i]!) nonCanonical(name, `${name} is not sorted: ${JSON.stringify(set[i - 1])} comes before ${JSON.stringify(set[i])}`);
  }
  for (const p of set) {
    const by = set.find((e) => e !== p && patternCovers(e, p));
    if (by !== undefined) nonCanonical(name, `${name} element ${JSON.stringify(p)} is already covered by ${JSON.stringify(by)} in the same set`);
  }
  if (optional && set.length === 1 && set[0] === "*") nonCanonical(name, `${name} must be omitted rather than written ["*"]`);
}

/**
 * canonicalSet makes a pattern set canonical: sorted bytewise, without
 * duplicates or elements another element covers. It does not change what
 * the set matches. An empty input gives undefined (omit the field).
 */
export function canonicalSet(set: readonly string[] | undefined): string[] | undefined {
  if (!set || set.length === 0) return undefined;
  const sorted = [...new Set(set)].sort(byteCompare);
  return sorted.filter((p) => !sorted.some((e) => e !== p && patternCovers(e, p)));
}

/** optionalSet is canonicalSet for step_ids and principals, where ["*"] is written absent. */
export function optionalSet(set: readonly string[] | undefined): string[] | undefined {
  const s = canonicalSet(set);
  return s && s.length === 1 && s[0] === "*" ? undefined : s;
}

function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
}

// Times: RFC 3339 UTC with whole seconds, years 0000..9999, computed by
// the civil calendar rather than Date (whose two-digit years and range
// differ from Go's time package).

const TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})Z$/;

function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function civilFromDays(z: number): [number, number, number] {
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

function daysIn(m: number, y: number): number {
  if (m === 2) return y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(m) ? 30 : 31;
}

/** parseTime reads a statement time (2026-03-19T08:12:00Z) into Unix seconds; null if it is not one. */
export function parseTime(s: string): number | null {
  const m = typeof s === "string" ? TIME.exec(s) : null;
  if (!m) return null;
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  if (mo < 1 || mo > 12 || d < 1 || d > daysIn(mo, y) || h > 23 || mi > 59 || se > 59) return null;
  return daysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
}

/** formatTime writes Unix seconds (whole; a Date is truncated to the second) as a statement time. */
export function formatTime(t: number | Date): string {
  const sec = t instanceof Date ? Math.floor(t.getTime() / 1000) : t;
  if (!Number.isSafeInteger(sec)) throw new RangeError(`${sec} is not a whole number of seconds`);
  const days = Math.floor(sec / 86400);
  const rem = sec - days * 86400;
  const [y, m, d] = civilFromDays(days);
  if (y < 0 || y > 9999) throw new RangeError(`${sec} is outside years 0000..9999`);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${p(y, 4)}-${p(m)}-${p(d)}T${p(Math.floor(rem / 3600))}:${p(Math.floor((rem % 3600) / 60))}:${p(rem % 60)}Z`;
}

/** checkDescriptor throws (non_canonical) unless d is a canonical scope descriptor. */
export function checkDescriptor(d: ScopeDescriptor): void {
  if (typeof d !== "object" || d === null || Array.isArray(d)) nonCanonical("", "a scope descriptor is a JSON object");
  const allowed = new Set(["approvals", "capabilities", "expires_at", "limits", "principals", "step_ids", "targets", "workflow_id"]);
  for (const k of Object.keys(d)) {
    if (!allowed.has(k) && (d as unknown as Record<string, unknown>)[k] !== undefined) {
      throw new CustodyFormatError("schema_invalid", k, `unknown field ${JSON.stringify(k)} in a scope descriptor`);
    }
  }
  if (d.approvals !== undefined) checkRules(d.approvals);
  checkSet("capabilities", d.capabilities, false);
  if (parseTime(d.expires_at) === null) {
    nonCanonical("expires_at", `${JSON.stringify(d.expires_at)} is not an RFC 3339 UTC time with whole seconds, like 2026-03-19T08:27:00Z`);
  }
  if (d.limits !== undefined) checkLimits("limits", d.limits, true);
  checkSet("principals", d.principals, true);
  checkSet("step_ids", d.step_ids, true);
  checkSet("targets", d.targets, false);
  const prob = identifierProblem(d.workflow_id);
  if (prob) nonCanonical("workflow_id", `workflow_id ${JSON.stringify(d.workflow_id)} ${prob}`);
}

/**
 * checkRules throws unless rules is a canonical approvals list (DESIGN §7):
 * 1..16 rules sorted by rule_id without repeats; in each, an identifier
 * rule_id, canonical capabilities and approvers (at most 16), optional
 * canonical targets and step_ids, above a non-empty map of limit keys,
 * quorum 1..16 and ttl_seconds 1..86400, and no other field.
 */
export function checkRules(rules: ApprovalRule[]): void {
  if (!Array.isArray(rules) || rules.length === 0) nonCanonical("approvals", "approvals is an empty list; omit it instead");
  if (rules.length > 16) throw new CustodyFormatError("schema_invalid", "approvals", `approvals holds ${rules.length} rules, above the 16 a grant may carry`);
  const allowed = new Set(["above", "approvers", "capabilities", "quorum", "rule_id", "step_ids", "targets", "ttl_seconds"]);
  rules.forEach((r, i) => {
    const path = `approvals[${i}]`;
    for (const k of Object.keys(r)) {
      if (!allowed.has(k) && (r as unknown as Record<string, unknown>)[k] !== undefined) {
        throw new CustodyFormatError("schema_invalid", `${path}.${k}`, `unknown field ${JSON.stringify(k)} in an approval rule`);
      }
    }
    const prob = identifierProblem(r.rule_id);
    if (prob) nonCanonical(`${path}.rule_id`, `rule_id ${JSON.stringify(r.rule_id)} ${prob}`);
    if (r.above !== undefined) checkLimits(`${path}.above`, r.above, true);
    checkSet(`${path}.approvers`, r.approvers, false);
    if (r.approvers.length > 16) throw new CustodyFormatError("schema_invalid", `${path}.approvers`, `approvers holds ${r.approvers.length} patterns, above 16`);
    checkSet(`${path}.capabilities`, r.capabilities, false);
    if (!Number.isSafeInteger(r.quorum) || r.quorum < 1 || r.quorum > 16) throw new CustodyFormatError("schema_invalid", `${path}.quorum`, `quorum ${r.quorum} is outside 1..16`);
    checkSet(`${path}.step_ids`, r.step_ids, true);
    checkSet(`${path}.targets`, r.targets, true);
    if (!Number.isSafeInteger(r.ttl_seconds) || r.ttl_seconds < 1 || r.ttl_seconds > 86400) throw new CustodyFormatError("schema_invalid", `${path}.ttl_seconds`, `ttl_seconds ${r.ttl_seconds} is outside 1..86400`);
    if (i > 0 && byteCompare(rules[i - 1]!.rule_id, r.rule_id) >= 0) nonCanonical("approvals", `rule_id ${JSON.stringify(r.rule_id)} comes after ${JSON.stringify(rules[i - 1]!.rule_id)}; rules are written sorted by rule_id, without repeats`);
  });
}

/** checkLimits checks a limits/reserve/consumed map: identifier keys, integers in 0..2^53-1. */
export function checkLimits(path: string, m: Record<string, number>, nonEmpty: boolean): void {
  if (typeof m !== "object" || m === null || Array.isArray(m)) {
    throw new CustodyFormatError("schema_invalid", path, "must be an object of limit keys to integers");
  }
  const keys = Object.keys(m).filter((k) => m[k] !== undefined).sort();
  if (nonEmpty && keys.length === 0) nonCanonical(path, "an empty object is not allowed (omit the field)");
  for (const k of keys) {
    const prob = identifierProblem(k);
    if (prob) nonCanonical(`${path}.${k}`, `limit key ${JSON.stringify(k)} ${prob}`);
    const v = m[k]!;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0 || Object.is(v, -0)) {
      throw new CustodyFormatError(typeof v === "number" && Number.isSafeInteger(v) ? "schema_invalid" : "non_canonical", `${path}.${k}`,
        `${String(v)} is not an integer in 0..${MAX_SAFE_INTEGER}`);
    }
  }
}

/**
 * deriveDescriptor computes a grant's scope descriptor: its scope's sets
 * and workflow, its limits, and expires_at = timestamp + ttl_seconds.
 */
export function deriveDescriptor(scope: Scope, limits: Record<string, number> | undefined, timestamp: string, ttlSeconds: number, approvals?: ApprovalRule[]): ScopeDescriptor {
  const ts = parseTime(timestamp);
  if (ts === null) nonCanonical("timestamp", `${JSON.stringify(timestamp)} is not RFC 3339 UTC with whole seconds (like 2026-03-19T08:12:00Z)`);
  if (!Number.isSafeInteger(ttlSeconds) || ttlSeconds < 1) nonCanonical("ttl_seconds", `ttl_seconds is ${ttlSeconds}, not an integer of at least 1`);
  let expires: string;
  try {
    expires = formatTime(ts + ttlSeconds);
  } catch {
    nonCanonical("ttl_seconds", `expiry of timestamp ${timestamp} plus ${ttlSeconds} seconds is outside years 0000..9999`);
  }
  const d: ScopeDescriptor = { capabilities: scope.capabilities, expires_at: expires, targets: scope.targets, workflow_id: scope.workflow_id };
  if (limits !== undefined && Object.keys(limits).length > 0) d.limits = { ...limits };
  if (scope.principals !== undefined) d.principals = scope.principals;
  if (scope.step_ids !== undefined) d.step_ids = scope.step_ids;
  if (approvals !== undefined) d.approvals = approvals;
  checkDescriptor(d);
  return d;
}

/** scopeHash is the lowercase hex scope hash of a canonical descriptor. */
export function scopeHash(descriptor: ScopeDescriptor): string {
  checkDescriptor(descriptor);
  return createHash("sha256").update(SCOPE_HASH_PREFIX).update(canonicalize(descriptor)).digest("hex");
}
