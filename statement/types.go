package statement

import (
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
)

// Header holds the fields every statement carries (DESIGN §2).
type Header struct {
	Type      Kind   `json:"type"`
	Timestamp string `json:"timestamp"` // RFC 3339, UTC, "Z", whole seconds
	Log       string `json:"log"`       // the log's origin
	Actor     string `json:"actor"`     // the signing key's bound name
	Seq       uint64 `json:"seq"`       // per signing key, from 1
}

// Head returns the common fields; it lets every kind satisfy Statement.
func (h *Header) Head() *Header { return h }

// Statement is any of the ten kinds.
type Statement interface {
	Head() *Header
	// ID is the statement's id field (genesis_id, confirm_id, ...).
	ID() string
	// WorkflowID is the workflow the statement belongs to, "" for GENESIS
	// and PRINCIPAL (they form the trust chain) and for a DENIAL that names
	// none.
	WorkflowID() string
	validate() error
}

// GenesisDoc is leaf 0: the trust root and the log's parameters.
type GenesisDoc struct {
	Header
	GenesisID        string `json:"genesis_id"`
	AdminKey         string `json:"admin_key"` // base64 raw Ed25519 public key
	LogKey           string `json:"log_key"`   // signed-note verifier key, name = origin
	MaxDepth         int64  `json:"max_depth,omitempty"`
	ClockSkewSeconds int64  `json:"clock_skew_seconds,omitempty"`
	MaxTTLSeconds    int64  `json:"max_ttl_seconds,omitempty"`
}

// Defaults of DESIGN §2, used when GENESIS omits a parameter.
const (
	DefaultMaxDepth         = 3
	DefaultClockSkewSeconds = 300
	DefaultMaxTTLSeconds    = 2592000
)

// Params returns the log parameters with defaults applied.
func (g *GenesisDoc) Params() (maxDepth, clockSkew, maxTTL int64) {
	maxDepth, clockSkew, maxTTL = g.MaxDepth, g.ClockSkewSeconds, g.MaxTTLSeconds
	if maxDepth == 0 {
		maxDepth = DefaultMaxDepth
	}
	if clockSkew == 0 {
		clockSkew = DefaultClockSkewSeconds
	}
	if maxTTL == 0 {
		maxTTL = DefaultMaxTTLSeconds
	}
	return
}

// Principal operations.
const (
	OpEnroll = "enroll"
	// OpAddKey binds another key (another device) to an enrolled
	// principal's name (DESIGN §1); quorum counts names, not keys.
	OpAddKey = "add_key"
	OpRetire = "retire"
	// OpLogKey rotates the key that signs the log's DENIALs (DESIGN §1):
	// name is the log's origin, public_key the new key. From the entry on,
	// only the new key signs DENIALs; the old one is retired for good.
	OpLogKey = "log_key"
)

// PrincipalDoc enrolls or retires a person's or organisation's key, or
// adds a key to an enrolled name. A passkey (DESIGN §1) sets KeyType to
// sign.KeyTypeWebAuthnES256 or sign.KeyTypeWebAuthnEd25519, PublicKey to
// the standard base64 of its SPKI DER, and the WebAuthn fields; KeyType
// absent means an Ed25519 key and the WebAuthn fields must be absent.
type PrincipalDoc struct {
	Header
	PrincipalID string `json:"principal_id"`
	Op          string `json:"op"`
	Name        string `json:"name"`
	PublicKey   string `json:"public_key"`
	KeyType     string `json:"key_type,omitempty"`
	// CredentialID is the standard base64 of the WebAuthn credential id.
	CredentialID string   `json:"credential_id,omitempty"`
	RPID         string   `json:"rp_id,omitempty"`
	Origins      []string `json:"origins,omitempty"`
	// AllowedTypes lists the statement kinds a passkey may sign
	// (DefaultAllowedTypes when absent).
	AllowedTypes []string `json:"allowed_types,omitempty"`
}

// PasskeyKinds are the statement kinds a passkey may be allowed to sign:
// those a principal signs at all.
var PasskeyKinds = []string{"APPROVAL", "CONFIRM", "RESUME", "REVOKE", "STOP"}

