package authority

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// Store is where state records live between batches. Load returns nil and
// no error for a record that does not exist. Implementations: the ledger's
// Badger store and MemStore.
type Store interface {
	Load(key string) ([]byte, error)
}

// MemStore is a Store held in memory, used by the verifier and by replay.
type MemStore map[string][]byte

// Load implements Store.
func (m MemStore) Load(key string) ([]byte, error) { return m[key], nil }

// Roles a key can be bound in (DESIGN §1, Identity).
const (
	RoleAdmin     = "admin"
	RoleLog       = "log"
	RolePrincipal = "principal"
	RoleAgent     = "agent"
)

// LogSigns reports whether a key bound in role is one the log itself signs
// with (DENIALs, checkpoints). Such a key never signs a submission: the
// engine refuses it at step 2, as it refuses the checkpoint keys, which the
// log does not bind, that its caller names (Engine.RefuseKeys).
func LogSigns(role string) bool { return role == RoleLog }

// Meta holds the log's parameters from GENESIS and the trust chain head.
type Meta struct {
	Origin       string `json:"origin"`
	AdminKeyID   string `json:"admin_keyid"`
	LogKeyID     string `json:"log_keyid"`
	MaxDepth     int64  `json:"max_depth"`
	ClockSkew    int64  `json:"clock_skew_seconds"`
	MaxTTL       int64  `json:"max_ttl_seconds"`
	TrustHead    uint64 `json:"trust_head"`     // latest GENESIS/PRINCIPAL leaf
	Size         uint64 `json:"size"`           // leaves decided so far
	LastLoggedAt string `json:"last_logged_at"` // never goes backwards
}

// KeyRec is a bound key.
type KeyRec struct {
	Role      string `json:"role"`
	Name      string `json:"name"`
	PublicKey string `json:"public_key"` // base64 raw (an Ed25519 key) or SPKI DER (a passkey)
	LastSeq   uint64 `json:"last_seq"`
	// BoundAt is the index of the leaf that bound the key: an approver
	// enrolled after a receipt's trust_head does not count (DESIGN §7).
	BoundAt   uint64 `json:"bound_at,omitempty"`
	Retired   bool   `json:"retired,omitempty"`    // principals, and DENIAL keys rotated out
	RetiredAt string `json:"retired_at,omitempty"` // logged_at of the retirement
	// A passkey (DESIGN §1): its key type, relying party, origins and the
	// statement kinds it may sign. Absent for an Ed25519 key.
	KeyType      string   `json:"key_type,omitempty"`
	RPID         string   `json:"rp_id,omitempty"`
	Origins      []string `json:"origins,omitempty"`
	AllowedTypes []string `json:"allowed_types,omitempty"`
}

// IsPasskey reports whether the bound key is a passkey.
func (k *KeyRec) IsPasskey() bool { return k.KeyType != "" }

// SigningKey decodes the bound key for signature checks. It passed its
// checks when it was bound, so it is only decoded here.
func (k *KeyRec) SigningKey() (sign.Key, bool) {
	if k.IsPasskey() {
		pk, err := sign.NewPasskey(k.KeyType, k.PublicKey, k.RPID, k.Origins)
		if err != nil {
			return sign.Key{}, false
		}
		return sign.Key{Passkey: pk}, true
	}
	pub := boundKey(k.PublicKey)
	return sign.Key{Ed25519: pub}, pub != nil
}

// MaySign reports whether the key may sign statements of kind: always for
// an Ed25519 key; for a passkey, when kind is in its allowed_types.
func (k *KeyRec) MaySign(kind statement.Kind) bool {
	return !k.IsPasskey() || slices.Contains(k.AllowedTypes, string(kind))
}

// IDRec records that an id is taken, by which kind, at which index.
type IDRec struct {
	Kind  string `json:"kind"`
	Index uint64 `json:"index"`
}

