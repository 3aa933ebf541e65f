package reliability

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/client"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
)

const (
	crashOrigin    = "reliability.test/custody"
	crashAgents    = 16 // concurrent writers, each one key appending in seq order
	crashWorkflows = 4  // agents share workflows, so back-links interleave
	// maxRoundAppends bounds one agent's appends in one round.
	maxRoundAppends = 20_000
	// firstAckTimeout bounds the wait for a round's first acknowledgement.
	firstAckTimeout = 2 * time.Minute
)

// crashAgent is one writer: a confirmed agent appending pending receipts
// and their outcomes, one after another, each with the next seq.
type crashAgent struct {
	name, wf, grant, hash string
	priv                  ed25519.PrivateKey

	seq  uint64 // the seq of the next new statement
	open string // a pending receipt waiting for its outcome ("" if none)
	// unknown is an envelope whose answer never came (the server was
	// killed, or the connection failed). It may or may not be logged; it
	// is sent again, byte for byte, before anything new, and the ledger
	// must answer it with its first decision if it was.
	unknown   []byte
	unknownSt *statement.ReceiptDoc
	lost      int // envelopes whose answer never came
	resent    int // of those, how many were sent again and answered
	resentDup int // of those, how many the ledger had already logged
}

func (a *crashAgent) next() *statement.ReceiptDoc {
	r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(time.Now()),
		Log: crashOrigin, Actor: a.name, Seq: a.seq},
		Workflow: a.wf, StepID: "step", Action: "act", Target: "t/x", AuthorizationRef: a.grant, ScopeHash: a.hash}
	if a.open == "" {
		r.ReceiptID = fmt.Sprintf("%s_p%d", a.grant, a.seq)
		r.Result, r.Reserve = statement.ResultPending, map[string]int64{"calls": 2}
	} else {
		r.ReceiptID = fmt.Sprintf("%s_o%d", a.grant, a.seq)
		r.Result, r.PendingRef, r.Consumed = statement.ResultSuccess, a.open, map[string]int64{"calls": 1}
	}
	return r
}

// ack is one verified acknowledgement a client received.
type ack struct {
	index    uint64
	leafHash merkle.Hash
	id       string
	cp       merkle.Checkpoint
	dup      bool
}

// acks collects what every writer was told.
type acks struct {
	mu    sync.Mutex
	list  []ack    // guarded by mu
	fails []string // guarded by mu: answers that must never happen
	first chan struct{}
	once  sync.Once
}

func (k *acks) add(a ack) {
	k.mu.Lock()
	k.list = append(k.list, a)
	k.mu.Unlock()
	k.once.Do(func() { close(k.first) })
}

func (k *acks) fail(format string, args ...any) {
	k.mu.Lock()
	k.fails = append(k.fails, fmt.Sprintf(format, args...))
	k.mu.Unlock()
}

