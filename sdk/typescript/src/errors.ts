/**
 * Errors a caller can act on. Each carries a stable `code`, the same codes
 * the Go packages and the ledger use where they overlap (`non_canonical`,
 * `schema_invalid`, `bad_signature`, ...).
 */

/** A value or statement that breaks the strict profile or a statement's schema. */
export class CustodyFormatError extends Error {
  override name = "CustodyFormatError";
  /** `non_canonical` or `schema_invalid` (the ledger's reason codes for the same fault). */
  readonly code: string;
  /** Where in the value: `scope.targets[1]`, `limits.budget`, ... ("" for the whole). */
  readonly path: string;
  constructor(code: string, path: string, message: string) {
    super(path ? `${path}: ${message}` : message);
    this.code = code;
    this.path = path;
  }
}

/** A key that cannot be used: not PKCS#8 Ed25519, wrong passphrase, a small-order public key. */
export class CustodyKeyError extends Error {
  override name = "CustodyKeyError";
  readonly code = "bad_key";
}

/**
 * An answer of the ledger that failed verification: a checkpoint not signed
 * by the log key, a proof that does not verify, a leaf that does not hold
 * what was submitted. The server is faulty or lying; never trust the answer.
 * Same meaning as the Go client's ErrUnverified.
 */
export class UnverifiedError extends Error {
  override name = "UnverifiedError";
  readonly code = "unverified";
  constructor(message: string) {
    super(`the ledger's answer does not verify: ${message}`);
  }
}

/** An answer that is neither a decision nor a refusal: overloaded, down, not found. Nothing was acknowledged. */
export class HTTPError extends Error {
  override name = "HTTPError";
  readonly status: number;
  readonly reasonCode: string;
  readonly reason: string;
  /** From Retry-After, in milliseconds (0 when absent). */
  readonly retryAfterMs: number;
  /** On a 503 not_leader: the URL of the server that sequences the log, if it is known. */
  leader = "";
  constructor(status: number, reasonCode: string, reason: string, retryAfterMs = 0) {
    super(reasonCode ? `ledger server: HTTP ${status}: ${reasonCode}: ${reason}` : `ledger server: HTTP ${status}${reason ? ": " + reason : ""}`);
    this.status = status;
    this.reasonCode = reasonCode;
    this.reason = reason;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The ledger refused the submission without logging it (malformed, unknown key, bad signature, too large, rate-limited). */
export class RefusedError extends Error {
  override name = "RefusedError";
  readonly status: number;
  readonly reasonCode: string;
  readonly reason: string;
  constructor(status: number, reasonCode: string, reason: string) {
    super(`refused: ${reasonCode}: ${reason} (nothing was logged)`);
    this.status = status;
    this.reasonCode = reasonCode;
    this.reason = reason;
  }
}

/**
 * A pending RECEIPT the log accepted, but that no checkpoint meeting the
 * client's witness policy covered in time. The entry is logged; a runtime
 * must not act on it (execute does not).
 */
export class NotWitnessedError extends Error {
  override name = "NotWitnessedError";
  readonly code = "not_witnessed";
}