// GrantRec is an accepted CONFIRM or DELEGATE.
type GrantRec struct {
	ID          string           `json:"id"`
	Kind        string           `json:"kind"`
	Index       uint64           `json:"index"`
	Workflow    string           `json:"workflow"`
	Parent      string           `json:"parent,omitempty"`
	Depth       int64            `json:"depth"`
	IssuerKey   string           `json:"issuer_keyid"`
	GranteeKey  string           `json:"grantee_keyid"`
	GranteeName string           `json:"grantee_name"`
	RootKey     string           `json:"root_keyid"` // the principal of the CONFIRM at the top
	Descriptor  scope.Descriptor `json:"descriptor"`
	Revocable   bool             `json:"revocable"`
	ScopeHash   string           `json:"scope_hash"`
	Revoked     bool             `json:"revoked,omitempty"`
	RevokedAt   string           `json:"revoked_at,omitempty"`
	RevokedBy   string           `json:"revoked_by,omitempty"` // revoke_id
	Spent       map[string]int64 `json:"spent,omitempty"`      // per limit key, this grant and below
	// NewerHeld and OlderHeld link the grants its grantee holds in the
	// workflow, newest first (KeyWorkflowRec.Newest heads the list).
	// OffHeld is set once its own REVOKE has taken it off the list.
	NewerHeld string `json:"newer_held,omitempty"`
	OlderHeld string `json:"older_held,omitempty"`
	OffHeld   bool   `json:"off_held,omitempty"`
	// OnHold lists the receipts held for approval under this grant or
	// below it whose reservations it still counts (grants with limits
	// only; at most MaxOnHold).
	OnHold []string `json:"on_hold,omitempty"`
}

// expires is the grant's expiry instant.
func (g *GrantRec) expires() time.Time {
	t, _ := time.Parse(scope.TimeLayout, g.Descriptor.ExpiresAt)
	return t
}

// WorkflowRec is a workflow: its owner and where its back-link chain ends.
// It is written for every leaf of the workflow, so it holds nothing that
// grows with the workflow (DESIGN §4, Bounded cost).
type WorkflowRec struct {
	Owner string `json:"owner_keyid"`
	Last  uint64 `json:"last"`
	// StepStops counts the step STOPs in force, so that a receipt in a
	// workflow with none reads no step list.
	StepStops int64 `json:"step_stops,omitempty"`
	// LastStop is the index of the latest STOP accepted in the workflow,
	// lifted or not, so that a held receipt newer than it reads no STOP
	// marks (StopMarkRec).
	LastStop uint64 `json:"last_stop,omitempty"`
}

// StopRec is an accepted STOP.
type StopRec struct {
	ID        string `json:"id"`
	Index     uint64 `json:"index"`
	Workflow  string `json:"workflow"`
	Scope     string `json:"scope"`
	Step      string `json:"step,omitempty"`
	SignerKey string `json:"signer_keyid"`
	Role      string `json:"role"` // admin, owner or grantee: who may lift it
	Resumed   bool   `json:"resumed,omitempty"`
	ResumedBy string `json:"resumed_by,omitempty"`
	// Prev and Next link the STOPs in force on the same list (the chain,
	// or one step, of one workflow) in log order; see StopListRec.
	Prev string `json:"prev,omitempty"`
	Next string `json:"next,omitempty"`
}

// StopListRec heads the STOPs in force on one scope of a workflow: its
// chain, or one step. A decision reads the first; a RESUME unlinks its
// STOP from anywhere in the list. Record key: stopListKey.
type StopListRec struct {
	First string `json:"first,omitempty"`
	Last  string `json:"last,omitempty"`
}

// StopByRec is the STOP one key has in force on one scope of a workflow
// (ID "" once lifted): a second STOP there changes nothing
// (already_stopped). Record key: stopByKey.
type StopByRec struct {
	ID string `json:"id,omitempty"`
}