// DefaultAllowedTypes is what a passkey enrolled without `allowed_types`
// may sign (DESIGN §1): CONFIRM and REVOKE only when the admin lists them.
var DefaultAllowedTypes = []string{"APPROVAL", "RESUME", "STOP"}

// IsPasskey reports whether the document binds a passkey.
func (d *PrincipalDoc) IsPasskey() bool { return sign.IsPasskeyType(d.KeyType) }

// Allowed returns the kinds the bound passkey may sign.
func (d *PrincipalDoc) Allowed() []string {
	if len(d.AllowedTypes) == 0 {
		return DefaultAllowedTypes
	}
	return d.AllowedTypes
}

// Grantee names the agent a grant is made to.
type Grantee struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
}

// Grant is what CONFIRM and DELEGATE share.
type Grant struct {
	Grantee    Grantee          `json:"grantee"`
	Scope      scope.Scope      `json:"scope"`
	Limits     map[string]int64 `json:"limits,omitempty"`
	TTLSeconds int64            `json:"ttl_seconds"`
	Revocable  bool             `json:"revocable"`
	ScopeHash  string           `json:"scope_hash"`
	// Approvals are the grant's approval rules (DESIGN §7), sorted by
	// rule_id; nil for none.
	Approvals []scope.Rule `json:"approvals,omitempty"`
}

// Risk levels of a CONFIRM.
var RiskLevels = []string{"low", "medium", "high"}

// ConfirmDoc is a principal granting an agent bounded authority (depth 1).
type ConfirmDoc struct {
	Header
	ConfirmID string `json:"confirm_id"`
	Grant
	RiskLevel string `json:"risk_level,omitempty"`
}

// DelegateDoc hands a sub-agent a proper part of its signer's grant.
type DelegateDoc struct {
	Header
	DelegationID    string `json:"delegation_id"`
	ParentRef       string `json:"parent_ref"`
	ParentScopeHash string `json:"parent_scope_hash"`
	Grant
}

// RevokeDoc ends a grant and everything below it.
type RevokeDoc struct {
	Header
	RevokeID  string `json:"revoke_id"`
	Workflow  string `json:"workflow_id"`
	TargetRef string `json:"target_ref"`
	Reason    string `json:"reason"`
}

// Receipt results.
const (
	ResultPending = "pending"
	ResultSuccess = "success"
	ResultFailure = "failure"
	ResultPartial = "partial"
)

// ReceiptDoc is the gate before an irreversible step (result "pending") or
// the record of what happened (any other result).
type ReceiptDoc struct {
	Header
	ReceiptID        string           `json:"receipt_id"`
	Workflow         string           `json:"workflow_id"`
	StepID           string           `json:"step_id"`
	Action           string           `json:"action"`
	Target           string           `json:"target"`
	AuthorizationRef string           `json:"authorization_ref"`
	Result           string           `json:"result"`
	ScopeHash        string           `json:"scope_hash"`
	Reserve          map[string]int64 `json:"reserve,omitempty"` // pending only
	// ParamsSHA256 is the lowercase hex SHA-256 of the JCS of the exact
	// call a pending receipt gates (a tool call's arguments), shown to
	// approvers and recomputed by the runtime before it runs an approved
	// step (DESIGN §2, §7). Pending only, optional.
	ParamsSHA256 string            `json:"params_sha256,omitempty"`
	Consumed     map[string]int64  `json:"consumed,omitempty"`    // outcome only
	PendingRef   string            `json:"pending_ref,omitempty"` // outcome only
	SideEffects  map[string]string `json:"side_effects,omitempty"`
	EvidenceRefs []string          `json:"evidence_refs,omitempty"`
	Error        string            `json:"error,omitempty"` // outcome only
}

// IsPending reports whether the receipt is the gate before a step.
func (r *ReceiptDoc) IsPending() bool { return r.Result == ResultPending }

// Stop scopes and takeover modes.
const (
	StopStep  = "step"
	StopChain = "chain"

	TakeoverHuman    = "human"
	TakeoverPause    = "pause"
	TakeoverDelegate = "delegate_to_other_agent"
)

// StopDoc halts a step (and the steps below it) or a whole workflow.
type StopDoc struct {
	Header
	RequestID    string `json:"request_id"`
	Workflow     string `json:"workflow_id"`
	StopScope    string `json:"stop_scope"`
	StepID       string `json:"step_id,omitempty"` // step scope only
	TakeoverMode string `json:"takeover_mode"`
	TakeoverTo   string `json:"takeover_to,omitempty"` // delegate_to_other_agent only
	Reason       string `json:"reason"`
}

