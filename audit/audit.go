package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/witness"
)

// Finding checks.
const (
	CheckCheckpoint = "checkpoint" // signature, form, size
	CheckEntries    = "entries"    // an entry bundle missing or malformed
	CheckTile       = "tile"       // a stored hash tile differs from the recomputed one
	CheckRoot       = "root"       // the recomputed root differs from the checkpoint's
	CheckGenesis    = "genesis"    // GENESIS does not name the given log key
	CheckEnvelope   = "envelope"   // an envelope's signature or form (after the replay stopped)
	CheckState      = "state"      // stored state differs from the replay's
	CheckWitnesses  = "witnesses"  // the checkpoint does not meet the witness policy
	// Replay findings use the check authority.ReplayError names:
	// decision, denial, leaf, envelope, order, logged_at,
	// prev_in_workflow, trust_head.
)

// Finding is one thing wrong with the log.
type Finding struct {
	Check  string  `json:"check"`
	Index  *uint64 `json:"index,omitempty"` // the entry
	Path   string  `json:"path,omitempty"`  // the tile, or the state record
	Detail string  `json:"detail"`
}

func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Check)
	if f.Index != nil {
		fmt.Fprintf(&b, " at entry %d", *f.Index)
	}
	if f.Path != "" {
		fmt.Fprintf(&b, " (%s)", f.Path)
	}
	b.WriteString(": ")
	b.WriteString(f.Detail)
	return b.String()
}

