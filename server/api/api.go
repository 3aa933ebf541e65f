// Package api holds the JSON documents and paths of custody's HTTP API,
// shared by the server (package server) and its Go client (package
// client). It has no behaviour and imports nothing of the ledger, so a
// runtime that only talks to a ledger over HTTP stays small.
//
// # Endpoints
//
//	POST /v1/entries                      one DSSE envelope → AppendResponse (200 accepted, 403 denied)
//	                                      or Error (400 refused, 413 too_large, 429 rate_limited, 503 overloaded)
//	GET  /v1/entries/{index}              Entry
//	GET  /v1/statements/{id}              Entry of a statement (or DENIAL) id
//	GET  /v1/proof/inclusion?index=&size= Inclusion
//	GET  /v1/proof/consistency?from=&to=  Consistency
//	GET  /v1/roots/{size}                 Root
//	GET  /v1/bundle/{id}[?workflow=1]     a custody-bundle/v1 (verify.Bundle) for a statement id
//	GET  /v1/bundle?index=N[&workflow=1][&format=tlog-proof]
//	GET  /v1/workflows/{id}[?after=N]     Workflow: its entries in log order
//	GET  /v1/workflows/{id}/events        text/event-stream of Entry, id = index; resumable
//	                                      with Last-Event-ID or ?after=N
//	GET  /v1/keys/{keyid}/seq             KeySeq
//	GET  /v1/log                          Log
//	GET  /checkpoint                      C2SP tlog-checkpoint (signed note), with the witness
//	                                      cosignatures gathered for it so far
//	GET  /v1/checkpoint/witnessed         the newest checkpoint that meets the witness quorum
//	     [?size=N[&wait=MS]]              (first waiting, up to MS, for one of at least N entries)
//	                                      (404 without a policy, or before one does)
//	GET  /tile/<L>/<N>[.p/<W>]            C2SP tlog-tiles hash tile
//	GET  /tile/entries/<N>[.p/<W>]        C2SP tlog-tiles entry bundle
//	GET  /healthz, /readyz, /metrics
//
// Errors are an Error document with a stable reason_code. Byte strings
// (leaves) are standard base64, as encoding/json writes []byte; hashes are
// standard base64 strings, as in checkpoints and bundles.
package api

import "encoding/json"

// Paths.
const (
	PathEntries     = "/v1/entries"
	PathBatch       = "/v1/entries/batch"
	PathStatements  = "/v1/statements/"
	PathInclusion   = "/v1/proof/inclusion"
	PathConsistency = "/v1/proof/consistency"
	PathRoots       = "/v1/roots/"
	PathBundle      = "/v1/bundle"
	PathWorkflows   = "/v1/workflows/"
	PathKeys        = "/v1/keys/"
	PathLog         = "/v1/log"
	PathCheckpoint  = "/checkpoint"
	PathWitnessed   = "/v1/checkpoint/witnessed"
)

// MaxBody is the largest request body the server reads: twice a leaf.
const MaxBody = 2 * 64 << 10

// Verdicts in an AppendResponse.
const (
	Accepted = "accepted"
	Denied   = "denied"
	// Held: a pending receipt an approval rule holds (DESIGN §7), answered
	// with HTTP 202. It is durably logged and charged; its step runs only
	// once people approve it.
	Held = "held"
)

