package authority

// Code is a stable reason code. Denial codes name the rule of DESIGN §4
// that said no; refusal codes (not logged) name a submission that has no
// accountable signer.
type Code string

// Refusals: DESIGN §4 steps 1–2; the submission is not logged.
const (
	TooLarge     Code = "too_large"
	BadEnvelope  Code = "bad_envelope"
	UnknownKey   Code = "unknown_key"
	BadSignature Code = "bad_signature"
	// RateLimited: the signer has had too many denials; this one is not logged.
	RateLimited Code = "rate_limited"
	// Withdrawn: a statement of a batch whose seq is too high only because
	// earlier statements of its key in the same batch were not accepted.
	// It was not decided; signed again with the seq named, it will be.
	Withdrawn Code = "withdrawn"
)

// Denials, in the order of the checks that produce them.
const (
	SchemaInvalid       Code = "schema_invalid"
	NonCanonical        Code = "non_canonical"
	WrongLog            Code = "wrong_log"
	DuplicateID         Code = "duplicate_id"
	ActorMismatch       Code = "actor_mismatch"
	SeqMismatch         Code = "seq_mismatch"
	ClockSkew           Code = "clock_skew"
	NotPrincipal        Code = "not_principal"
	NotGrantee          Code = "not_grantee"
	NotAuthorized       Code = "not_authorized"
	WorkflowOwned       Code = "workflow_owned"
	UnknownReference    Code = "unknown_reference"
	WorkflowMismatch    Code = "workflow_mismatch"
	IdentityConflict    Code = "identity_conflict"
	OutcomeExists       Code = "outcome_exists"
	OutcomeMismatch     Code = "outcome_mismatch"
	StopLifted          Code = "stop_lifted"
	AlreadyStopped      Code = "already_stopped"
	Revoked             Code = "revoked"
	Expired             Code = "expired"
	WorkflowStopped     Code = "workflow_stopped"
	StepStopped         Code = "step_stopped"
	ScopeHashMismatch   Code = "scope_hash_mismatch"
	DepthExceeded       Code = "depth_exceeded"
	Widening            Code = "widening"
	EqualScope          Code = "equal_scope"
	LimitMissing        Code = "limit_missing"
	LimitWidened        Code = "limit_widened"
	ExpiryWidened       Code = "expiry_widened"
	RevocabilityWidened Code = "revocability_widened"
	PrincipalMismatch   Code = "principal_mismatch"
	OutOfScope          Code = "out_of_scope"
	ReserveMissing      Code = "reserve_missing"
	LimitExceeded       Code = "limit_exceeded"
)