// Report is the result of an audit.
type Report struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"checkpoint_size"`
	Root   string `json:"checkpoint_root"`
	// CheckpointVerified is true when the checkpoint's signature verified.
	CheckpointVerified bool   `json:"checkpoint_verified"`
	Entries            uint64 `json:"entries_read"`
	TilesChecked       int    `json:"tiles_checked"`
	RootChecked        bool   `json:"root_checked"`
	// Replayed is how many leaves were re-decided; Denials how many of
	// them were DENIALs whose reason was re-derived.
	Replayed uint64 `json:"decisions_replayed"`
	Denials  uint64 `json:"denials_rederived"`
	// ReplayStopped is the entry the replay stopped at, after a finding.
	ReplayStopped *uint64 `json:"replay_stopped_at,omitempty"`
	// EnvelopesOnly counts envelopes checked without the engine after the
	// replay stopped.
	EnvelopesOnly uint64 `json:"envelopes_checked_after_stop,omitempty"`
	// StateRecords is how many stored state records were compared (-1
	// when there was no stored state to compare).
	StateRecords int       `json:"state_records_compared"`
	Findings     []Finding `json:"findings"`
	// Flags are agent behaviour the ledger accepts and flags: outcomes
	// above their reserve, pending receipts with no outcome.
	Flags        []Finding `json:"flags,omitempty"`
	OpenPendings int       `json:"open_pending_receipts"`
	// Witnessed are the witnesses whose cosignatures on the checkpoint
	// verified, when a witness policy was given.
	Witnessed []witness.Cosignature `json:"witnessed,omitempty"`
	Seconds   float64               `json:"seconds"`
	Rate      float64               `json:"entries_per_second"`
}

// Clean reports whether the audit found nothing wrong.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

// Options configure Run.
type Options struct {
	// VerifierKey is the log's signed-note verifier key (required).
	VerifierKey string
	// Checkpoint, when not nil, is used instead of fetching "checkpoint"
	// (a ledger's committed head).
	Checkpoint []byte
	// State, when not nil, returns the authority state records the log
	// stored, to compare with the replay's (a local ledger).
	State func() (map[string][]byte, error)
	// Progress, when not nil, is called after each entry bundle with the
	// entries done and the total.
	Progress func(done, total uint64)
	// MaxFlags bounds the flags listed (default 100); all are counted.
	MaxFlags int
	// Policy, when set, is a witness policy the checkpoint must meet: its
	// quorum's valid cosignatures (Report.Witnessed names who cosigned).
	// When the fetched checkpoint does not, the newest witnessed one a
	// custody server serves (WitnessedPath) is audited instead.
	Policy *witness.Policy
}

// ErrUnusable wraps failures that stop an audit before it can start: an
// unreadable verifier key or no checkpoint to read.
var ErrUnusable = errors.New("audit: unusable input")

// Run audits the log f serves. It returns an error only when the audit
// cannot start or the context ends; everything wrong with the log is a
// Finding in the Report.
func Run(ctx context.Context, f Fetcher, o Options) (*Report, error) {
	start := time.Now()
	if o.MaxFlags <= 0 {
		o.MaxFlags = 100
	}
	ks, err := merkle.ParseKeySet(o.VerifierKey)
	if err != nil {
		return nil, fmt.Errorf("%w: verifier key: %v", ErrUnusable, err)
	}
	vkey, origin := ks.String(), ks.Origin()
	r := &Report{Origin: origin, StateRecords: -1, Findings: []Finding{}}

	cpText := o.Checkpoint
	if cpText == nil {
		if cpText, err = f.Fetch(ctx, "checkpoint"); err != nil {
			return nil, fmt.Errorf("%w: reading the checkpoint: %v", ErrUnusable, err)
		}
		if o.Policy != nil && !o.Policy.Evaluate(cpText).Satisfied {
			// The newest checkpoint may not have its cosignatures yet: a
			// custody server also serves the newest witnessed one.
			if w, err := f.Fetch(ctx, WitnessedPath); err == nil && o.Policy.Evaluate(w).Satisfied {
				cpText = w
			}
		}
	}
	cp, err := merkle.OpenCheckpoint(cpText, origin, vkey)
	if err != nil {
		r.add(Finding{Check: CheckCheckpoint, Detail: fmt.Sprintf("the checkpoint does not verify under the log key: %v", err)})
		// Keep going with what it claims: tiles and decisions can still
		// be checked against each other.
		if cp, err = parseUnverified(cpText, origin); err != nil {
			r.add(Finding{Check: CheckCheckpoint, Detail: fmt.Sprintf("the checkpoint cannot be read: %v; nothing more can be checked", err)})
			return r.finish(start), nil
		}
	} else {
		r.CheckpointVerified = true
	}
	if o.Policy != nil {
		ev := o.Policy.Evaluate(cpText)
		r.Witnessed = ev.Signed
		if !ev.Satisfied {
			r.add(Finding{Check: CheckWitnesses, Detail: "the checkpoint does not meet the witness policy: " + ev.Describe()})
		}
	}
	r.Size, r.Root = cp.Size, cp.Root.String()
	if cp.Size == 0 {
		r.add(Finding{Check: CheckCheckpoint, Detail: "the checkpoint is of the empty tree: a custody log starts with GENESIS"})
		return r.finish(start), nil
	}
	a := &auditor{r: r, o: o, size: cp.Size, origin: origin, logKeys: ks,
		store: authority.MemStore{}, keys: map[string]sign.Key{}}
	a.engine = authority.New(a.store)
	for _, pub := range ks.PublicKeys() { // what checkpoint keys sign is never a submission
		a.engine.RefuseKeys(sign.KeyID(pub))
	}

	// Stage 1 (its own goroutine): read entry bundles, hash the leaves,
	// rebuild the tree and compare every tile. Stage 2 (here): re-decide
	// every leaf. The stages meet on a small channel.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch, 4)
	tree := &treeChecker{f: f, size: cp.Size, root: cp.Root}
	treeDone := make(chan struct{})
	go func() {
		defer close(treeDone)
		tree.run(ctx, batches)
	}()
	for b := range batches {
		a.replayBatch(b)
		if o.Progress != nil {
			o.Progress(b.first+uint64(len(b.leaves)), cp.Size)
		}
	}
	<-treeDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.Findings = append(r.Findings, tree.findings...)
	r.TilesChecked, r.RootChecked, r.Entries = tree.tiles, tree.rootChecked, tree.entries
	a.finishReplay()
	sort.SliceStable(r.Findings, func(i, j int) bool { return idx(r.Findings[i].Index) < idx(r.Findings[j].Index) })
	return r.finish(start), nil
}

func idx(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func (r *Report) add(f Finding) { r.Findings = append(r.Findings, f) }

func (r *Report) finish(start time.Time) *Report {
	r.Seconds = time.Since(start).Seconds()
	if r.Seconds > 0 {
		r.Rate = float64(r.Entries) / r.Seconds
	}
	return r
}

func at(i uint64) *uint64 { return &i }

// batch is one entry bundle's leaves (nil leaves: the bundle is missing).
type batch struct {
	first  uint64
	leaves [][]byte
	count  int // leaves the bundle should hold
}

// treeChecker recomputes the tree from the leaves and compares it with the
// stored tiles and the checkpoint.
type treeChecker struct {
	f        Fetcher
	size     uint64
	root     merkle.Hash
	findings []Finding
	tiles    int
	entries  uint64
	broken   bool // a leaf is missing: the tree cannot be recomputed
	// rootChecked is true when the root was recomputed and compared.
	rootChecked bool
}

func (t *treeChecker) add(f Finding) { t.findings = append(t.findings, f) }

func (t *treeChecker) run(ctx context.Context, out chan<- batch) {
	defer close(out)
	b, _ := merkle.NewBuilder(merkle.NewEdge(), merkle.TileReaderFunc(func(uint64, uint64) ([]byte, error) {
		return nil, errors.New("unreachable: the tree starts empty")
	}))
	last := map[uint64]merkle.Tile{} // the rightmost partial tile per level
	hashes := make([]merkle.Hash, 0, merkle.TileWidth)
	for n := uint64(0); n*merkle.TileWidth < t.size; n++ {
		if ctx.Err() != nil {
			return
		}
		first := n * merkle.TileWidth
		width := int(min(t.size-first, merkle.TileWidth))
		path := merkle.EntriesPath(n, width)
		leaves, err := t.readBundle(ctx, path, n, width)
		if err != nil {
			t.add(Finding{Check: CheckEntries, Index: at(first), Path: path, Detail: err.Error()})
			t.broken = true
			select {
			case out <- batch{first: first, count: width}:
			case <-ctx.Done():
				return
			}
			continue
		}
		t.entries += uint64(len(leaves))
		if !t.broken {
			hashes = hashes[:0]
			for _, l := range leaves {
				hashes = append(hashes, merkle.LeafHash(l))
			}
			if err := b.AppendBatch(hashes); err != nil {
				t.add(Finding{Check: CheckTile, Index: at(first), Detail: fmt.Sprintf("rebuilding the tree: %v", err)})
				t.broken = true
			}
			for _, tile := range b.Flush() {
				if tile.Width() == merkle.TileWidth {
					t.compare(ctx, tile)
				} else {
					last[tile.Level] = tile
				}
			}
		}
		select {
		case out <- batch{first: first, leaves: leaves, count: width}:
		case <-ctx.Done():
			return
		}
	}
	if t.broken {
		t.add(Finding{Check: CheckRoot, Detail: "the root could not be recomputed: entries are missing"})
		return
	}
	// The partial tiles of the checkpoint's tree.
	for level := uint64(0); level*merkle.TileHeight < 64 && t.size>>(level*merkle.TileHeight) > 0; level++ {
		n := t.size >> (level * merkle.TileHeight)
		if w := int(n % merkle.TileWidth); w > 0 {
			tile, ok := last[level]
			if !ok || tile.Index != n/merkle.TileWidth || tile.Width() != w {
				t.add(Finding{Check: CheckTile, Path: merkle.TilePath(level, n/merkle.TileWidth, w), Detail: "internal: the recomputed partial tile is missing"})
				continue
			}
			t.compare(ctx, tile)
		}
	}
	t.rootChecked = true
	if got := b.Root(); got != t.root || b.Size() != t.size {
		t.add(Finding{Check: CheckRoot, Detail: fmt.Sprintf("the leaves hash to root %s at size %d, but the checkpoint says %s", got, b.Size(), t.root)})
	}
}

func (t *treeChecker) readBundle(ctx context.Context, path string, n uint64, width int) ([][]byte, error) {
	data, err := t.f.Fetch(ctx, path)
	exact := true
	if err != nil && width < merkle.TileWidth {
		// The partial bundle may be gone if the log has grown: the full
		// one starts with the same leaves.
		if full, ferr := t.f.Fetch(ctx, merkle.EntriesPath(n, merkle.TileWidth)); ferr == nil {
			data, err, exact = full, nil, false
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the entry bundle: %v", err)
	}
	leaves, err := merkle.DecodeEntryBundle(data)
	if err != nil {
		return nil, err
	}
	if len(leaves) < width || exact && len(leaves) != width {
		return nil, fmt.Errorf("the entry bundle holds %d entries, want %d", len(leaves), width)
	}
	return leaves[:width], nil
}

func (t *treeChecker) compare(ctx context.Context, tile merkle.Tile) {
	path := merkle.TilePath(tile.Level, tile.Index, tile.Width())
	t.tiles++
	stored, err := t.f.Fetch(ctx, path)
	if err != nil && tile.Width() < merkle.TileWidth {
		if full, ferr := t.f.Fetch(ctx, merkle.TilePath(tile.Level, tile.Index, merkle.TileWidth)); ferr == nil {
			stored, err = full[:min(len(full), len(tile.Data))], nil
		}
	}
	if err != nil {
		t.add(Finding{Check: CheckTile, Index: tileFirstLeaf(tile), Path: path, Detail: fmt.Sprintf("cannot read the stored tile: %v", err)})
		return
	}
	if bytes.Equal(stored, tile.Data) {
		return
	}
	if len(stored) != len(tile.Data) {
		t.add(Finding{Check: CheckTile, Index: tileFirstLeaf(tile), Path: path, Detail: fmt.Sprintf("the stored tile has %d bytes, the recomputed %d", len(stored), len(tile.Data))})
		return
	}
	for i := 0; i < tile.Width(); i++ {
		s, c := stored[i*merkle.HashSize:(i+1)*merkle.HashSize], tile.Data[i*merkle.HashSize:(i+1)*merkle.HashSize]
		if !bytes.Equal(s, c) {
			node := tile.Index*merkle.TileWidth + uint64(i)
			t.add(Finding{Check: CheckTile, Index: nodeFirstLeaf(tile.Level, node), Path: path,
				Detail: fmt.Sprintf("hash %d (tree level %d, node %d) is stored as %s, recomputed from the leaves as %s",
					i, tile.Level*merkle.TileHeight, node, merkle.Hash(s), merkle.Hash(c))})
			return // one finding per tile
		}
	}
}

// nodeFirstLeaf is the first leaf under a node of tile level k.
func nodeFirstLeaf(k, node uint64) *uint64 {
	if k*merkle.TileHeight >= 64 {
		return nil
	}
	return at(node << (k * merkle.TileHeight))
}

func tileFirstLeaf(t merkle.Tile) *uint64 { return nodeFirstLeaf(t.Level, t.Index*merkle.TileWidth) }

// auditor re-decides every leaf.
type auditor struct {
	r       *Report
	o       Options
	size    uint64
	origin  string
	logKeys *merkle.KeySet
	engine  *authority.Engine
	store   authority.MemStore
	// keys holds every key binding seen, so that envelopes can still be
	// checked after the replay stopped.
	keys    map[string]sign.Key
	stopped bool
	next    uint64 // the next index the replay expects
	flags   int
}

func (a *auditor) flag(f Finding) {
	if a.flags < a.o.MaxFlags {
		a.r.Flags = append(a.r.Flags, f)
	}
	a.flags++
}

func (a *auditor) replayBatch(b batch) {
	if b.leaves == nil {
		a.stop(b.first, Finding{Check: CheckEntries, Index: at(b.first),
			Detail: fmt.Sprintf("entries %d..%d are missing: the replay cannot continue past them", b.first, b.first+uint64(b.count)-1)}, false)
		a.next = b.first + uint64(b.count)
		return
	}
	for i, leaf := range b.leaves {
		index := b.first + uint64(i)
		if a.stopped {
			a.checkEnvelope(index, leaf)
			continue
		}
		d, err := a.engine.Replay(index, leaf)
		if err != nil {
			var re *authority.ReplayError
			f := Finding{Check: "replay", Index: at(index), Detail: err.Error()}
			if errors.As(err, &re) {
				f.Check, f.Detail = re.Check, re.Msg
			}
			a.stop(index, f, true)
			a.checkEnvelope(index, leaf)
			continue
		}
		a.r.Replayed++
		if d.Verdict == authority.Denied {
			a.r.Denials++
		}
		a.learn(index, d.Statement)
		for _, n := range d.Notes {
			check := "note"
			if strings.HasPrefix(n, "consumed ") {
				check = "overrun"
			}
			if strings.HasPrefix(n, "violation: ") {
				// An outcome of a held step not approved when it was
				// logged, or consuming above a rule it did not reserve
				// enough to meet (DESIGN §7).
				check, n = "approval", strings.TrimPrefix(n, "violation: ")
			}
			a.flag(Finding{Check: check, Index: at(index), Detail: n})
		}
	}
	if !a.stopped {
		a.engine.Dirty(func(k string, v []byte) { a.store[k] = v })
		a.engine.Committed()
	}
}

// stop records a finding that ends the replay.
func (a *auditor) stop(index uint64, f Finding, decision bool) {
	a.r.add(f)
	if a.stopped {
		return
	}
	a.stopped = true
	a.r.ReplayStopped = at(index)
	if decision {
		a.r.add(Finding{Check: "replay", Index: at(index), Detail: "the decision engine's state is unspecified after this finding: " +
			"decisions after it were not re-run; signatures were still checked against the keys bound so far"})
	}
}

// learn records the keys a statement binds, and checks GENESIS names the
// log key the audit was given.
func (a *auditor) learn(index uint64, st statement.Statement) {
	switch s := st.(type) {
	case *statement.GenesisDoc:
		if pub, err := sign.ParsePublicKey(s.AdminKey); err == nil {
			a.keys[sign.KeyID(pub)] = sign.Key{Ed25519: pub}
		}
		pub, err := s.LogPublicKey()
		if err != nil || !a.logKeys.Has(pub) || s.Log != a.origin {
			a.r.add(Finding{Check: CheckGenesis, Index: at(index), Detail: fmt.Sprintf("GENESIS names log %q with log_key %q; the audit was given the key of %q", s.Log, s.LogKey, a.origin)})
		}
		if err == nil {
			a.keys[sign.KeyID(pub)] = sign.Key{Ed25519: pub}
		}
	case *statement.PrincipalDoc:
		if s.IsPasskey() {
			// The same one check as the ledger's (sign.VerifyPasskey).
			if pk, err := sign.NewPasskey(s.KeyType, s.PublicKey, s.RPID, s.Origins); err == nil {
				a.keys[pk.KeyID()] = sign.Key{Passkey: pk}
			}
			return
		}
		a.bind(s.PublicKey)
	case *statement.ConfirmDoc:
		a.bind(s.Grantee.PublicKey)
	case *statement.DelegateDoc:
		a.bind(s.Grantee.PublicKey)
	}
}

func (a *auditor) bind(b64 string) {
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err == nil && len(raw) == ed25519.PublicKeySize {
		pub := ed25519.PublicKey(raw)
		a.keys[sign.KeyID(pub)] = sign.Key{Ed25519: pub}
	}
}

// checkEnvelope checks a leaf's form and signatures against the keys
// bound so far, for leaves after the replay stopped.
func (a *auditor) checkEnvelope(index uint64, raw []byte) {
	a.r.EnvelopesOnly++
	fail := func(format string, args ...any) {
		a.r.add(Finding{Check: CheckEnvelope, Index: at(index), Detail: fmt.Sprintf(format, args...)})
	}
	leaf, _, err := statement.ParseLeaf(raw)
	if err != nil {
		fail("%v", err)
		return
	}
	env, err := sign.ParseEnvelope(leaf.Envelope)
	if err != nil {
		fail("%v", err)
		return
	}
	if !a.verify(env, fail, "") {
		return
	}
	kind, _ := statement.KindOfPayloadType(env.PayloadType)
	st, err := statement.Parse(kind, env.Payload)
	if err != nil {
		fail("%s payload: %v", kind, err)
		return
	}
	if d, ok := st.(*statement.DenialDoc); ok && d.Envelope != nil {
		inner, err := sign.ParseEnvelopeValue(*d.Envelope)
		if err != nil {
			fail("the denied envelope: %v", err)
			return
		}
		a.verify(inner, fail, "the denied envelope: ")
	}
	a.learn(index, st)
}

func (a *auditor) verify(env *sign.Parsed, fail func(string, ...any), what string) bool {
	key, ok := a.keys[env.KeyID]
	if !ok {
		fail("%ssigned by key %s, which no earlier entry binds", what, short(env.KeyID))
		return false
	}
	if err := env.VerifyKey(key); err != nil {
		fail("%ssignature by key %s does not verify: %v", what, short(env.KeyID), err)
		return false
	}
	return true
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// finishReplay flags open pending receipts and compares stored state.
func (a *auditor) finishReplay() {
	if a.stopped {
		if a.o.State != nil {
			a.r.add(Finding{Check: CheckState, Detail: "the stored state was not compared: the replay stopped before the end of the log"})
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(a.store)) {
		if !strings.HasPrefix(k, "pending/") {
			continue
		}
		var p authority.PendingRec
		if json.Unmarshal(a.store[k], &p) == nil && p.Outcome == "" {
			a.r.OpenPendings++
			a.flag(Finding{Check: "open", Index: at(p.Index), Detail: fmt.Sprintf("pending receipt %s (%s → %s in workflow %s) has no outcome: in flight, or lost; its reserve stays charged",
				p.ID, p.Action, p.Target, p.Workflow)})
		}
	}
	if a.o.State == nil {
		return
	}
	stored, err := a.o.State()
	if err != nil {
		a.r.add(Finding{Check: CheckState, Detail: fmt.Sprintf("cannot read the stored state: %v", err)})
		return
	}
	a.r.StateRecords = len(stored)
	for _, k := range slices.Sorted(maps.Keys(a.store)) {
		s, ok := stored[k]
		switch {
		case !ok:
			a.r.add(Finding{Check: CheckState, Index: recordIndex(a.store[k]), Path: k, Detail: "the replay derives this record; the ledger has not stored it"})
		case !bytes.Equal(s, a.store[k]):
			a.r.add(Finding{Check: CheckState, Index: recordIndex(a.store[k]), Path: k,
				Detail: fmt.Sprintf("stored %s, the replay derives %s", clip(s), clip(a.store[k]))})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stored)) {
		if _, ok := a.store[k]; !ok {
			a.r.add(Finding{Check: CheckState, Path: k, Detail: fmt.Sprintf("the ledger stores %s, which no leaf implies", clip(stored[k]))})
		}
	}
}

// recordIndex is the entry a state record names, if it names one.
func recordIndex(v []byte) *uint64 {
	var r struct {
		Index *uint64 `json:"index"`
	}
	if json.Unmarshal(v, &r) == nil && r.Index != nil {
		return r.Index
	}
	return nil
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// parseUnverified reads a checkpoint's body without its signature, so an
// audit can go on checking tiles against what it claims.
func parseUnverified(text []byte, origin string) (merkle.Checkpoint, error) {
	body, _, ok := bytes.Cut(text, []byte("\n\n"))
	if !ok {
		return merkle.Checkpoint{}, errors.New("no signature block")
	}
	lines := strings.Split(string(body), "\n")
	if len(lines) < 3 || lines[0] != origin {
		return merkle.Checkpoint{}, fmt.Errorf("not a checkpoint of %q", origin)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil {
		return merkle.Checkpoint{}, fmt.Errorf("size: %v", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != merkle.HashSize {
		return merkle.Checkpoint{}, errors.New("root is not a base64 SHA-256 hash")
	}
	return merkle.Checkpoint{Origin: origin, Size: size, Root: merkle.Hash(root)}, nil
}