// PendingRec is an accepted pending RECEIPT.
type PendingRec struct {
	ID        string           `json:"id"`
	Index     uint64           `json:"index"`
	SignerKey string           `json:"signer_keyid"`
	Workflow  string           `json:"workflow"`
	Grant     string           `json:"grant"`
	Step      string           `json:"step"`
	Action    string           `json:"action"`
	Target    string           `json:"target"`
	Reserve   map[string]int64 `json:"reserve,omitempty"`
	Outcome   string           `json:"outcome,omitempty"` // receipt_id of the outcome once closed
	Overrun   bool             `json:"overrun,omitempty"` // consumed above reserve
	// Hold is set when an approval rule held the receipt (DESIGN §7).
	Hold *HoldRec `json:"hold,omitempty"`
}

// KeyWorkflowRec is what one key holds or issued in one workflow.
type KeyWorkflowRec struct {
	Held   int64 `json:"held,omitempty"` // grants ever made to the key
	Issued bool  `json:"issued,omitempty"`
	// Newest is the newest held grant not revoked by its own REVOKE;
	// older ones follow GrantRec.OlderHeld.
	Newest string `json:"newest,omitempty"`
}

// HintRec lets a walk of a key's held grants jump from a dead grant to
// the next grant older than it that was live when the hint was written
// (Next "" : none). Hints are a cache, not state: a decision is the same
// with or without them, replay does not reproduce them, and they are
// neither compared nor emitted by Dirty (see DirtyHints, IsHint). Record
// key: hintKey.
type HintRec struct {
	Next string `json:"next"`
}

// hintKey is the record key of a dead grant's hint.
func hintKey(grantID string) string { return prefHint + grantID }

// IsHint reports whether a record key names a hint, which stored state
// holds but a replay of the log does not derive.
func IsHint(key string) bool { return strings.HasPrefix(key, prefHint) }

// FormatRec names the format of the state records, so that a build never
// reads records written in another layout as if they were its own.
type FormatRec struct {
	Version int `json:"version"`
}

// StateFormat is the format of the state records this build writes.
// Format 2 (DESIGN version 3) keeps STOPs in force and held grants as
// linked records instead of lists inside the workflow and key records.
const StateFormat = 2

// Record key prefixes. Identifiers may contain '/', key ids never do.
const (
	keyMeta    = "meta"
	prefKey    = "key/"
	prefName   = "name/"
	prefID     = "id/"
	prefGrant  = "grant/"
	prefWF     = "wf/"
	prefStop   = "stop/"
	prefPend   = "pending/"
	prefKeyWF  = "keywf/"
	prefStopIn = "stopin/"
	prefStopBy = "stopby/"
	keyFormat  = "format"
	prefHint   = "hint/"
	prefixList = "meta format key/ name/ id/ grant/ wf/ stop/ pending/ keywf/ stopin/ stopby/ wfappr/ holdlist stopmark/"
)

// stopListKey is the record key of the STOPs in force on a workflow's
// chain (step "") or on one step. Identifiers never contain '#'.
func stopListKey(wf, step string) string { return prefStopIn + wf + "#" + step }

// stopByKey is the record key of the STOP a key has in force on a
// workflow's chain (step "") or on one step. Key ids never contain '/'.
func stopByKey(keyID, wf, step string) string { return prefStopBy + keyID + "/" + wf + "#" + step }

// CheckStateVersion reports an error if store holds state records of a
// format this build does not read: a data folder written before DESIGN
// version 3 keeps STOPs and held grants as lists, which this build would
// misread. A store with no log yet is fine.
func CheckStateVersion(store Store) error {
	meta, err := store.Load(keyMeta)
	if err != nil || meta == nil {
		return err
	}
	v := 1 // format 1 had no format record
	raw, err := store.Load(keyFormat)
	if err != nil {
		return err
	}
	if raw != nil {
		var f FormatRec
		if err := json.Unmarshal(raw, &f); err != nil {
			return fmt.Errorf("state format record: %w", err)
		}
		v = f.Version
	}
	if v != StateFormat {
		return fmt.Errorf("the authority state is in format %d, and this build reads format %d only (DESIGN version 3 changed how STOPs and held grants are kept); keep serving it with the build that wrote it, and start new logs with this one (docs/DEPLOY.md)", v, StateFormat)
	}
	return nil
}

