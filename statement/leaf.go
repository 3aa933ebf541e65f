package statement

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/custodylog/custody/canon"
)

// MaxLeafSize is the largest leaf the log holds: tlog-tiles entry bundles
// prefix each entry with a uint16 length (DESIGN §5).
const MaxLeafSize = 65535

// LeafOverhead bounds the bytes a leaf adds around its envelope:
// {"envelope":…,"logged_at":"<≤30>","prev_in_workflow":<≤20>,"trust_head":<≤20>}.
// The ledger refuses a submission whose canonical envelope plus
// LeafOverhead exceeds MaxLeafSize (too_large), and leaves a denied
// envelope out of its DENIAL exactly when the DENIAL's own envelope with it
// inside plus LeafOverhead would exceed MaxLeafSize; the verifier checks
// the same sums (DESIGN §4, §6), so both must use this one constant.
const LeafOverhead = 128

// Leaf is what the Merkle tree hashes: a signed envelope with the ledger's
// acceptance time and the two back-links of DESIGN §5.
type Leaf struct {
	// Envelope is the canonical JSON of the DSSE envelope.
	Envelope canon.RawJSON `json:"envelope"`
	// LoggedAt is the ledger's acceptance time, RFC 3339 UTC, with as many
	// fractional digits as needed and no trailing zeros.
	LoggedAt string `json:"logged_at"`
	// PrevInWorkflow is the index of the previous leaf of the same workflow
	// (or, for GENESIS/PRINCIPAL, of the trust chain); nil for the first.
	PrevInWorkflow *uint64 `json:"prev_in_workflow,omitempty"`
	// TrustHead is the index of the latest GENESIS/PRINCIPAL leaf before
	// this one (0 for GENESIS itself).
	TrustHead uint64 `json:"trust_head"`
}

// FormatLoggedAt is the one spelling of an acceptance time.
func FormatLoggedAt(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseLoggedAt reads an acceptance time, rejecting every other spelling.
func ParseLoggedAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !strings.HasSuffix(s, "Z") || FormatLoggedAt(t) != s {
		return time.Time{}, fmt.Errorf("logged_at %q is not RFC 3339 UTC without trailing zeros", s)
	}
	return t, nil
}

// MarshalLeaf returns the canonical bytes of l, refusing leaves over
// MaxLeafSize.
func MarshalLeaf(l *Leaf) ([]byte, error) {
	b, ok := appendLeaf(make([]byte, 0, len(l.Envelope)+len(l.LoggedAt)+leafFraming), l)
	if !ok {
		var err error
		if b, err = canon.Marshal(l); err != nil {
			return nil, err
		}
	}
	if len(b) > MaxLeafSize {
		return nil, fmt.Errorf("leaf of %d bytes exceeds the %d-byte limit", len(b), MaxLeafSize)
	}
	return b, nil
}

// ParseLeaf reads a leaf: canonical, closed schema, valid acceptance time.
func ParseLeaf(b []byte) (*Leaf, time.Time, error) {
	if len(b) > MaxLeafSize {
		return nil, time.Time{}, fmt.Errorf("leaf of %d bytes exceeds the %d-byte limit", len(b), MaxLeafSize)
	}
	var l Leaf
	if err := canon.Unmarshal(b, &l); err != nil {
		return nil, time.Time{}, fmt.Errorf("leaf: %w", err)
	}
	t, err := ParseLoggedAt(l.LoggedAt)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("leaf: %w", err)
	}
	return &l, t, nil
}

// leafFraming bounds what a leaf adds around its envelope and logged_at:
// keys, quotes, commas and two indexes of at most 16 digits.
const leafFraming = len(`{"envelope":,"logged_at":"","prev_in_workflow":,"trust_head":}`) + 2*16

// appendLeaf appends the canonical bytes of l exactly as canon.Marshal
// writes them, without reflection; ok is false where Marshal would fail (an
// empty envelope, logged_at not valid UTF-8, an index above 2^53-1), and
// the caller must let Marshal say why.
func appendLeaf(b []byte, l *Leaf) (_ []byte, ok bool) {
	if len(l.Envelope) == 0 || l.TrustHead > canon.MaxSafeInteger ||
		(l.PrevInWorkflow != nil && *l.PrevInWorkflow > canon.MaxSafeInteger) {
		return b, false
	}
	b = append(b, `{"envelope":`...)
	b = append(b, l.Envelope...)
	b = append(b, `,"logged_at":`...)
	if b, ok = canon.AppendString(b, l.LoggedAt); !ok {
		return b, false
	}
	if l.PrevInWorkflow != nil {
		b = append(b, `,"prev_in_workflow":`...)
		b = strconv.AppendUint(b, *l.PrevInWorkflow, 10)
	}
	b = append(b, `,"trust_head":`...)
	b = strconv.AppendUint(b, l.TrustHead, 10)
	return append(b, '}'), true
}
