package scope

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var (
	id256 = "a/" + strings.Repeat("b", 254)
	id257 = id256 + "c"
)

func TestCheckIdentifier(t *testing.T) {
	for _, tc := range []struct {
		id  string
		ok  bool
		msg string
	}{
		{"a", true, ""},
		{"wf_9f3a", true, ""},
		{"airline_portal/account_123", true, ""},
		{"agent:acme/booker", true, ""},
		{"A-Z.a_z:0@9+x=y", true, ""},
		{"..a/a..", true, ""},
		{".a/.b./c.", true, ""},
		{id256, true, ""},
		{"", false, "empty"},
		{id257, false, "257 bytes"},
		{"a//b", false, "empty segment"},
		{"/a", false, "empty segment"},
		{"a/", false, "empty segment"},
		{"/", false, "empty segment"},
		{".", false, "dots"},
		{"..", false, "dots"},
		{"...", false, "dots"},
		{"a/./b", false, "dots"},
		{"a/../b", false, "dots"},
		{"a/..", false, "dots"},
		{"café", false, "0xc3"},
		{"a b", false, "0x20"},
		{"a\x00", false, "0x00"},
		{"a\\b", false, "0x5c"},
		{"*", false, "0x2a"},
		{"a*", false, "0x2a"},
		{"a/*", false, "0x2a"},
		{"a#b", false, "0x23"},
		{"a?b", false, "0x3f"},
		{"a%2F", false, "0x25"},
		{"a\u202eb", false, "0xe2"},
	} {
		err := CheckIdentifier(tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("CheckIdentifier(%q) = %v, want ok=%v", tc.id, err, tc.ok)
			continue
		}
		if err != nil && (CodeOf(err) != CodeNonCanonical || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("CheckIdentifier(%q) = %v, want non_canonical containing %q", tc.id, err, tc.msg)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	for _, tc := range []struct {
		p  string
		ok bool
	}{
		{"*", true},
		{"a", true},
		{"a/*", true},
		{"a/b/*", true},
		{"agent:acme/*", true},
		{strings.Repeat("p", 254) + "/*", true},  // 256 bytes
		{strings.Repeat("p", 255) + "/*", false}, // 257 bytes
		{id256, true},
		{id257, false},
		{"", false},
		{"**", false},
		{"a*", false},
		{"*a", false},
		{"a/*b", false},
		{"a/b*", false},
		{"*/a", false},
		{"a/*/b", false},
		{"*/*", false},
		{"a/*/*", false},
		{"/*", false},
		{"a//*", false},
		{"./*", false},
		{"a/../*", false},
		{"a/", false},
		{"a/**", false},
		{"é/*", false},
	} {
		if err := CheckPattern(tc.p); (err == nil) != tc.ok {
			t.Errorf("CheckPattern(%q) = %v, want ok=%v", tc.p, err, tc.ok)
		}
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		p, id string
		want  bool
	}{
		{"*", "a", true},
		{"*", "a/b/c", true},
		{"*", id256, true},
		{"*", id257, false},
		{"*", "", false},
		{"*", "a//b", false},
		{"db", "db", true},
		{"db", "dbx", false},
		{"db", "db/a", false},
		{"db/*", "db/a", true},
		{"db/*", "db/a/b/c", true},
		{"db/*", "db", false},
		{"db/*", "dbx", false},
		{"db/*", "dbx/a", false},
		{"db/*", "db/", false},
		{"db/*", "db/../x", false},
		{"a/b/*", "a/b/c", true},
		{"a/b/*", "a/c", false},
		{"a*", "ab", false},
		{"a/*/b", "a/x/b", false},
		{"db/*", "db/*", false}, // an identifier never holds '*'
	} {
		if got := Match(tc.p, tc.id); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.p, tc.id, got, tc.want)
		}
	}
}

