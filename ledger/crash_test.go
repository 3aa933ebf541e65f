package ledger

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

const crashAgents = 8

// TestCrashRecovery kills a process that is appending, at random moments,
// with SIGKILL, then reopens the ledger and checks the promises: every
// acknowledged entry is present with the same leaf, every checkpoint the
// child saw is consistent with the final tree, and the stored state equals
// a replay of the log. CUSTODY_LONG=1 runs 100 rounds.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	rounds := 3
	if os.Getenv("CUSTODY_LONG") != "" {
		rounds = 100
	}
	w := newWorld(t, Options{Clock: time.Now})
	alice := newActor(t, "user:alice")
	w.enroll(alice)
	for i := 0; i < crashAgents; i++ {
		a := newActor(t, fmt.Sprintf("agent:crash%d", i))
		c := w.confirm(alice, fmt.Sprintf("crash_c%d", i), grant(a, "wf_crash", []string{"t/*"}, []string{"act"}, nil, nil, 86400))
		w.must(alice, c, authority.Accepted, "")
		if err := sign.WritePrivateKeyFile(filepath.Join(w.dir, fmt.Sprintf("agent%d.key", i)), a.priv, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	w.l.Close()

	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	acked := map[uint64]string{} // index -> leaf hash hex
	type seenHead struct {
		size uint64
		root string
	}
	var heads []seenHead
	total := 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
		cmd.Env = append(os.Environ(), "CUSTODY_CRASH_CHILD="+w.dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 64<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the child's first acknowledgement (a slow machine or the
		// race detector can take seconds to start it), then kill it at a
		// random moment.
		var deadline <-chan time.Time
		started := time.After(2 * time.Minute)
	wait:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break wait
				}
				parseAck(t, line, acked, func(size uint64, root string) { heads = append(heads, seenHead{size, root}) })
				if deadline == nil {
					deadline = time.After(time.Duration(50+rng.IntN(600)) * time.Millisecond)
				}
			case <-deadline:
				break wait
			case <-started:
				if deadline == nil {
					cmd.Process.Kill()
					t.Fatalf("round %d: the child acknowledged nothing within 2 minutes", round)
				}
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for line := range lines {
			parseAck(t, line, acked, func(size uint64, root string) { heads = append(heads, seenHead{size, root}) })
		}
		cmd.Wait()

		l, err := Open(w.dir, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		head := l.Head()
		for idx, h := range acked {
			leaf, err := l.LeafBytes(idx)
			if err != nil {
				t.Fatalf("round %d: acknowledged entry %d lost: %v", round, idx, err)
			}
			lh := merkle.LeafHash(leaf)
			if hex.EncodeToString(lh[:]) != h {
				t.Fatalf("round %d: acknowledged entry %d changed", round, idx)
			}
		}
		for _, sh := range heads {
			if sh.size > head.Size {
				t.Fatalf("round %d: the child saw a checkpoint of size %d, the reopened log has %d", round, sh.size, head.Size)
			}
			root, err := l.RootAt(sh.size)
			if err != nil {
				t.Fatal(err)
			}
			if hex.EncodeToString(root[:]) != sh.root {
				t.Fatalf("round %d: checkpoint of size %d is inconsistent with the final tree", round, sh.size)
			}
		}
		w.l = l
		compareState(t, l, w.replay())
		l.Close()
		t.Logf("round %d: %d entries acknowledged so far, log size %d", round, len(acked), head.Size)
		total = len(acked)
	}
	if total == 0 {
		t.Fatal("the child acknowledged nothing in any round")
	}
}

func parseAck(t *testing.T, line string, acked map[uint64]string, head func(uint64, string)) {
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != "ack" {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "=== RUN") {
			t.Logf("child (%d bytes): %.600s", len(line), line)
		}
		return
	}
	idx, _ := strconv.ParseUint(f[1], 10, 64)
	size, _ := strconv.ParseUint(f[3], 10, 64)
	acked[idx] = f[2]
	head(size, f[4])
}

// TestCrashChild is the child process of TestCrashRecovery: it appends
// receipts from several agents until killed, printing each acknowledgement.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("CUSTODY_CRASH_CHILD")
	if dir == "" {
		t.Skip("runs only as TestCrashRecovery's child process")
	}
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < crashAgents; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			priv, err := sign.ReadPrivateKeyFile(filepath.Join(dir, fmt.Sprintf("agent%d.key", i)), nil)
			if err != nil {
				t.Error(err)
				return
			}
			kid := sign.KeyID(priv.Public().(ed25519.PublicKey))
			for n := 0; ; n++ {
				seq, err := l.NextSeq(kid)
				if err != nil {
					t.Error(err)
					return
				}
				r := &statement.ReceiptDoc{Header: statement.Header{Type: statement.Receipt, Timestamp: statement.FormatTimestamp(time.Now()),
					Log: testOrigin, Actor: fmt.Sprintf("agent:crash%d", i), Seq: seq},
					ReceiptID: fmt.Sprintf("crash_%d_%d_%d", i, seq, time.Now().UnixNano()), Workflow: "wf_crash", StepID: "s",
					Action: "act", Target: "t/x", AuthorizationRef: fmt.Sprintf("crash_c%d", i), Result: statement.ResultPending}
				ge, err := l.EntryByID(fmt.Sprintf("crash_c%d", i))
				if err != nil {
					t.Error(err)
					return
				}
				r.ScopeHash = ge.Statement.(*statement.ConfirmDoc).ScopeHash
				_, raw, err := statement.Sign(priv, r)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := l.Append(context.Background(), raw)
				if err != nil {
					continue
				}
				leaf, _ := l.LeafBytes(res.Index)
				lh := merkle.LeafHash(leaf)
				mu.Lock()
				fmt.Printf("ack %d %s %d %s\n", res.Index, hex.EncodeToString(lh[:]), res.Head.Size, hex.EncodeToString(res.Head.Root[:]))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
}
