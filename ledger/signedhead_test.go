package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSignedHeadNeverWritten: a signed-head file of zero bytes only (or
// none at all) is no local history; one holding anything else that is not
// a whole signed slot is damage, as is a slot torn without a whole one
// beside it. On a data folder, whose first checkpoint Init writes, an
// empty file is damage too.
func TestSignedHeadNeverWritten(t *testing.T) {
	w := newWorld(t, Options{})
	path := w.l.seq.headPath()
	ks := w.l.keys.set
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sh, slot, err := readSignedHead(path, ks)
	if err != nil || sh == nil {
		t.Fatalf("the file Init wrote: %v, %v", sh, err)
	}
	whole := good[slot*headSlot : (slot+1)*headSlot]
	zero := make([]byte, headSlot)
	garbage := make([]byte, headSlot)
	for i := range garbage {
		garbage[i] = byte(i*7 + 1)
	}
	torn := append([]byte(nil), whole...)
	torn[headFixed+10] ^= 1
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	cases := []struct {
		name    string
		raw     []byte
		history bool // a head is read
		damaged bool
	}{
		{"empty file", nil, false, false},
		{"two zero slots", cat(zero, zero), false, false},
		{"cut short, zeros", zero[:100], false, false},
		{"slot 0 whole", cat(whole, zero), true, false},
		{"slot 1 whole", cat(zero, whole), true, false},
		{"slot 1 whole, slot 0 torn", cat(torn, whole), true, false},
		{"slot 0 torn", cat(torn, zero), false, true},
		{"slot 0 garbage", cat(garbage, zero), false, true},
		{"both garbage", cat(garbage, garbage), false, true},
		{"cut short, not zeros", garbage[:100], false, true},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, "h")
		if err := os.WriteFile(p, c.raw, 0o600); err != nil {
			t.Fatal(err)
		}
		sh, _, err := readSignedHead(p, ks)
		switch {
		case c.damaged && err == nil:
			t.Errorf("%s: read as %v, want an error", c.name, sh)
		case !c.damaged && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.damaged && (sh != nil) != c.history:
			t.Errorf("%s: head %v, want history %v", c.name, sh, c.history)
		}
	}

	// A data folder whose signed-head file was zeroed is refused.
	dataDir := w.l.Dir()
	w.l.Close()
	if err := os.WriteFile(path, cat(zero, zero), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dataDir, Options{})
	if err == nil {
		l.Close()
		t.Fatal("a data folder with a zeroed signed-head file opened")
	}
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("open: %v, want ErrDamaged", err)
	}
}