// ResumeDoc lifts exactly one STOP.
type ResumeDoc struct {
	Header
	ResumeID string `json:"resume_id"`
	Workflow string `json:"workflow_id"`
	StopRef  string `json:"stop_ref"`
}

// Approval decisions.
const (
	DecisionApprove = "approve"
	DecisionReject  = "reject"
)

// ApprovalDoc is a principal's yes or no to one held pending RECEIPT
// (DESIGN §2, §7): it names the receipt and the SHA-256 of that receipt's
// payload bytes, so it answers those exact bytes and nothing else.
type ApprovalDoc struct {
	Header
	ApprovalID    string `json:"approval_id"`
	Workflow      string `json:"workflow_id"`
	ReceiptRef    string `json:"receipt_ref"`
	ReceiptSHA256 string `json:"receipt_sha256"`
	Decision      string `json:"decision"`
	Reason        string `json:"reason,omitempty"`
}

// DenialDoc records a blocked submission; the log key signs it.
type DenialDoc struct {
	Header
	DenialID string         `json:"denial_id"`
	Envelope *sign.Envelope `json:"envelope,omitempty"` // omitted if the leaf would be too large
	// EnvelopeSize is the length of the refused envelope's canonical JSON,
	// given when, and only when, the envelope is left out, so that a
	// verifier can tell it would not have fit (DESIGN §6).
	EnvelopeSize   int64  `json:"envelope_size,omitempty"`
	EnvelopeSHA256 string `json:"envelope_sha256"`
	SignerKeyID    string `json:"signer_keyid"`
	StatementType  Kind   `json:"statement_type"`
	StatementID    string `json:"statement_id,omitempty"` // absent when the payload could not be read
	Workflow       string `json:"workflow_id,omitempty"`  // only when the signer holds or issued a grant in it
	ReasonCode     string `json:"reason_code"`
	Reason         string `json:"reason"`
}

func (d *GenesisDoc) ID() string   { return d.GenesisID }
func (d *PrincipalDoc) ID() string { return d.PrincipalID }
func (d *ConfirmDoc) ID() string   { return d.ConfirmID }
func (d *DelegateDoc) ID() string  { return d.DelegationID }
func (d *RevokeDoc) ID() string    { return d.RevokeID }
func (d *ReceiptDoc) ID() string   { return d.ReceiptID }
func (d *StopDoc) ID() string      { return d.RequestID }
func (d *ResumeDoc) ID() string    { return d.ResumeID }
func (d *DenialDoc) ID() string    { return d.DenialID }
func (d *ApprovalDoc) ID() string  { return d.ApprovalID }

func (d *GenesisDoc) WorkflowID() string   { return "" }
func (d *PrincipalDoc) WorkflowID() string { return "" }
func (d *ConfirmDoc) WorkflowID() string   { return d.Scope.WorkflowID }
func (d *DelegateDoc) WorkflowID() string  { return d.Scope.WorkflowID }
func (d *RevokeDoc) WorkflowID() string    { return d.Workflow }
func (d *ReceiptDoc) WorkflowID() string   { return d.Workflow }
func (d *StopDoc) WorkflowID() string      { return d.Workflow }
func (d *ResumeDoc) WorkflowID() string    { return d.Workflow }
func (d *DenialDoc) WorkflowID() string    { return d.Workflow }
func (d *ApprovalDoc) WorkflowID() string  { return d.Workflow }

// New returns an empty statement of kind k, ready to be decoded into.
func New(k Kind) Statement {
	switch k {
	case Genesis:
		return &GenesisDoc{}
	case Principal:
		return &PrincipalDoc{}
	case Confirm:
		return &ConfirmDoc{}
	case Delegate:
		return &DelegateDoc{}
	case Revoke:
		return &RevokeDoc{}
	case Receipt:
		return &ReceiptDoc{}
	case Stop:
		return &StopDoc{}
	case Resume:
		return &ResumeDoc{}
	case Approval:
		return &ApprovalDoc{}
	case Denial:
		return &DenialDoc{}
	}
	return nil
}
