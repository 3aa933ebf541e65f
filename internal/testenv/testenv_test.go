package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how Need stopped it instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = fmt.Sprintf(format, args...)
}

func TestNeedFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci   string
		fail bool
	}{{"true", true}, {"1", true}, {"", false}, {"false", false}} {
		t.Setenv("CI", c.ci)
		r := &recorder{TB: t}
		Need(r, "PostgreSQL is not running")
		if r.failed != c.fail || r.skipped == c.fail {
			t.Errorf("CI=%q: failed %v skipped %v, want failed %v", c.ci, r.failed, r.skipped, c.fail)
		}
		if !strings.HasPrefix(r.msg, Marker+"PostgreSQL is not running") {
			t.Errorf("CI=%q: message %q does not start with the marker", c.ci, r.msg)
		}
	}
}