// run appends until stop is set (the server was killed) and the next
// request fails, or until the bound.
func (a *crashAgent) run(c *client.Client, k *acks, stop *atomic.Bool) {
	ctx := context.Background()
	for n := 0; n < maxRoundAppends; n++ {
		raw, st := a.unknown, a.unknownSt
		if raw == nil {
			st = a.next()
			var err error
			if _, raw, err = statement.Sign(a.priv, st); err != nil {
				k.fail("%s: signing: %v", a.name, err)
				return
			}
		}
		r, err := c.Append(ctx, raw)
		var denied *client.DeniedError
		var refused *client.RefusedError
		switch {
		case err == nil:
			if a.unknown != nil {
				a.resent++
				if r.Duplicate {
					a.resentDup++
				}
			}
			a.unknown, a.unknownSt = nil, nil
			k.add(ack{index: r.Index, leafHash: merkle.LeafHash(r.Leaf), id: st.ReceiptID, cp: r.Checkpoint, dup: r.Duplicate})
			a.seq++
			if st.IsPending() {
				a.open = st.ReceiptID
			} else {
				a.open = ""
			}
		case errors.As(err, &denied), errors.As(err, &refused), errors.Is(err, client.ErrUnverified):
			// Every statement is valid and sent once in seq order (or
			// again, byte for byte): a denial, a refusal or an answer that
			// does not verify is a bug.
			k.fail("%s: %s seq %d: %v", a.name, st.ReceiptID, st.Seq, err)
			return
		default:
			// No answer: the outcome is unknown until the envelope is
			// sent again.
			if a.unknown == nil {
				a.lost++
			}
			a.unknown, a.unknownSt = raw, st
			if stop.Load() {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestCrashOverHTTP runs `custody serve` as a child process, has
// crashAgents agents append over HTTP as fast as they can, SIGKILLs the
// server at a random moment, restarts it, and checks the ledger's
// promises against everything the clients were told:
//
//   - no acknowledged entry is lost: the same leaf at the same index;
//   - nothing is logged twice: every statement id and every submission
//     (dedup hash) appears at most once, and an envelope whose answer was
//     lost is answered with its first decision when sent again;
//   - every checkpoint any client received is consistent with the tree
//     (RootAt(size) equals its root), and no two have one size and two
//     roots;
//   - the stored authority state equals a replay of every leaf.
//
// 3 rounds by default; CUSTODY_LONG=1 runs 100.
func TestCrashOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	t.Parallel() // with TestSlowBodiesAtTheInFlightCap, which mostly waits; TestAbuse runs alone
	rounds := 3
	if os.Getenv("CUSTODY_LONG") != "" {
		rounds = 100
	}
	start := time.Now()
	bin := custodyBinary(t)
	root := t.TempDir()
	dir := filepath.Join(root, "ledger")
	li := initLedger(t, bin, dir, crashOrigin)
	addr := freeAddr(t)
	sp := startServer(t, bin, dir, addr)

	// The world: a principal enrolled with the binary's own command, and
	// agents confirmed over HTTP.
	ppriv := enrollPrincipal(t, bin, li, sp.url, "user:crash")
	setup := newClient(t, sp.url, li.VerifierKey, 3)
	principal := client.NewRuntime(setup, ppriv, "user:crash", nil)
	agents := make([]*crashAgent, crashAgents)
	for i := range agents {
		pub, priv := newKey(t)
		a := &crashAgent{name: fmt.Sprintf("agent:crash/w%d", i), wf: fmt.Sprintf("wf_crash_%d", i%crashWorkflows),
			grant: fmt.Sprintf("crash_c%d", i), priv: priv, seq: 1}
		rec, err := principal.Confirm(context.Background(), client.Grant{ID: a.grant, Workflow: a.wf, Grantee: a.name,
			GranteeKey: pub, Targets: []string{"t/*"}, Capabilities: []string{"act"}, Limits: map[string]int64{"calls": 1 << 40},
			TTL: 24 * time.Hour, Revocable: true})
		if err != nil {
			t.Fatalf("confirming %s: %v", a.name, err)
		}
		a.hash = rec.Statement.(*statement.ConfirmDoc).ScopeHash
		agents[i] = a
	}
	t.Logf("setup: ledger, principal and %d agents in %v", crashAgents, time.Since(start).Round(time.Millisecond))

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("kill-time seed %d", seed)

	var (
		all      []ack
		cps      = map[uint64]merkle.Hash{} // every checkpoint a client saw: size -> root
		ids      = map[string]uint64{}      // every statement id in the log -> index
		subs     = map[[32]byte]uint64{}    // every logged submission's dedup hash -> index
		store    = authority.MemStore{}     // replayed state, leaf by leaf across rounds
		eng      = authority.New(store)
		prevSize uint64
		prevRoot merkle.Hash
	)
	polled := map[uint64][32]byte{} // every checkpoint GET /checkpoint showed
	for round := 0; round < rounds; round++ {
		if round > 0 {
			// A kill during the restart too: while the server checks its
			// scratch copy, opens the store or rewrites its signed head.
			kd := time.Duration(rng.IntN(600)) * time.Millisecond
			killDuringStart(t, bin, dir, addr, kd)
			t.Logf("round %d: a start SIGKILLed after %v", round, kd)
			var err error
			if sp, err = tryStartServer(t, bin, dir, addr); err != nil {
				// The port was taken meanwhile: another one will do.
				addr = freeAddr(t)
				sp = startServer(t, bin, dir, addr)
			}
		}
		// Whatever the server says about the log now must be what the
		// library read from the folder after the last crash.
		c := newClient(t, sp.url, li.VerifierKey, 3)
		if round > 0 {
			cp, _, err := c.Head(context.Background())
			if err != nil {
				t.Fatalf("round %d: checkpoint after restart: %v", round, err)
			}
			if cp.Size != prevSize || cp.Root != prevRoot {
				t.Fatalf("round %d: restarted server publishes size %d, the folder held %d", round, cp.Size, prevSize)
			}
		}

		poller := pollCheckpoints(sp.url, li.VerifierKey)
		k := &acks{first: make(chan struct{})}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() { defer wg.Done(); a.run(c, k, &stop) }()
		}
		select {
		case <-k.first:
		case <-time.After(firstAckTimeout):
			stop.Store(true)
			sp.kill()
			wg.Wait()
			t.Fatalf("round %d: no append acknowledged within %v:\n%s", round, firstAckTimeout, sp.logTail())
		}
		delay := time.Duration(20+rng.IntN(800)) * time.Millisecond
		time.Sleep(delay)
		stop.Store(true)
		sp.kill() // SIGKILL, and wait for the process to be gone
		killedAt := time.Now()
		wg.Wait()
		seen, clash := poller.end()
		if clash != "" {
			t.Fatalf("round %d: GET /checkpoint showed %s", round, clash)
		}
		for size, root := range seen {
			if r, ok := polled[size]; ok && r != root {
				t.Fatalf("round %d: GET /checkpoint showed two roots at size %d across restarts", round, size)
			}
			polled[size] = root
		}
		if len(k.fails) > 0 {
			t.Fatalf("round %d: answers that must never happen:\n%v", round, k.fails)
		}
		for _, a := range k.list {
			if r, ok := cps[a.cp.Size]; ok && r != a.cp.Root {
				t.Fatalf("round %d: two checkpoints of size %d with different roots", round, a.cp.Size)
			}
			cps[a.cp.Size] = a.cp.Root
		}

		// The folder, opened with the library as the server left it.
		l, err := ledger.Open(dir, ledger.Options{})
		if err != nil {
			t.Fatalf("round %d: opening the ledger after SIGKILL: %v", round, err)
		}
		head := l.Head()
		if head.Size < prevSize {
			t.Fatalf("round %d: the log shrank from %d to %d", round, prevSize, head.Size)
		}
		if prevSize > 0 {
			if r, err := l.RootAt(prevSize); err != nil || r != prevRoot {
				t.Fatalf("round %d: the tree of size %d changed since the last round (%v)", round, prevSize, err)
			}
		}
		checkAcks(t, l, k.list, head.Size)
		for _, a := range k.list {
			checkRoot(t, l, a.cp, head.Size)
		}
		// Every new leaf: ids and submissions unique, no DENIAL (nothing
		// sent was wrong), and the replay re-decides it.
		for i := prevSize; i < head.Size; i++ {
			walkLeaf(t, l, i, ids, subs)
			leaf, _ := l.LeafBytes(i)
			if _, err := eng.Replay(i, leaf); err != nil {
				t.Fatalf("round %d: replay: %v", round, err)
			}
			eng.Dirty(func(key string, v []byte) { store[key] = v })
			eng.Committed()
		}
		compareState(t, l, store)
		prevSize, prevRoot = head.Size, head.Root
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		all = append(all, k.list...)
		dups := 0
		for _, a := range k.list {
			if a.dup {
				dups++
			}
		}
		t.Logf("round %d: %d acknowledged (%d answered as duplicates of a lost answer), log size %d, SIGKILL %v after the first ack, checked in %v",
			round, len(k.list), dups, head.Size, delay, time.Since(killedAt).Round(time.Millisecond))
		if t.Failed() {
			t.FailNow()
		}
	}

	// Last: the server once more. Every envelope still without an answer
	// is sent again; proofs and roots are checked through the API; SIGTERM
	// must shut the server down cleanly; then the whole log is checked
	// from scratch with the library.
	if sp, err := tryStartServer(t, bin, dir, addr); err == nil {
		finalOverHTTP(t, sp, li, agents, &all, cps)
	} else {
		finalOverHTTP(t, startServer(t, bin, dir, freeAddr(t)), li, agents, &all, cps)
	}
	size := finalFromScratch(t, dir, all, cps)
	// Last, with code outside the ledger: every checkpoint an answer
	// carried or GET /checkpoint showed is the RFC 6962 root of the
	// served leaves.
	for s, r := range cps {
		if p, ok := polled[s]; ok && p != [32]byte(r) {
			t.Fatalf("an answer and GET /checkpoint show two roots at size %d", s)
		}
		polled[s] = [32]byte(r)
	}
	vsp := startServer(t, bin, dir, freeAddr(t))
	independentCheck(t, vsp.url, size, polled)
	if err := vsp.terminate(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	lost, resent, resentDup := 0, 0, 0
	for _, a := range agents {
		lost += a.lost
		resent += a.resent
		resentDup += a.resentDup
	}
	if resent != lost {
		t.Errorf("%d envelopes lost their answer, %d were answered when sent again", lost, resent)
	}
	t.Logf("%d rounds in %v: %d appends acknowledged, log size %d, %d distinct checkpoints seen; "+
		"%d envelopes lost their answer (server killed), all sent again and answered: %d had been logged before the kill (answered as duplicates), %d had not",
		rounds, time.Since(start).Round(time.Second), len(all), size, len(cps), lost, resentDup, resent-resentDup)
}

// finalOverHTTP resends the envelopes whose answers were lost, checks a
// sample of acknowledged entries and checkpoints through the API (proofs
// verified by the client), and shuts the server down with SIGTERM.
func finalOverHTTP(t *testing.T, sp *serverProc, li logInfo, agents []*crashAgent, all *[]ack, cps map[uint64]merkle.Hash) {
	t.Helper()
	ctx := context.Background()
	c := newClient(t, sp.url, li.VerifierKey, 3)
	for _, a := range agents {
		if a.unknown == nil {
			continue
		}
		r, err := c.Append(ctx, a.unknown)
		if err != nil {
			t.Fatalf("%s: sending %s again: %v", a.name, a.unknownSt.ReceiptID, err)
		}
		a.resent++
		if r.Duplicate {
			a.resentDup++
		}
		*all = append(*all, ack{index: r.Index, leafHash: merkle.LeafHash(r.Leaf), id: a.unknownSt.ReceiptID, cp: r.Checkpoint, dup: r.Duplicate})
		cps[r.Checkpoint.Size] = r.Checkpoint.Root
		a.unknown, a.unknownSt = nil, nil
	}
	// A sample: the 100 latest acknowledgements and 100 at random.
	sample := map[int]bool{}
	for i := max(0, len(*all)-100); i < len(*all); i++ {
		sample[i] = true
	}
	for range 100 {
		sample[rand.IntN(len(*all))] = true
	}
	for i := range sample {
		a := (*all)[i]
		inc, err := c.Inclusion(ctx, a.index, 0) // verified against the signed checkpoint
		if err != nil {
			t.Fatalf("inclusion of acknowledged entry %d: %v", a.index, err)
		}
		if inc.LeafHash != a.leafHash.String() {
			t.Fatalf("entry %d: the server proves another leaf than the one acknowledged", a.index)
		}
	}
	sizes := make([]uint64, 0, len(cps))
	for s := range cps {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	for i, s := range sizes {
		if i%max(1, len(sizes)/100) != 0 && i != len(sizes)-1 {
			continue
		}
		cons, err := c.Consistency(ctx, s, 0) // verified by the client
		if err != nil {
			t.Fatalf("consistency from %d: %v", s, err)
		}
		if cons.FromRoot != cps[s].String() {
			t.Fatalf("a client saw size %d with root %s; the server proves %s", s, cps[s], cons.FromRoot)
		}
	}
	if err := sp.terminate(); err != nil {
		t.Fatalf("graceful shutdown: %v\n%s", err, sp.logTail())
	}
}

// finalFromScratch opens the folder with the library and checks the whole
// log from leaf 0: every acknowledgement and checkpoint, unique ids and
// submissions, every receipt in the log acknowledged to its writer (once
// every lost answer was resolved, nothing is in the log that no client was
// told about), and the stored state against a fresh engine's replay. It
// returns the log size.
func finalFromScratch(t *testing.T, dir string, all []ack, cps map[uint64]merkle.Hash) uint64 {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	size := l.Head().Size
	checkAcks(t, l, all, size)
	for s, r := range cps {
		checkRoot(t, l, merkle.Checkpoint{Size: s, Root: r}, size)
	}
	acked := map[string]uint64{}
	for _, a := range all {
		acked[a.id] = a.index
	}
	ids, subs := map[string]uint64{}, map[[32]byte]uint64{}
	store := authority.MemStore{}
	eng := authority.New(store)
	for i := range size {
		walkLeaf(t, l, i, ids, subs)
		leaf, _ := l.LeafBytes(i)
		d, err := eng.Replay(i, leaf)
		if err != nil {
			t.Fatalf("replay from scratch: %v", err)
		}
		if r, ok := d.Statement.(*statement.ReceiptDoc); ok {
			if j, ok := acked[r.ReceiptID]; !ok || j != i {
				t.Fatalf("entry %d holds receipt %s, which no writer was told is there", i, r.ReceiptID)
			}
		}
		eng.Dirty(func(key string, v []byte) { store[key] = v })
		eng.Committed()
	}
	compareState(t, l, store)
	return size
}

// checkAcks requires every acknowledged leaf at its index, unchanged.
func checkAcks(t *testing.T, l *ledger.Ledger, list []ack, size uint64) {
	t.Helper()
	for _, a := range list {
		if a.index >= size {
			t.Fatalf("acknowledged entry %d (%s) lost: the log has %d entries", a.index, a.id, size)
		}
		leaf, err := l.LeafBytes(a.index)
		if err != nil {
			t.Fatalf("acknowledged entry %d (%s) lost: %v", a.index, a.id, err)
		}
		if merkle.LeafHash(leaf) != a.leafHash {
			t.Fatalf("acknowledged entry %d (%s) changed", a.index, a.id)
		}
		if a.cp.Size > size {
			t.Fatalf("a client saw a checkpoint of size %d; the log has %d entries", a.cp.Size, size)
		}
	}
}

// checkRoot requires the tree of cp.Size to have cp.Root.
func checkRoot(t *testing.T, l *ledger.Ledger, cp merkle.Checkpoint, size uint64) {
	t.Helper()
	if cp.Size > size {
		t.Fatalf("a client saw a checkpoint of size %d; the log has %d entries", cp.Size, size)
	}
	r, err := l.RootAt(cp.Size)
	if err != nil {
		t.Fatalf("root at %d: %v", cp.Size, err)
	}
	if r != cp.Root {
		t.Fatalf("a client saw a checkpoint of size %d with root %s; the tree has %s", cp.Size, cp.Root, r)
	}
}

// walkLeaf decodes leaf i and requires its statement id and its
// submission to be new to the log, and it not to be a DENIAL.
func walkLeaf(t *testing.T, l *ledger.Ledger, i uint64, ids map[string]uint64, subs map[[32]byte]uint64) {
	t.Helper()
	e, err := l.Entry(i)
	if err != nil {
		t.Fatalf("entry %d: %v", i, err)
	}
	if e.Kind() == statement.Denial {
		t.Fatalf("entry %d is a DENIAL of a statement that was valid: %s", i, e.Envelope.Payload)
	}
	id := e.Statement.ID()
	if j, ok := ids[id]; ok {
		t.Fatalf("statement %s logged twice: entries %d and %d", id, j, i)
	}
	ids[id] = i
	h := e.Envelope.DedupHash()
	if j, ok := subs[h]; ok {
		t.Fatalf("one submission logged twice: entries %d and %d", j, i)
	}
	subs[h] = i
}

// compareState requires the ledger's stored authority state to equal the
// replayed one, record for record.
func compareState(t *testing.T, l *ledger.Ledger, replayed authority.MemStore) {
	t.Helper()
	stored, err := l.StateRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(replayed) {
		t.Errorf("stored state has %d records, the replay %d", len(stored), len(replayed))
	}
	n := 0
	for k, v := range replayed {
		if string(stored[k]) != string(v) {
			if n++; n <= 10 {
				t.Errorf("state record %q: stored %s, replay %s", k, stored[k], v)
			}
		}
	}
	if n > 0 {
		t.Fatalf("%d state records differ from the replay", n)
	}
}
