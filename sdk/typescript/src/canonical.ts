/**
 * Canonical JSON: RFC 8785 (JCS) under custody's strict profile
 * (DESIGN §1). The JCS serialisation itself is the `canonicalize` package;
 * this module checks the profile around it, the same checks the Go side
 * (package canon) applies, so that what this SDK signs is what the ledger
 * accepts:
 *
 * - numbers are integers with |n| <= 2^53-1 (no fraction, no exponent
 *   form, no -0, no NaN or Infinity);
 * - no `null`; an `undefined` object member is absent (JavaScript's own
 *   spelling of "omit the field"), an `undefined` array element is an error;
 * - no empty arrays or objects (omit the field instead);
 * - strings are valid Unicode (no lone surrogates);
 * - only plain objects, arrays, strings, numbers and booleans: a Date, Map,
 *   class instance or anything with toJSON is refused, so nothing is
 *   serialised in a way the caller did not see.
 */
import jcs from "canonicalize";
import { CustodyFormatError } from "./errors.js";

/** The largest integer the profile allows: 2^53-1. */
export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

/** The JSON values the strict profile can hold. */
export type JSONValue = string | number | boolean | JSONValue[] | { [k: string]: JSONValue | undefined };

function fail(path: string, msg: string): never {
  throw new CustodyFormatError("non_canonical", path, msg);
}

function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const n = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (n < 0xdc00 || n > 0xdfff) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return true;
    }
  }
  return false;
}

function isPlainObject(v: object): boolean {
  const p = Object.getPrototypeOf(v);
  return p === Object.prototype || p === null;
}

/**
 * Throws a CustodyFormatError naming the first place where value breaks
 * the strict profile, including nesting deeper than MAX_DEPTH (depth is
 * value's own depth, 0 at the top).
 */
export function checkProfile(value: unknown, path = "", depth = 0): void {
  if (depth > MAX_DEPTH) fail(path, `nesting deeper than ${MAX_DEPTH}`);
  switch (typeof value) {
    case "string":
      if (hasLoneSurrogate(value)) fail(path, "string holds a lone surrogate (not valid UTF-8)");
      return;
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) fail(path, `${value} is not a number JSON can hold`);
      if (!Number.isInteger(value)) fail(path, `${value} is a fraction; only integers are allowed`);
      if (Object.is(value, -0)) fail(path, "-0 is not allowed");
      if (Math.abs(value) > MAX_SAFE_INTEGER) fail(path, `${value} is outside ±(2^53-1)`);
      return;
    case "object":
      break;
    case "undefined":
      fail(path, "undefined is not a JSON value");
    // eslint-disable-next-line no-fallthrough
    default:
      fail(path, `a ${typeof value} is not a JSON value`);
  }
  if (value === null) fail(path, "null is not allowed (absent means absent: omit the field)");
  if (Array.isArray(value)) {
    if (value.length === 0) fail(path, "an empty array is not allowed (omit the field)");
    for (let i = 0; i < value.length; i++) {
      if (value[i] === undefined) fail(`${path}[${i}]`, "undefined is not a JSON value");
      checkProfile(value[i], `${path}[${i}]`, depth + 1);
    }
    return;
  }
  if (!isPlainObject(value as object) || typeof (value as { toJSON?: unknown }).toJSON === "function") {
    fail(path, `a ${(value as object).constructor?.name ?? "non-plain object"} is not a plain JSON object`);
  }
  let n = 0;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === undefined) continue;
    const p = path ? `${path}.${k}` : k;
    if (hasLoneSurrogate(k)) fail(p, "member name holds a lone surrogate");
    checkProfile(v, p, depth + 1);
    n++;
  }
  if (n === 0) fail(path, "an empty object is not allowed (omit the field)");
}

/**
 * canonicalize returns the RFC 8785 canonical JSON text of value under the
 * strict profile, and throws a CustodyFormatError (code `non_canonical`) on
 * a fraction, null, an empty array or object, or anything else the profile
 * refuses.
 */
export function canonicalize(value: unknown): string {
  checkProfile(value);
  const out = jcs(value);
  if (out === undefined) fail("", "value has no JSON form");
  return out;
}

/** canonicalBytes is canonicalize as UTF-8 bytes. */
export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalize(value), "utf8");
}

/**
 * MAX_DEPTH is how deep JSON may nest, as Go's canon package reads it: the
 * top-level value is at depth 0 and a value deeper than 32 is refused, so
 * at most 32 arrays or objects nest. custody's deepest document (a DENIAL
 * leaf holding an envelope) nests 4.
 */
export const MAX_DEPTH = 32;

/**
 * checkDepth refuses text whose arrays and objects nest deeper than
 * MAX_DEPTH, before it is parsed (so hostile input cannot exhaust the
 * stack of the checks that walk the value).
 */
function checkDepth(text: string, what: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_DEPTH) {
        throw new CustodyFormatError("non_canonical", "", `${what} nests deeper than ${MAX_DEPTH} (at character ${i})`);
      }
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
}

/**
 * parseCanonical reads bytes that must be canonical JSON under the strict
 * profile: valid UTF-8 without a byte order mark, nesting at most
 * MAX_DEPTH deep, and equal byte for byte to the canonical form of what
 * they parse to. Duplicate keys, numbers beyond 2^53-1, insignificant
 * whitespace and every other spelling of the same value fail that test:
 * the bytes Go's canon.Parse refuses.
 */
export function parseCanonical(bytes: Uint8Array | string, what = "JSON"): unknown {
  let text: string;
  if (typeof bytes === "string") {
    text = bytes;
  } else {
    try {
      // ignoreBOM keeps a leading byte order mark in the text (the
      // default drops it silently), so that it is refused below.
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch {
      throw new CustodyFormatError("non_canonical", "", `${what} is not valid UTF-8`);
    }
  }
  if (text.charCodeAt(0) === 0xfeff) {
    throw new CustodyFormatError("non_canonical", "", `${what} starts with a byte order mark (U+FEFF), which canonical JSON never has`);
  }
  checkDepth(text, what);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new CustodyFormatError("non_canonical", "", `${what} is not JSON: ${(e as Error).message}`);
  }
  const again = canonicalize(v);
  if (again !== text) throw new CustodyFormatError("non_canonical", "", `${what} is not in canonical form (RFC 8785 under the strict profile)`);
  return v;
}
