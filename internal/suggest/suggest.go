// Package suggest finds what a user probably meant by a name that is not
// one: the "did you mean" of an unknown command or flag.
//
// It promises only a candidate close enough to be a plausible typo (a
// prefix of it, or at most two edits away, one for short names), or none;
// it never picks among distant names.
package suggest

// Closest returns the candidate closest to name, if it is close enough to
// be what the user meant: one name begins with (three letters or more), or
// one at most two edits away (one for names of three letters or fewer).
// "" when none is.
func Closest(name string, candidates []string) string {
	best, bestD := "", 3
	if len(name) <= 3 {
		bestD = 2
	}
	for _, c := range candidates {
		if len(name) >= 3 && len(c) >= len(name) && c[:len(name)] == name {
			return c
		}
		if d := Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Distance is the Damerau-Levenshtein distance (optimal string alignment)
// between a and b: insertions, deletions, substitutions and swaps of two
// neighbours each count one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
