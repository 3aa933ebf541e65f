"""custody for Python runtimes.

Build, validate and sign statements (canonical JSON under the strict
profile, DSSE, scope hashes), append them to a custody ledger and verify
every answer against the log's key, read entries, proofs and bundles,
follow a workflow's events, and gate irreversible steps with a
:class:`Runtime` that fails closed.
"""

from .approval import ApprovalState, decide
from .bundle import BUNDLE_FORMAT, BundleVerdict, verify_bundle
from .canonical import MAX_SAFE_INTEGER, canonicalize, canonicalize_json, check_profile, parse_canonical, parse_relaxed
from .client import AppendResult, AsyncClient, Client, Entry, check_entry
from .envelope import KINDS, ParsedEnvelope, dedup_hash, envelope_bytes, pae, parse_envelope, payload_type, sign_envelope, verify_envelope
from .errors import (CustodyError, CustodyFormatError, CustodyKeyError, HTTPError, NotWitnessedError, RefusedError, SignatureError,
                     UnverifiedError)
from .keys import (PrivateKey, check_public_key, encode_public_key, generate_key, key_id, load_private_key, parse_public_key,
                   private_key_from_seed, verify_signature)
from .leaf import MAX_LEAF_SIZE, ReadLeaf, parse_leaf
from .merkle import leaf_hash, node_hash, root_from_inclusion, verify_consistency, verify_inclusion
from .note import Checkpoint, KeySet, VerifierKey, open_note, parse_verifier_key, verifier_key_of
from .passkey import verify_passkey
from .runtime import (DeniedError, Execution, Hooks, NotExecutedError, Outcome, Runtime, Step, StepContext, StepRun, StoppedError, new_id,
                      params_sha256)
from .scope import (SCOPE_HASH_PREFIX, canonical_set, check_descriptor, check_identifier, check_set, derive_descriptor, format_time,
                    identifier_problem, match, optional_set, parse_time, pattern_covers, pattern_problem, scope_hash)
from .statement import ID_FIELD, grant_descriptor, parse_statement, seal, sign_statement, statement_bytes, statement_id, validate_statement, workflow_of
from .witness import Cosignature, WitnessEvaluation, WitnessPolicy, cosignature_message, parse_witness_key

__version__ = "0.1.0"

__all__ = [name for name in dir() if not name.startswith("_")]
