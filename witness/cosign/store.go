package cosign

// Keeping the newest witnessed checkpoint across restarts.
//
// Cosignatures cost the witnesses a round trip each and the log a wait;
// without a copy of them, a restarted server would serve its checkpoint
// uncosigned (and finality would wait) until the witnesses cosigned
// again. So the cosigner keeps the newest checkpoint that met the quorum,
// as the note with every cosignature gathered for it, in the log's store
// (Options.Store: a file of the data folder, or a row of PostgreSQL's
// custody_files), written durably each time it changes. Restore reads it
// back at start and trusts nothing in it: the log's signature and root
// are checked by the caller (the log signed exactly this tree), and every
// cosignature against the policy (the quorum is met by valid lines). A
// copy that fails a check is refused with an error naming the check, and
// the cosigner starts without it.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/witness"
)

// FileStore is where the cosigner keeps its checkpoint: the log's store
// (storage.Store has these methods). WriteFile replaces a file atomically
// and durably; ReadFile of a missing file returns an error wrapping
// fs.ErrNotExist.
type FileStore interface {
	ReadFile(name string) ([]byte, error)
	WriteFile(name string, data []byte) error
}

// StoredName is the file of the store that holds the newest witnessed
// checkpoint, cosignatures included.
const StoredName = "witness/checkpoint"

// save asks the persister to write the newest witnessed checkpoint.
// Caller holds mu.
func (c *Cosigner) save() {
	select {
	case c.saveCh <- struct{}{}:
	default: // a write is pending already; it will take the newest
	}
}

// persist writes the newest witnessed checkpoint to the store whenever it
// changes, until ctx ends (and once more then, if one is pending).
func (c *Cosigner) persist(ctx context.Context) {
	if c.opts.Store == nil {
		return
	}
	write := func() {
		c.mu.Lock()
		best := c.best
		c.mu.Unlock()
		if best == nil || len(best.lines) == 0 || bytes.Equal(best.text, c.written) {
			return
		}
		if err := c.opts.Store.WriteFile(StoredName, best.text); err != nil {
			c.lg.Warn("witness: could not keep the witnessed checkpoint in the store; after a restart it is served uncosigned until the witnesses cosign again",
				"file", StoredName, "size", best.cp.Size, "err", err)
			return
		}
		c.written = best.text
	}
	for {
		select {
		case <-c.saveCh:
			write()
		case <-ctx.Done():
			select {
			case <-c.saveCh:
				write()
			default:
			}
			return
		}
	}
}

// Restore loads the witnessed checkpoint kept in the store (Options.Store)
// by an earlier run, if any, and serves it as Best (and as Latest, until a
// newer checkpoint is published). logSigned checks the checkpoint without
// its cosignatures: that the log's key signed it and that its root is the
// log's root at its size; it returns the checkpoint. Restore then requires
// that the cosignatures are valid and meet the policy's quorum. Call it
// before the first Publish. It returns false and no error when nothing is
// stored (or there is no store), and an error, having restored nothing,
// when the stored copy fails a check.
func (c *Cosigner) Restore(logSigned func(text []byte) (Checkpoint, error)) (Witnessed, bool, error) {
	if c.opts.Store == nil {
		return Witnessed{}, false, nil
	}
	text, err := c.opts.Store.ReadFile(StoredName)
	if errors.Is(err, fs.ErrNotExist) {
		return Witnessed{}, false, nil
	}
	refuse := func(format string, args ...any) (Witnessed, bool, error) {
		return Witnessed{}, false, fmt.Errorf("the witnessed checkpoint kept in %s is refused: "+format, append([]any{StoredName}, args...)...)
	}
	if err != nil {
		return refuse("it cannot be read: %v", err)
	}
	i := bytes.Index(text, []byte("\n\n"))
	if i < 0 || !bytes.HasSuffix(text, []byte("\n")) {
		return refuse("it is not a signed note (a body, a blank line, signature lines)")
	}
	body, sigs := text[:i+1], strings.SplitAfter(string(text[i+2:]), "\n")
	// Sort the lines by key: the policy's witnesses' (name and key hash),
	// and the rest, which must be the log's.
	lines := map[string]string{}
	var logLines strings.Builder
	for _, l := range sigs {
		if l == "" {
			continue
		}
		name, hash, ok := sigKey(l)
		if !ok {
			return refuse("it holds a line that is not a signature line: %q", snippet([]byte(l)))
		}
		var by *witness.Witness
		for _, w := range c.policy.Witnesses() {
			if w.Key.Name() == name && w.Key.KeyHash() == hash {
				by = w
			}
		}
		switch {
		case by == nil:
			logLines.WriteString(l)
		case lines[by.Name] != "":
			return refuse("it holds two cosignatures of witness %s", by.Name)
		default:
			lines[by.Name] = strings.TrimSuffix(l, "\n")
		}
	}
	signed := append(append(bytes.Clone(body), '\n'), logLines.String()...)
	cp, err := logSigned(signed)
	if err != nil {
		return refuse("%v", err)
	}
	for _, w := range c.policy.Witnesses() {
		if l, ok := lines[w.Name]; ok {
			if _, err := note.Open(append(bytes.Clone(cp.Text), l+"\n"...), note.VerifierList(w.Key)); err != nil {
				return refuse("the cosignature of witness %s does not verify over the checkpoint: %v", w.Name, err)
			}
		}
	}
	r := &record{cp: cp, lines: lines}
	var b bytes.Buffer
	b.Write(cp.Text)
	for _, w := range c.policy.Witnesses() {
		if l, ok := lines[w.Name]; ok {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	r.text = b.Bytes()
	r.ev = c.policy.Evaluate(r.text)
	if !r.ev.Satisfied {
		return refuse("its cosignatures do not meet the witness quorum (%s); missing: %s", c.policy, strings.Join(r.ev.Missing, ", "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.best == nil || c.best.cp.Size < cp.Size {
		c.best = r
		c.m.witnessed.Set(float64(cp.Size))
	}
	if c.head == nil || c.head.cp.Size <= cp.Size {
		c.head = r
	}
	c.recs[cp.Size] = r
	c.written = text
	return r.witnessed(), true, nil
}

// sigKey returns the key name and key hash of a signed-note signature
// line ("— name base64(keyhash || signature)\n").
func sigKey(line string) (name string, hash uint32, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "— ")
	if !ok {
		return "", 0, false
	}
	name, b64, ok := strings.Cut(rest, " ")
	if !ok || name == "" {
		return "", 0, false
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sig) < 5 {
		return "", 0, false
	}
	return name, binary.BigEndian.Uint32(sig), true
}
