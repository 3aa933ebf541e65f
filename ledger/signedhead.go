package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/custodylog/custody/merkle"
	"github.com/custodylog/custody/storage"
)

// # The signed head, kept outside the store
//
// A store can lose what it acknowledged without saying so: a damaged
// write-ahead log that the engine truncates at open, a restored backup, a
// PostgreSQL replica promoted behind its primary. Each comes back as a
// shorter log that looks healthy, and the server would extend it and sign
// a checkpoint contradicting one it had already published.
//
// So the last checkpoint the log signed is also kept in a small file of
// the data folder, D/signed-head (for a database, a file on the server
// that signs: Options.HeadFile), written and fsynced after each batch's
// commit and before its checkpoint is shown to anyone (the answers, the
// head readers see, the event streams). Every open compares the store with
// it: a store whose tree is shorter, or whose root at that size differs,
// is refused (ErrRolledBack), and nothing is signed on top of it.
//
// The file has two fixed 4 KiB slots, written alternately in place with
// pwrite and fdatasync, so one batch costs one small synchronous write
// (no rename, no directory sync), and a write torn by a power cut leaves
// the other slot whole. A slot is
//
//	"custody signed head v1\n" (23 bytes)
//	length of the note, 4 bytes big endian
//	SHA-256 of the note, 32 bytes
//	the checkpoint note (a C2SP signed note), zero padded
//
// and the file's head is the valid slot with the larger tree size.

// SignedHeadName is the signed-head file's name in a data folder.
const SignedHeadName = "signed-head"

const (
	headSlot  = 4096
	headMagic = "custody signed head v1\n"
	headFixed = len(headMagic) + 4 + sha256.Size
)

// ErrRolledBack is returned (wrapped in a *DamageError) when a store holds
// less than, or something other than, the last checkpoint the log signed.
var ErrRolledBack = errors.New("ledger: the store is behind the last checkpoint the log signed")

// ErrDamaged is returned (wrapped in a *DamageError) when the data folder's
// files do not hold what the log last signed.
var ErrDamaged = errors.New("ledger: the data folder is damaged")

// DamageError says what is wrong with a data folder and how to recover.
// It wraps ErrRolledBack or ErrDamaged.
type DamageError struct {
	Dir   string
	What  string   // what was found
	Files []string // the files that look damaged, if known
	Err   error
}

func (e *DamageError) Error() string {
	s := fmt.Sprintf("the data folder %s is damaged: %s", e.Dir, e.What)
	for _, f := range e.Files {
		s += "; " + f
	}
	return s + ". custody refuses to serve or sign from it and has changed nothing in it: keep it as evidence, and recover from a copy of the log that holds its last checkpoint (the published tiles: `custody export` output or a mirror, or a replica), then check the copy with `custody audit`"
}

func (e *DamageError) Unwrap() error { return e.Err }

// headFile is the ledger's signed-head part: the signed-head file, open
// for writing, and which of its two slots the next write goes to.
// Reading the file and comparing the store with it (checkSignedHead) are
// open checks; writing it is a step of every commit (writeHead).
//
// Locking: none. It is written by the open (loadHead, before the
// sequencer starts, or by the sequencer taking the lease with no commit
// in flight) and then by the commit goroutine alone, one commit at a
// time, in commit order. A read-only ledger has none (nil: close does
// nothing).
type headFile struct {
	f    *os.File
	path string
	next int // the slot the next write goes to
}

// signedHead is what the file holds.
type signedHead struct {
	note []byte
	cp   merkle.Checkpoint
}

// headFilePath is where the log at loc keeps its signed head: the file
// Options.HeadFile names, D/signed-head in a data folder, or for a
// database a file of this machine named for the database and the log.
func headFilePath(file, loc, origin string) string {
	if file != "" {
		return file
	}
	if !storage.IsURL(loc) {
		return filepath.Join(loc, SignedHeadName)
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = os.TempDir()
	}
	sum := sha256.Sum256([]byte(loc + "\n" + origin))
	return filepath.Join(dir, "custody", "signed-heads", fmt.Sprintf("%x", sum[:12]))
}

// headPath is where this ledger keeps its signed head.
func (l *sequencer) headPath() string { return headFilePath(l.opts.HeadFile, l.loc, l.origin) }

