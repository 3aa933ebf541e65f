/**
 * @custodylog/custody: custody for runtimes written in TypeScript.
 *
 * Build, validate and sign statements (canonical JSON under the strict
 * profile, DSSE, scope hashes), append them to a custody ledger and verify
 * every answer against the log's key, read entries, proofs and bundles,
 * follow a workflow's events, and gate irreversible steps with a Runtime.
 */
export { canonicalize, canonicalBytes, parseCanonical, checkProfile, MAX_SAFE_INTEGER, MAX_DEPTH } from "./canonical.js";
export type { JSONValue } from "./canonical.js";
export { CustodyFormatError, CustodyKeyError, UnverifiedError, HTTPError, RefusedError, NotWitnessedError } from "./errors.js";
export { WitnessPolicy, parseWitnessKey, cosignatureMessage } from "./witness.js";
export type { WitnessKey, WitnessEvaluation, Cosignature } from "./witness.js";
export { PrivateKey, loadPrivateKey, generateKey, privateKeyFromSeed, keyId, parsePublicKey, encodePublicKey, checkPublicKey, verifySignature } from "./keys.js";
export { KINDS, payloadType, kindOfPayloadType, pae, signEnvelope, envelopeText, parseEnvelope, verifyEnvelope, checkPasskeyEnvelope, dedupHash } from "./envelope.js";
export type { Kind, Envelope, ParsedEnvelope, BoundKey } from "./envelope.js";
export {
  parsePasskey, parseAssertion, verifyPasskey, passkeyChallenge, isPasskeySig, checkRpId, checkOrigins, PasskeyError, KEY_TYPE_ES256, KEY_TYPE_ED25519,
} from "./passkey.js";
export type { Passkey, Assertion } from "./passkey.js";
export {
  scopeHash, deriveDescriptor, checkDescriptor, checkRules, checkSet, canonicalSet, optionalSet, checkIdentifier, identifierProblem,
  patternProblem, match, patternCovers, parseTime, formatTime, SCOPE_HASH_PREFIX,
} from "./scope.js";
export type { Scope, ScopeDescriptor, ApprovalRule } from "./scope.js";
export { validateStatement, seal, grantDescriptor, statementBytes, signStatement, parseStatement, statementId, workflowOf, ID_FIELD } from "./statement.js";
export type {
  Statement, Header, Genesis, Principal, Confirm, Delegate, Revoke, Receipt, Stop, Resume, Approval, Denial, Grantee, GrantFields, ReceiptResult,
} from "./statement.js";
export { parseLeaf, MAX_LEAF_SIZE } from "./leaf.js";
export type { Leaf, ReadLeaf } from "./leaf.js";
export { leafHash, nodeHash, verifyInclusion, verifyConsistency, rootFromInclusion } from "./merkle.js";
export { KeySet, parseVerifierKey, verifierKeyOf, openNote } from "./note.js";
export type { Checkpoint, VerifierKey } from "./note.js";
export { Client, checkEntry } from "./client.js";
export type { ApprovalState } from "./client.js";
export type { ClientOptions, AppendResult, Inclusion, Consistency, KeySeq, LogInfo } from "./client.js";
export type { Entry, EventStreamOptions } from "./events.js";
export { verifyBundle, BUNDLE_FORMAT } from "./bundle.js";
export type { Bundle, BundleVerdict, BundleCheck } from "./bundle.js";
export { Runtime, StoppedError, DeniedError, NotExecutedError, NotApprovedError, paramsSha256, newId } from "./runtime.js";
export type { ApprovalFailure } from "./runtime.js";
export { checkApproval, ruleMatches } from "./approval.js";
export type { ApprovalCheck, ApprovalStateName } from "./approval.js";
export type { Step, Outcome, Hooks, GrantSpec, StopSpec, Execution, RuntimeOptions, Unsigned } from "./runtime.js";