// AppendResponse answers POST /v1/entries once the decision is durable and
// included under a signed checkpoint. For an accepted statement, Leaf is
// the leaf holding the submitted envelope; for a denial, the leaf of the
// DENIAL the log key signed (its envelope_sha256 names the submission).
// InclusionProof proves Leaf at Index under Checkpoint, so a client can
// check the answer with nothing but the log's verifier key.
type AppendResponse struct {
	Verdict     string   `json:"verdict"`
	Index       uint64   `json:"index"`
	DenialIndex *uint64  `json:"denial_index,omitempty"` // denials: the DENIAL's index (= Index)
	ReasonCode  string   `json:"reason_code,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Duplicate   bool     `json:"duplicate,omitempty"` // these exact bytes were decided before
	Notes       []string `json:"notes,omitempty"`
	// ExpiresAt and Rules are set for a held receipt: its deadline (RFC
	// 3339 UTC) and the approval rules it waits for.
	ExpiresAt      string     `json:"expires_at,omitempty"`
	Rules          []HoldRule `json:"rules,omitempty"`
	Leaf           []byte     `json:"leaf"`
	Checkpoint     string     `json:"checkpoint"`
	InclusionProof []string   `json:"inclusion_proof"`
}

// BatchRequest is the body of POST /v1/entries/batch: envelopes decided
// in this order.
type BatchRequest struct {
	Envelopes []json.RawMessage `json:"envelopes"`
}

// BatchResponse answers a batch: one answer per envelope, in order.
type BatchResponse struct {
	Answers []BatchAnswer `json:"answers"`
}

// BatchAnswer is what POST /v1/entries would have answered for one
// envelope of a batch: its HTTP status and its JSON body (an
// AppendResponse for 200 and 403, an Error otherwise).
type BatchAnswer struct {
	Status     int             `json:"status"`
	Body       json.RawMessage `json:"body"`
	RetryAfter string          `json:"retry_after,omitempty"`
}

// MaxBatch is the most envelopes in one batch, and MaxBatchBody the
// largest batch body.
const (
	MaxBatch     = 256
	MaxBatchBody = 16 << 20
)

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	ReasonCode string `json:"reason_code"`
	Reason     string `json:"reason"`
	// Leader is, on a not_leader answer, the URL of the server that
	// sequences the log (also in the Custody-Leader header), if known.
	Leader string `json:"leader,omitempty"`
}

// HeaderLeader names the header in which a server that does not
// sequence the log gives the URL of the one that does.
const HeaderLeader = "Custody-Leader"

// Reason codes the server adds to the ledger's (authority.Code).
const (
	CodeOverloaded  = "overloaded"   // 503: too many appends in flight, retry after Retry-After
	CodeUnavailable = "unavailable"  // 503: shutting down, the ledger is closed, or its database is away; nothing was acknowledged
	CodeNotLeader   = "not_leader"   // 503: this server does not sequence the log; send appends to Leader
	CodeDiskFull    = "disk_full"    // 503: the ledger's disk is nearly full; retry after Retry-After
	CodeNotFound    = "not_found"    // 404
	CodeBadRequest  = "bad_request"  // 400: a malformed parameter
	CodeInternal    = "internal"     // 500: storage failure; nothing was acknowledged
	CodeMethod      = "bad_method"   // 405
	CodeTooLarge    = "too_large"    // 413 (also a ledger refusal code)
	CodeRateLimited = "rate_limited" // 429 (also a ledger refusal code)
	// CodeWithdrawn (409), only in a batch answer: the statement's seq is
	// too high only because earlier statements of its key in the batch
	// were not accepted; it was not decided nor logged. Sign it again with
	// the seq the reason names (KeySeq) and send it again.
	CodeWithdrawn = "withdrawn"
	// CodeUnwitnessed (503): in witness finality mode, a pending RECEIPT
	// is logged but no checkpoint that includes it met the witness quorum
	// in time. Nothing was acknowledged: the step must not run. Sending
	// the same submission again returns its decision once witnessed.
	CodeUnwitnessed = "unwitnessed"
)

// Entry is one leaf of the log, decoded for reading. Leaf is the exact
// bytes the tree hashes; the other fields are read from it.
type Entry struct {
	Index          uint64          `json:"index"`
	LoggedAt       string          `json:"logged_at"`
	Kind           string          `json:"kind"`
	ID             string          `json:"id"`
	Actor          string          `json:"actor"`
	KeyID          string          `json:"key_id"`
	Seq            uint64          `json:"seq"`
	Workflow       string          `json:"workflow_id,omitempty"`
	PrevInWorkflow *uint64         `json:"prev_in_workflow,omitempty"`
	TrustHead      uint64          `json:"trust_head"`
	LeafHash       string          `json:"leaf_hash"`
	Leaf           []byte          `json:"leaf"`
	Statement      json.RawMessage `json:"statement"`
}

// Inclusion is an inclusion proof of Index in the tree of Size.
type Inclusion struct {
	Index      uint64   `json:"index"`
	Size       uint64   `json:"size"`
	LeafHash   string   `json:"leaf_hash"`
	Root       string   `json:"root"`
	Proof      []string `json:"proof"`
	Checkpoint string   `json:"checkpoint,omitempty"` // when Size is the latest checkpoint's
}

// Consistency proves the tree of From is a prefix of the tree of To.
type Consistency struct {
	From     uint64   `json:"from"`
	To       uint64   `json:"to"`
	FromRoot string   `json:"from_root"`
	ToRoot   string   `json:"to_root"`
	Proof    []string `json:"proof"`
}

// Root is the root hash of the tree of Size.
type Root struct {
	Size uint64 `json:"size"`
	Root string `json:"root"`
}

// Workflow lists a workflow's entries in log order. When More is set the
// list was cut at the server's page size: ask again with ?after= the last
// index.
type Workflow struct {
	Workflow string  `json:"workflow_id"`
	Entries  []Entry `json:"entries"`
	More     bool    `json:"more,omitempty"`
}

// KeySeq is what the log binds to a key, and the seq its next statement
// must carry (1 for a key the log does not know).
type KeySeq struct {
	KeyID   string `json:"key_id"`
	NextSeq uint64 `json:"next_seq"`
	Bound   bool   `json:"bound"`
	Name    string `json:"name,omitempty"`
	Role    string `json:"role,omitempty"`
	Retired bool   `json:"retired,omitempty"`
}

// Log describes the log: its origin, checkpoint verifier key and head.
// A client should get the verifier key out of band; this is for people
// and for trust on first use.
type Log struct {
	Origin      string `json:"origin"`
	VerifierKey string `json:"verifier_key"`
	Size        uint64 `json:"size"`
	Root        string `json:"root"`
	Checkpoint  string `json:"checkpoint"`
}

// Event names on the events stream.
const (
	EventEntry = "entry"
	// EventResume is the last event of a stream the server cut because
	// its client fell behind; its data is a Resume. Reconnect with
	// Last-Event-ID (the event's id, Resume.After) to miss nothing.
	EventResume = "resume"
)

// Resume is the data of a resume event.
type Resume struct {
	After  uint64 `json:"after"`
	Reason string `json:"reason"`
}

// HoldRule is an approval rule a held receipt waits for: the grant that
// carries it, its id, who may approve and how many must. ApprovedBy, in
// GET /v1/approvals, names who has so far.
type HoldRule struct {
	Grant      string   `json:"grant"`
	RuleID     string   `json:"rule_id"`
	Approvers  []string `json:"approvers"`
	Quorum     int64    `json:"quorum"`
	ApprovedBy []string `json:"approved_by,omitempty"`
}

// Paths of the approval endpoints (also under /logs/NAME/).
const (
	PathApprovals = "/v1/approvals"
	// MaxApprovalWait bounds the wait=MS of GET /v1/approvals and GET
	// /v1/approvals/{receipt_id}.
	MaxApprovalWait = 60000
)

// HeldList answers GET /v1/approvals: the receipts held now.
type HeldList struct {
	Held []HeldReceipt `json:"held"`
}

// HeldReceipt is one held receipt and what it needs (DESIGN §7, Who sees
// what): the exact statement (free text in it is the agent's), the rules
// and who has approved under each, the chain of grants above it, and its
// deadline.
type HeldReceipt struct {
	ReceiptID     string           `json:"receipt_id"`
	Index         uint64           `json:"index"`
	WorkflowID    string           `json:"workflow_id"`
	StepID        string           `json:"step_id"`
	Action        string           `json:"action"`
	Target        string           `json:"target"`
	Reserve       map[string]int64 `json:"reserve,omitempty"`
	ParamsSHA256  string           `json:"params_sha256,omitempty"`
	ReceiptSHA256 string           `json:"receipt_sha256"`
	Actor         string           `json:"actor"`
	ExpiresAt     string           `json:"expires_at"`
	Rules         []HoldRule       `json:"rules"`
	Chain         []string         `json:"chain"`
	Statement     json.RawMessage  `json:"statement"`
}

// ApprovalState answers GET /v1/approvals/{receipt_id}: advisory only. A
// runtime never runs a step on it; it verifies the APPROVALs itself.
type ApprovalState struct {
	ReceiptID string         `json:"receipt_id"`
	Index     uint64         `json:"index"`
	State     string         `json:"state"` // held, approved, rejected, expired, closed
	ExpiresAt string         `json:"expires_at"`
	Approvals []ApprovalItem `json:"approvals,omitempty"`
	Reason    string         `json:"reason,omitempty"`
}

// ApprovalItem is one APPROVAL that answered a receipt.
type ApprovalItem struct {
	Index      uint64 `json:"index"`
	ApprovalID string `json:"approval_id"`
	Actor      string `json:"actor"`
	Decision   string `json:"decision"`
}

// WorkflowList is a page of GET /v1/workflows: the log's workflows, newest
// first. Total is how many the list holds; when NextBefore is set, ask
// again with ?before= it for the older ones.
type WorkflowList struct {
	Workflows  []WorkflowSummary `json:"workflows"`
	Total      uint64            `json:"total"`
	NextBefore uint64            `json:"next_before,omitempty"`
}

// WorkflowSummary is one workflow on the list, as the committed state has
// it: its owner (the principal of its first CONFIRM), the agents granted
// authority in it (the first eight; MoreAgents when there are others), its
// leaves, the index and time of its latest, its receipts held for approval
// now, the STOP in force on its chain and the step STOPs in force, and its
// violations (the DENIALs logged in it).
type WorkflowSummary struct {
	Workflow     string   `json:"workflow_id"`
	Position     uint64   `json:"position"`
	Owner        string   `json:"owner,omitempty"`
	OwnerKeyID   string   `json:"owner_keyid,omitempty"`
	Agents       []string `json:"agents"`
	MoreAgents   bool     `json:"more_agents,omitempty"`
	Entries      uint64   `json:"entries"`
	FirstIndex   uint64   `json:"first_index"`
	LastIndex    uint64   `json:"last_index"`
	LastActivity string   `json:"last_activity"`
	Held         int      `json:"held"`
	Stopped      bool     `json:"stopped"`
	StopID       string   `json:"stop_id,omitempty"`
	StepStops    int64    `json:"step_stops,omitempty"`
	Violations   uint64   `json:"violations"`
}

// Bounds of the workflow list, GET /v1/workflows (also under /logs/NAME/).
const (
	// DefaultWorkflowPage is the page of GET /v1/workflows without
	// ?limit=; MaxWorkflowPage the most one may ask for.
	DefaultWorkflowPage = 50
	MaxWorkflowPage     = 100
)