// state is the engine's cache over a Store.
type state struct {
	store Store
	cache map[string]any // decoded records; nil value = known absent
	dirty map[string]bool
	err   error // first Store failure; the engine refuses to decide after one
	// journal, when not nil, records the first prior value of every record
	// put, so that a dry run can be undone.
	journal map[string]journalEntry
	spare   map[string]journalEntry // an empty journal to reuse
}

// startJournal starts journalling with an empty journal.
func (st *state) startJournal() {
	if st.spare == nil {
		st.spare = map[string]journalEntry{}
	}
	st.journal, st.spare = st.spare, nil
}

// stopJournal stops journalling and keeps the journal, emptied, for reuse.
func (st *state) stopJournal() {
	if st.journal != nil && len(st.journal) <= 64 {
		clear(st.journal)
		st.spare = st.journal
	}
	st.journal = nil
}

type journalEntry struct {
	value   any
	cached  bool
	wasDirt bool
}

func newState(s Store) *state {
	return &state{store: s, cache: map[string]any{}, dirty: map[string]bool{}}
}

func get[T any](st *state, key string) *T {
	if v, ok := st.cache[key]; ok {
		if v == nil {
			return nil
		}
		return v.(*T)
	}
	raw, err := st.store.Load(key)
	if err != nil {
		if st.err == nil {
			st.err = fmt.Errorf("loading state record %q: %w", key, err)
		}
		return nil
	}
	if raw == nil {
		st.cache[key] = nil
		return nil
	}
	rec := new(T)
	if err := json.Unmarshal(raw, rec); err != nil {
		if st.err == nil {
			st.err = fmt.Errorf("decoding state record %q: %w", key, err)
		}
		return nil
	}
	st.cache[key] = rec
	return rec
}

func put[T any](st *state, key string, rec *T) {
	if st.journal != nil {
		if _, seen := st.journal[key]; !seen {
			v, cached := st.cache[key]
			st.journal[key] = journalEntry{value: v, cached: cached, wasDirt: st.dirty[key]}
		}
	}
	st.cache[key] = rec
	st.dirty[key] = true
}

// undo restores every record the journal saw and stops journalling.
func (st *state) undo() {
	for k, j := range st.journal {
		if j.cached {
			st.cache[k] = j.value
		} else {
			delete(st.cache, k)
		}
		if j.wasDirt {
			st.dirty[k] = true
		} else {
			delete(st.dirty, k)
		}
	}
	st.stopJournal()
}

// encode is the stored form of a record.
func encode(rec any) []byte {
	if b, ok := appendRecord(make([]byte, 0, 256), rec); ok {
		return b // the same bytes (encode.go)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		panic(fmt.Sprintf("authority: encoding %T: %v", rec, err)) // records are plain data; cannot fail
	}
	return b
}

// dirtyKeys lists changed records in a fixed order.
func (st *state) dirtyKeys() []string {
	keys := make([]string, 0, len(st.dirty))
	for k := range st.dirty {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// KeyRecordKey is the record key of a key binding, for stores that read
// bindings directly (the ledger's signature workers).
func KeyRecordKey(keyID string) string { return prefKey + keyID }

// IDRecordKey is the record key of a statement id.
func IDRecordKey(id string) string { return prefID + id }

// WorkflowRecordKey is the record key of a workflow.
func WorkflowRecordKey(id string) string { return prefWF + id }

// RecordPrefixes lists the prefixes of every record kind, for tools that
// compare stored state with a replay.
func RecordPrefixes() []string { return strings.Fields(prefixList) }
