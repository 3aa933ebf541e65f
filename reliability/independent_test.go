package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// This file checks the served log with code that shares nothing with the
// ledger's merkle package: it fetches the entry bundles as any tlog-tiles
// client would, and hashes them with crypto/sha256 by RFC 6962 directly.

// tilePath is the C2SP tlog-tiles path of entry bundle n, partial of
// width w when w < 256.
func tilePath(n uint64, w int) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n /= 1000; n > 0; n /= 1000 {
		s = fmt.Sprintf("x%03d/", n%1000) + s
	}
	p := "tile/entries/" + s
	if w < 256 {
		p += fmt.Sprintf(".p/%d", w)
	}
	return p
}

// servedLeaves fetches leaves [0, size) from the server's entry bundles.
func servedLeaves(t *testing.T, url string, size uint64) [][]byte {
	t.Helper()
	hc := &http.Client{Timeout: time.Minute}
	out := make([][]byte, 0, size)
	for n := uint64(0); n*256 < size; n++ {
		w := int(min(256, size-n*256))
		resp, err := hc.Get(url + "/" + tilePath(n, w))
		if err != nil {
			t.Fatalf("entry bundle %d: %v", n, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("entry bundle %d (width %d): %d %v", n, w, resp.StatusCode, err)
		}
		for len(b) > 0 {
			if len(b) < 2 {
				t.Fatalf("entry bundle %d: a torn length", n)
			}
			l := int(binary.BigEndian.Uint16(b))
			if len(b) < 2+l {
				t.Fatalf("entry bundle %d: a torn entry", n)
			}
			out = append(out, b[2:2+l])
			b = b[2+l:]
		}
	}
	if uint64(len(out)) != size {
		t.Fatalf("the entry bundles hold %d leaves, want %d", len(out), size)
	}
	return out
}

// rfc6962Roots returns the RFC 6962 root of leaves[:s] for every s in
// sizes, by a compact range of its own.
func rfc6962Roots(leaves [][]byte, sizes map[uint64]bool) map[uint64][32]byte {
	type node struct {
		h      [32]byte
		height int
	}
	var stack []node
	hashLeaf := func(b []byte) [32]byte { return sha256.Sum256(append([]byte{0}, b...)) }
	hashNode := func(l, r [32]byte) [32]byte {
		return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
	}
	out := map[uint64][32]byte{}
	for i, leaf := range leaves {
		stack = append(stack, node{hashLeaf(leaf), 0})
		for len(stack) >= 2 && stack[len(stack)-1].height == stack[len(stack)-2].height {
			l, r := stack[len(stack)-2], stack[len(stack)-1]
			stack = append(stack[:len(stack)-2], node{hashNode(l.h, r.h), l.height + 1})
		}
		if s := uint64(i + 1); sizes[s] {
			root := stack[len(stack)-1].h
			for j := len(stack) - 2; j >= 0; j-- {
				root = hashNode(stack[j].h, root)
			}
			out[s] = root
		}
	}
	return out
}

// checkpointPoller asks GET /checkpoint over and over and keeps every
// (size, root) it was shown; it fails on two roots at one size.
type checkpointPoller struct {
	mu    sync.Mutex
	seen  map[uint64][32]byte // guarded by mu
	clash string              // guarded by mu
	stop  chan struct{}
	done  chan struct{}
}

func pollCheckpoints(url, vkey string) *checkpointPoller {
	p := &checkpointPoller{seen: map[uint64][32]byte{}, stop: make(chan struct{}), done: make(chan struct{})}
	v, err := note.NewVerifier(vkey)
	hc := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err != nil {
				continue
			}
			resp, err := hc.Get(url + "/checkpoint")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			n, err := note.Open(b, note.VerifierList(v))
			if err != nil {
				continue
			}
			lines := strings.Split(n.Text, "\n")
			if len(lines) < 3 {
				continue
			}
			var size uint64
			fmt.Sscan(lines[1], &size)
			root, err := decodeB64(lines[2])
			if err != nil {
				continue
			}
			p.mu.Lock()
			if r, ok := p.seen[size]; ok && r != root {
				p.clash = fmt.Sprintf("two roots at size %d", size)
			}
			p.seen[size] = root
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *checkpointPoller) end() (map[uint64][32]byte, string) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen, p.clash
}

var _ = context.Background

func decodeB64(s string) ([32]byte, error) {
	var out [32]byte
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("root %q: %v", s, err)
	}
	copy(out[:], b)
	return out, nil
}

// killDuringStart starts `custody serve` on dir and SIGKILLs it after
// delay, whatever it was doing: checking the scratch copy, opening the
// store, writing the signed head.
func killDuringStart(t *testing.T, bin, dir, addr string, delay time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--dir", dir, "--addr", addr)
	cmd.Env = childEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// independentCheck fetches the served log's entry bundles and requires
// every checkpoint seen (size -> root) to be the RFC 6962 root of its
// first size leaves, computed here.
func independentCheck(t *testing.T, url string, size uint64, seen map[uint64][32]byte) {
	t.Helper()
	leaves := servedLeaves(t, url, size)
	sizes := map[uint64]bool{}
	for s := range seen {
		if s > size {
			t.Fatalf("a checkpoint of size %d was shown; the log has %d entries", s, size)
		}
		sizes[s] = true
	}
	roots := rfc6962Roots(leaves, sizes)
	for s, r := range seen {
		if roots[s] != r {
			t.Fatalf("the checkpoint of size %d has a root that is not the RFC 6962 root of the served leaves", s)
		}
	}
	t.Logf("%d checkpoints checked against roots recomputed from %d served leaves by code outside the ledger", len(seen), size)
}