// readSignedHead reads the signed-head file: nil if there is none or it
// was never written (only zero bytes), an error if it cannot be read or
// holds bytes that are neither empty slots nor a whole slot signed by ks.
func readSignedHead(path string, ks *merkle.KeySet) (*signedHead, int, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", path, err)
	}
	if allZero(raw) {
		// Created and never written (a server that has not signed yet:
		// a follower of a shared store), or cut short by a crash while
		// it was being created: no local history, as with no file.
		return nil, 0, nil
	}
	var best *signedHead
	bestSlot := 0
	var why error
	for slot := 0; slot < 2; slot++ {
		if len(raw) < (slot+1)*headSlot {
			if len(raw) > slot*headSlot && !allZero(raw[slot*headSlot:]) {
				why = fmt.Errorf("slot %d: cut short at %d bytes", slot, len(raw)-slot*headSlot)
			}
			continue
		}
		b := raw[slot*headSlot : (slot+1)*headSlot]
		if allZero(b) {
			continue // never written
		}
		if string(b[:len(headMagic)]) != headMagic {
			why = fmt.Errorf("slot %d: neither empty nor a signed head", slot)
			continue
		}
		n := int(binary.BigEndian.Uint32(b[len(headMagic):]))
		if n > headSlot-headFixed {
			why = fmt.Errorf("slot %d: note length %d", slot, n)
			continue
		}
		note := b[headFixed : headFixed+n]
		if sum := sha256.Sum256(note); string(sum[:]) != string(b[len(headMagic)+4:headFixed]) {
			why = fmt.Errorf("slot %d: checksum mismatch (a torn write)", slot)
			continue
		}
		cp, err := ks.Open(note)
		if err != nil {
			why = fmt.Errorf("slot %d: %w", slot, err)
			continue
		}
		if best == nil || cp.Size > best.cp.Size {
			best, bestSlot = &signedHead{note: append([]byte(nil), note...), cp: cp}, slot
		}
	}
	if best == nil {
		if why == nil {
			why = errors.New("no slot holds a checkpoint")
		}
		return nil, 0, fmt.Errorf("%s holds no valid signed checkpoint: %v", path, why)
	}
	return best, bestSlot, nil
}

// openHeadFile opens (creating) the signed-head file for writing; last is
// the slot of the head it holds.
func openHeadFile(path string, last int) (*headFile, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Both slots allocated now, so later writes overwrite blocks the
		// filesystem already holds (no allocation: they cannot fail for
		// want of space), and the new file's name is made durable.
		if err := f.Truncate(2 * headSlot); err == nil {
			_, err = f.WriteAt(make([]byte, 2*headSlot), 0)
		}
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = syncDir(dir)
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("creating %s: %w", path, err)
		}
	}
	return &headFile{f: f, path: path, next: 1 - last}, nil
}

// write makes note (a signed checkpoint) durable in the file. It must
// return before the checkpoint is shown to anyone.
func (h *headFile) write(note []byte) error {
	if len(note) > headSlot-headFixed {
		return fmt.Errorf("the checkpoint (%d bytes) does not fit in a slot of %s", len(note), h.path)
	}
	b := make([]byte, headSlot)
	copy(b, headMagic)
	binary.BigEndian.PutUint32(b[len(headMagic):], uint32(len(note)))
	sum := sha256.Sum256(note)
	copy(b[len(headMagic)+4:], sum[:])
	copy(b[headFixed:], note)
	if _, err := h.f.WriteAt(b, int64(h.next*headSlot)); err != nil {
		return fmt.Errorf("writing %s: %w", h.path, err)
	}
	if err := fdatasync(h.f); err != nil {
		return fmt.Errorf("syncing %s: %w", h.path, err)
	}
	h.next = 1 - h.next
	return nil
}

func (h *headFile) close() error {
	if h == nil || h.f == nil {
		return nil
	}
	return h.f.Close()
}