func TestPatternCovers(t *testing.T) {
	for _, tc := range []struct {
		p, q string
		want bool
	}{
		{"*", "*", true},
		{"*", "a", true},
		{"*", "a/*", true},
		{"a/*", "*", false},
		{"a/*", "a/*", true},
		{"a/*", "a/b", true},
		{"a/*", "a/b/*", true},
		{"a/*", "a/b/c", true},
		{"a/b/*", "a/*", false},
		{"a/*", "a", false},
		{"a", "a/*", false},
		{"a", "a", true},
		{"a", "b", false},
		{"db/*", "dbx", false},
		{"db/*", "dbx/*", false},
		{"db/*", "db/x/*", true},
		{"a/*", "ab/c", false},
		{"a*", "ab", false}, // malformed p
		{"*", "a*", false},  // malformed q
		{"*", "", false},    // malformed q
		{"*", id257, false}, // malformed q
		{"a/*", "a/*/b", false},
	} {
		if got := PatternCovers(tc.p, tc.q); got != tc.want {
			t.Errorf("PatternCovers(%q, %q) = %v, want %v", tc.p, tc.q, got, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	set := []string{"a/*", "b"}
	for id, want := range map[string]bool{"a/x": true, "b": true, "a": false, "b/x": false, "c": false, "a//x": false} {
		if got := Covers(set, id); got != want {
			t.Errorf("Covers(%q, %q) = %v", set, id, got)
		}
	}
	if !Covers(nil, "anything/at/all") {
		t.Error("nil set must cover any identifier")
	}
	if Covers(nil, "a//b") {
		t.Error("nil set must not cover a malformed identifier")
	}
	if Covers([]string{}, "a") {
		t.Error("empty set must cover nothing")
	}
	if Covers([]string{"a*", "a"}, "ab") {
		t.Error("malformed pattern must match nothing")
	}
}

func TestCheckSet(t *testing.T) {
	for _, tc := range []struct {
		name     string
		set      []string
		optional bool
		msg      string // "" means canonical
	}{
		{"absent optional", nil, true, ""},
		{"absent required", nil, false, "required"},
		{"empty optional", []string{}, true, "empty array"},
		{"empty required", []string{}, false, "empty array"},
		{"one", []string{"a"}, false, ""},
		{"sorted", []string{"a", "b/*", "c"}, false, ""},
		{"bytewise not alphabetical", []string{"B", "a"}, false, ""},
		{"db and db/* are both allowed", []string{"db", "db/*"}, false, ""},
		{"db/* and dbx", []string{"db/*", "dbx"}, false, ""},
		{"required *", []string{"*"}, false, ""},
		{"optional *", []string{"*"}, true, "omitted"},
		{"unsorted", []string{"b", "a"}, false, "not sorted"},
		{"alphabetical not bytewise", []string{"a", "B"}, false, "not sorted"},
		{"duplicate", []string{"a", "a"}, false, "twice"},
		{"covered by wildcard", []string{"db/*", "db/a"}, false, `"db/a" is already covered by "db/*"`},
		{"covered deep", []string{"a/*", "a/b/c/*"}, false, "already covered"},
		{"covered by *", []string{"*", "a"}, false, `"a" is already covered by "*"`},
		{"* with a wildcard", []string{"*", "a/*"}, false, "already covered"},
		{"bad element", []string{"a", "b//c"}, false, "[1]"},
		{"bad wildcard", []string{"a*"}, false, "[0]"},
	} {
		err := CheckSet("targets", tc.set, tc.optional)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if CodeOf(err) != CodeNonCanonical || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want non_canonical containing %q", tc.name, err, tc.msg)
		}
	}
}

// TestCoveredByAgreesWithScan checks the binary-search coverer lookup
// against a plain scan with covers, over random sorted sets drawn from a
// small universe of patterns where collisions are common.
func TestCoveredByAgreesWithScan(t *testing.T) {
	universe := []string{"*"}
	for _, a := range []string{"a", "ab", "a.b", "b", "a-", "a+"} {
		universe = append(universe, a, a+"/*")
		for _, b := range []string{"a", "c", "c+", "a/b"} {
			universe = append(universe, a+"/"+b, a+"/"+b+"/*")
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var set []string
		for _, u := range universe {
			if r.IntN(6) == 0 {
				set = append(set, u)
			}
		}
		slices.Sort(set)
		set = slices.Compact(set)
		for _, p := range universe {
			want := slices.ContainsFunc(set, func(e string) bool { return covers(e, p) })
			if got := coveredBy(set, p); got != want {
				t.Fatalf("coveredBy(%q, %q) = %v, scan says %v", set, p, got, want)
			}
			wantOther := slices.ContainsFunc(set, func(e string) bool { return e != p && covers(e, p) })
			if got := coveredByOther(set, p); got != wantOther {
				t.Fatalf("coveredByOther(%q, %q) = %v, scan says %v", set, p, got, wantOther)
			}
		}
	}
}

func TestSegmentCount(t *testing.T) {
	if got := segmentCount(1, 1000); got != 68 {
		t.Errorf("one-byte segments: %d, want 68 (69 bytes less \".\")", got)
	}
	if got := segmentCount(2, 1<<30); got != 68+69*69-1 {
		t.Errorf("segments up to two bytes: %d", got)
	}
	if got := segmentCount(256, 10); got <= 10 {
		t.Errorf("capped count %d", got)
	}
	n := 0
	allSegments(nil, 2, func(s []byte) bool {
		if identifierProblem(string(s)) != "" {
			t.Fatalf("enumerated bad segment %q", s)
		}
		n++
		return true
	})
	if n != segmentCount(2, 1<<30) {
		t.Errorf("enumerated %d segments", n)
	}
}
