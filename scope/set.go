package scope

import (
	"slices"
	"sort"
	"strings"
)

// CheckSet reports whether set is a canonical set of patterns (DESIGN §3):
// every element a pattern, sorted bytewise, no duplicates, no element
// covered by another element, and — when optional — absent (nil) rather
// than ["*"]. A required set must be present; no set may be empty (the
// canonical JSON profile has no empty arrays). name ("targets") is used in
// the message. The error is an *Error with CodeNonCanonical.
func CheckSet(name string, set []string, optional bool) error {
	switch {
	case set == nil && optional:
		return nil
	case set == nil:
		return errorf(CodeNonCanonical, "%s is required", name)
	case len(set) == 0:
		return errorf(CodeNonCanonical, "%s is an empty array; an optional set is omitted instead, a required one needs a pattern", name)
	}
	for i, p := range set {
		if prob := patternProblem(p); prob != "" {
			return errorf(CodeNonCanonical, "%s[%d] %s %s", name, i, quote(p), prob)
		}
	}
	for i := 1; i < len(set); i++ {
		switch {
		case set[i-1] == set[i]:
			return errorf(CodeNonCanonical, "%s holds %s twice", name, quote(set[i]))
		case set[i-1] > set[i]:
			return errorf(CodeNonCanonical, "%s is not sorted: %s comes before %s", name, quote(set[i-1]), quote(set[i]))
		}
	}
	for _, p := range set {
		if coveredByOther(set, p) {
			return errorf(CodeNonCanonical, "%s element %s is already covered by %s in the same set", name, quote(p), quote(firstCoverer(set, p)))
		}
	}
	if optional && len(set) == 1 && set[0] == "*" {
		return errorf(CodeNonCanonical, `%s must be omitted rather than written ["*"]`, name)
	}
	return nil
}

// firstCoverer names, for a message, an element of set other than p that
// covers p.
func firstCoverer(set []string, p string) string {
	for _, e := range set {
		if e != p && covers(e, p) {
			return e
		}
	}
	return ""
}

// The helpers below take a canonical set, which is sorted, and find
// coverers by binary search: a valid pattern p is covered by p itself, by
// "*", or by "a/*" for each "a/" that p starts with — O(segments * log n)
// instead of a scan of the set.

// coveredBy reports whether some element of the canonical set covers the
// valid pattern p.
func coveredBy(set []string, p string) bool {
	_, found := slices.BinarySearch(set, p)
	return found || coveredByOther(set, p)
}

// coveredByOther reports whether an element of the sorted set other than p
// covers the valid pattern p.
func coveredByOther(set []string, p string) bool {
	if len(set) == 0 {
		return false
	}
	if p != "*" && set[0] == "*" { // '*' sorts before every identifier byte
		return true
	}
	end := len(p)
	if isWildcard(p) {
		end = len(p) - 2 // skip the final "/*": that slash makes p itself
	}
	for i := 0; i < end; i++ {
		if p[i] == '/' && hasWildcard(set, p[:i+1]) {
			return true
		}
	}
	return false
}

// hasWildcard reports whether the sorted set holds prefix+"*", without
// building that string.
func hasWildcard(set []string, prefix string) bool {
	_, found := slices.BinarySearchFunc(set, prefix, compareWildcard)
	return found
}

// compareWildcard compares e with prefix+"*" bytewise.
func compareWildcard(e, prefix string) int {
	n := min(len(e), len(prefix))
	if c := strings.Compare(e[:n], prefix[:n]); c != 0 {
		return c
	}
	if len(e) <= len(prefix) {
		return -1 // e is a prefix of prefix+"*" and shorter
	}
	switch rest := e[len(prefix):]; {
	case rest[0] < '*':
		return -1
	case rest[0] > '*' || len(rest) > 1:
		return 1
	}
	return 0
}

// narrower reports whether the canonical set c means strictly less than
// the canonical set p, given that every element of c is covered by an
// element of p. nil means "any".
//
// Containment is decided element by element, but "covers less" is about
// meaning: c equals p in meaning exactly when every element of p is
// covered by the union of c. Because identifiers are at most 256 bytes, a
// union of exact identifiers can equal a wildcard near that limit (the 68
// one-byte segments under a 254-byte prefix are all that "prefix/*"
// matches), so fullyCovered counts that case too, and such a child is a
// transfer, not a narrowing.
func narrower(p, c []string) bool {
	switch {
	case p == nil:
		return c != nil && !fullyCovered(c, "*")
	case c == nil:
		return false // c means "any" and p is present: not contained, so not narrower
	case slices.Equal(p, c):
		return false
	}
	for _, e := range p {
		if !fullyCovered(c, e) {
			return true
		}
	}
	return false
}

// fullyCovered reports whether every identifier the valid pattern p matches
// is matched by some element of the canonical set c.
func fullyCovered(c []string, p string) bool {
	if coveredBy(c, p) {
		return true
	}
	if !isWildcard(p) {
		return false // an exact p is matched only by a pattern that covers it
	}
	// No single element covers p, so each identifier prefix+s for a
	// one-segment s must be in c exactly (its only other coverers would
	// cover p), and each prefix+s+"/*" that can still match something must
	// be fully covered in turn. That needs at least one element of c per
	// possible segment; when c is smaller, which is always unless the
	// prefix is within a few bytes of the length limit, the answer is no.
	prefix := wildcardPrefix(p)
	room := MaxIdentifierLen - len(prefix)
	under := countUnder(c, prefix)
	if segmentCount(room, under) > under {
		return false
	}
	seg := make([]byte, 0, room)
	return allSegments(seg, room, func(s []byte) bool {
		id := prefix + string(s)
		if _, found := slices.BinarySearch(c, id); !found {
			return false
		}
		if len(id)+2 <= MaxIdentifierLen { // id+"/*" is a pattern that matches something
			return fullyCovered(c, id+"/*")
		}
		return true
	})
}

// countUnder returns how many elements of the sorted set start with prefix;
// they sit next to each other.
func countUnder(set []string, prefix string) int {
	lo := sort.SearchStrings(set, prefix)
	hi := lo + sort.Search(len(set)-lo, func(i int) bool {
		return !strings.HasPrefix(set[lo+i], prefix)
	})
	return hi - lo
}

// segmentCount returns how many segments of 1..room bytes exist (every
// string over segmentAlphabet but the all-dot ones), or any number above
// limit once it is clear the count exceeds limit.
func segmentCount(room, limit int) int {
	total, pow := 0, 1
	for l := 1; l <= room; l++ {
		pow *= len(segmentAlphabet)
		total += pow - 1
		if total > limit {
			return total
		}
	}
	return total
}

// allSegments calls f with every segment of 1..room bytes, shortest first,
// until f returns false; it reports whether f always returned true.
func allSegments(buf []byte, room int, f func([]byte) bool) bool {
	for n := 1; n <= room; n++ {
		if !segmentsOfLen(buf[:0], n, true, f) {
			return false
		}
	}
	return true
}

func segmentsOfLen(buf []byte, n int, dotsOnly bool, f func([]byte) bool) bool {
	if len(buf) == n {
		return dotsOnly || f(buf)
	}
	for i := 0; i < len(segmentAlphabet); i++ {
		c := segmentAlphabet[i]
		if !segmentsOfLen(append(buf, c), n, dotsOnly && c == '.', f) {
			return false
		}
	}
	return true
}