// checkSignedHead compares the store's head with the signed-head file:
// the store must hold the file's tree (the same root at the file's size);
// it may be ahead by the batches committed after the file was last written
// (a crash between the two). It returns the file's slot of the head.
func (l *sequencer) checkSignedHead(store *Head) (int, error) {
	path := l.headPath()
	sh, slot, err := readSignedHead(path, l.keys.set)
	if err != nil {
		return 0, &DamageError{Dir: l.loc, What: err.Error(), Err: ErrDamaged}
	}
	if sh == nil {
		// (A database many servers may share keeps no signed head: the
		// file is this machine's.)
		if storage.IsURL(l.loc) || !fileExists(path) {
			// No local history: a folder from before the file existed, or
			// a server of a shared store that has not signed on this
			// machine yet (its file, if any, was never written). The file
			// is created now, and written when this server first signs.
			return 0, nil
		}
		// Init writes a folder's first checkpoint: an empty file there
		// lost what it held.
		return 0, &DamageError{Dir: l.loc, Err: ErrDamaged,
			What: fmt.Sprintf("%s holds no checkpoint, though the log wrote one when it was created", path)}
	}
	f := sh.cp
	if store.Size < f.Size && l.lead.leaser != nil && l.sharedCaughtUp(f) {
		// A shared store: another server committed (and wrote this file,
		// on the same machine) after the head above was read.
		return slot, nil
	}
	switch {
	case store.Size < f.Size:
		return 0, &DamageError{Dir: l.loc, Err: ErrRolledBack,
			What: fmt.Sprintf("the store holds %d entries, but the log signed and published a checkpoint of %d entries (root %s, kept in %s): %d acknowledged entries are missing",
				store.Size, f.Size, f.Root, path, f.Size-store.Size)}
	case store.Size == f.Size && store.Root != f.Root:
		return 0, &DamageError{Dir: l.loc, Err: ErrRolledBack,
			What: fmt.Sprintf("the store's tree of %d entries has root %s, but the log signed root %s at that size (kept in %s)",
				store.Size, store.Root, f.Root, path)}
	case store.Size > f.Size:
		root, err := l.read.prover.RootAt(f.Size)
		if err != nil {
			return 0, &DamageError{Dir: l.loc, Err: ErrDamaged,
				What: fmt.Sprintf("the store cannot compute its root at the signed size %d: %v", f.Size, err)}
		}
		if root != f.Root {
			return 0, &DamageError{Dir: l.loc, Err: ErrRolledBack,
				What: fmt.Sprintf("the store's tree at size %d has root %s, but the log signed root %s at that size (kept in %s)",
					f.Size, root, f.Root, path)}
		}
	}
	return slot, nil
}

// sharedCaughtUp reads a shared store's head again and reports whether it
// now holds the signed tree f: on a store many servers share, the head
// moves while a server opens, and a leader on the same machine may have
// written the signed-head file in between.
func (l *sequencer) sharedCaughtUp(f merkle.Checkpoint) bool {
	sh, err := l.store.Head(context.Background())
	if err != nil || sh == nil {
		return false
	}
	e, err := merkle.ParseEdge(sh.Edge)
	if err != nil || e.Size() < f.Size {
		return false
	}
	root, err := l.read.prover.RootAt(f.Size)
	return err == nil && root == f.Root
}

// verifyTail checks, cheaply, that what the store holds at the tree's right
// edge is what the head commits to: the root recomputed from the stored
// tiles (read afresh, not from a cache), and every leaf of the last
// level-0 tile against its hash in that tile. A damaged table, value log
// or write-ahead log that lost recent writes fails here.
func (l *sequencer) verifyTail(h *Head) error {
	if h.Size == 0 {
		return nil
	}
	tiles := storeTiles{l.store}
	root, err := merkle.RootAt(tiles, h.Size)
	if err != nil {
		return fmt.Errorf("the stored tiles of the tree's right edge cannot be read: %v", err)
	}
	if root != h.Root {
		return fmt.Errorf("the stored tiles hash to root %s at size %d, but the stored head has %s", root, h.Size, h.Root)
	}
	ti := (h.Size - 1) / merkle.TileWidth
	first := ti * merkle.TileWidth
	tile, err := tiles.ReadTile(0, ti)
	if err != nil || uint64(len(tile)) < (h.Size-first)*merkle.HashSize {
		return fmt.Errorf("the last level-0 tile cannot be read: %v", err)
	}
	ctx := context.Background()
	leaves, err := l.store.Leaves(ctx, first, int(h.Size-first))
	if err != nil {
		return fmt.Errorf("entries %d..%d cannot be read: %v", first, h.Size-1, err)
	}
	if uint64(len(leaves)) < h.Size-first {
		return fmt.Errorf("entry %d is missing from the store (it holds %d entries)", first+uint64(len(leaves)), h.Size)
	}
	for i, leaf := range leaves {
		lh := merkle.LeafHash(leaf)
		if !bytes.Equal(lh[:], tile[i*merkle.HashSize:(i+1)*merkle.HashSize]) {
			return fmt.Errorf("entry %d does not hash to its leaf hash in tile 0/%d", first+uint64(i), ti)
		}
	}
	return nil
}

// fdatasync makes f's data durable (not its times).
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// isNoSpace reports whether err is the filesystem being full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, ErrDiskFull)
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
