// The parts of the TypeScript SDK (sdk/typescript/src) the console uses in
// the browser, bundled by build.mjs into console/assets/sdk.js: the
// canonical form and bytes of a statement, the DSSE PAE and the passkey
// challenge (SHA-256 of the PAE), and the offline checks of a bundle
// (checkpoint signature, inclusion, signatures, back-links). Nothing here
// is a second copy: every export is the SDK's own function.
export { canonicalize } from "../../sdk/typescript/src/canonical.js";
export { statementBytes, statementId, workflowOf } from "../../sdk/typescript/src/statement.js";
export { pae, payloadType, parseEnvelope, verifyEnvelope, checkPasskeyEnvelope } from "../../sdk/typescript/src/envelope.js";
export { passkeyChallenge, parsePasskey } from "../../sdk/typescript/src/passkey.js";
export { verifyBundle } from "../../sdk/typescript/src/bundle.js";
export { KeySet } from "../../sdk/typescript/src/note.js";
export { leafHash, verifyInclusion } from "../../sdk/typescript/src/merkle.js";
export { decodeBase64Strict, toBase64, toHex } from "../../sdk/typescript/src/encoding.js";
