package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/internal/testenv"
	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/statement"
	"github.com/custodylog/custody/storage/badgerstore"
	"golang.org/x/sys/unix"
)

// TestDiskFull fills a small tmpfs until a commit fails, then checks that
// the failure is a clear error, that nothing half-written is served, and
// that appends resume once space returns, without a restart. It needs root
// (to mount tmpfs) and is skipped with a message otherwise.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Need(t, "disk-full test: needs root to mount a small tmpfs (CI runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", mnt).CombinedOutput(); err != nil {
		testenv.Need(t, "disk-full test: cannot mount tmpfs (%v: %s)", err, out)
	}
	defer exec.Command("umount", "-l", mnt).Run()
	const reserve = 64 << 20

	w := &world{t: t, dir: mnt + "/ledger", clock: &clock{t: mustTime("2026-03-19T08:12:00Z")}}
	w.admin = newActor(t, "admin")
	w.admin.seq = 1
	l, err := Init(w.dir, testOrigin, InitOptions{AdminKey: w.admin.priv, Options: Options{Clock: w.clock.Now, StoreOptions: badgerstore.Options{ReserveBytes: reserve}}})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l
	defer func() { w.l.Close() }()
	alice, agent := newActor(t, "user:alice"), newActor(t, "agent:filler")
	w.enroll(alice)
	c := w.confirm(alice, "c_fill", grant(agent, "wf_fill", []string{"t/*"}, []string{"act"}, nil, nil, 86400))
	w.must(alice, c, authority.Accepted, "")

	// Another program fills the disk, leaving a little over the reserve.
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := mnt + "/filler"
	fill := int64(st.Bavail*uint64(st.Bsize)) - reserve - 16<<20
	if err := os.WriteFile(filler, make([]byte, fill), 0o600); err != nil {
		t.Fatal(err)
	}
	// ~40 KiB of evidence per receipt fills 16 MiB in a few hundred appends.
	evidence := strings.Repeat("x", 40<<10)
	var acked []*Result
	var failure error
	for i := 0; i < 5000 && failure == nil; i++ {
		r := w.pending(agent, fmt.Sprintf("fill_%d", i), "wf_fill", "c_fill", c.ScopeHash, "s", "act", "t/x", nil)
		r.EvidenceRefs = []string{evidence}
		res, err := w.submit(agent, r)
		switch {
		case err != nil:
			failure = err
			agent.seq--
		case res.Verdict != authority.Accepted:
			t.Fatalf("append %d: %s %s", i, res.Code, res.Reason)
		default:
			acked = append(acked, res)
		}
	}
	if failure == nil {
		t.Fatal("the disk never filled")
	}
	t.Logf("disk full after %d appends: %v", len(acked), failure)
	var de *authority.DecisionError
	if errors.As(failure, &de) {
		t.Fatalf("a full disk was reported as a decision: %v", failure)
	}
	if !errors.Is(failure, ErrDiskFull) || !strings.Contains(failure.Error(), "MiB free") {
		t.Errorf("error does not say what failed: %v", failure)
	}
	// Nothing half-written is served: the head is the last acknowledged
	// one, it verifies, and every acknowledged entry reads back.
	head := w.l.Head()
	last := acked[len(acked)-1]
	if head.Size != last.Head.Size {
		t.Fatalf("head size %d after the failure, last acknowledged %d", head.Size, last.Head.Size)
	}
	if _, err := merkle.OpenCheckpoint(head.Checkpoint, testOrigin, w.l.VerifierKey()); err != nil {
		t.Fatal(err)
	}
	for _, r := range acked[len(acked)-3:] {
		w.checkProof(r)
	}

	// Space returns: appends resume in the same process.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r := w.pending(agent, "after_full", "wf_fill", "c_fill", c.ScopeHash, "s", "act", "t/x", nil)
	res := w.must(agent, r, authority.Accepted, "")
	w.checkProof(res)
	if res.Index != head.Size {
		t.Errorf("the first entry after the failure is %d, want %d (nothing of the failed batch may remain)", res.Index, head.Size)
	}
	// And the log on disk replays to the stored state.
	if err := w.l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(w.dir, Options{Clock: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.l = l2
	compareState(t, l2, w.replay())
	// The workflow index holds each leaf once: none of the failed batch,
	// whose index the sequencer had noted and then had to forget.
	want, err := l2.read.walkAfter(context.Background(), "wf_fill", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := l2.WorkflowIndexes("wf_fill"); err != nil || !slices.Equal(got, want) {
		t.Fatalf("the workflow index after the failure: %d leaves ending %v (%v); the back-links %d ending %v",
			len(got), got[max(0, len(got)-3):], err, len(want), want[max(0, len(want)-3):])
	}
	_ = statement.Receipt
}
