package scope

import "strings"

// CheckPattern reports whether p is a pattern: an identifier (matching only
// itself), "prefix/*" with prefix an identifier (matching every identifier
// below "prefix/", one or more segments), or "*" (matching every
// identifier). '*' appears only as a whole final segment, and the pattern as
// written is at most 256 bytes. The error is an *Error with
// CodeNonCanonical.
func CheckPattern(p string) error {
	if prob := patternProblem(p); prob != "" {
		return errorf(CodeNonCanonical, "pattern %s %s", quote(p), prob)
	}
	return nil
}

func patternProblem(p string) string {
	if p == "*" {
		return ""
	}
	if len(p) > MaxIdentifierLen {
		return identifierProblem(p) // the length phrase
	}
	if prefix, ok := strings.CutSuffix(p, "/*"); ok {
		if strings.IndexByte(prefix, '*') >= 0 {
			return "has '*' that is not the whole final segment"
		}
		if prefix == "" {
			return "has an empty segment before \"/*\""
		}
		if prob := identifierProblem(prefix); prob != "" {
			return "has a prefix that " + prob
		}
		return ""
	}
	if strings.IndexByte(p, '*') >= 0 {
		return "has '*' that is not the whole final segment"
	}
	return identifierProblem(p)
}

// isWildcard reports whether the valid pattern p is "*" or "prefix/*".
func isWildcard(p string) bool { return p != "" && p[len(p)-1] == '*' }

// wildcardPrefix returns what every identifier matched by the valid
// wildcard p starts with: "" for "*", "prefix/" for "prefix/*".
func wildcardPrefix(p string) string { return p[:len(p)-1] }

// Match reports whether the pattern matches the identifier. It is false
// when either is malformed.
func Match(pattern, id string) bool {
	if patternProblem(pattern) != "" || identifierProblem(id) != "" {
		return false
	}
	return match(pattern, id)
}

// match is Match for a valid pattern and identifier.
func match(p, id string) bool {
	if !isWildcard(p) {
		return p == id
	}
	prefix := wildcardPrefix(p)
	// "prefix/*" needs at least one segment after "prefix/"; id is valid,
	// so a non-empty remainder is one or more well-formed segments.
	return len(id) > len(prefix) && strings.HasPrefix(id, prefix)
}

// PatternCovers reports whether p covers q: every identifier q matches, p
// matches too. It is false when either is malformed. The test is exact:
// for two patterns of this grammar, the identifiers q matches are a subset
// of those p matches exactly when PatternCovers(p, q). Set containment is
// built from it, element by element.
func PatternCovers(p, q string) bool {
	if patternProblem(p) != "" || patternProblem(q) != "" {
		return false
	}
	return covers(p, q)
}

// covers is PatternCovers for valid patterns.
func covers(p, q string) bool {
	if p == q {
		return true
	}
	if !isWildcard(p) {
		return false // an exact p matches one identifier; q != p matches another or more
	}
	prefix := wildcardPrefix(p)
	if isWildcard(q) {
		// "a/b/*" is below "a/*" (and "*" is below nothing but itself).
		return strings.HasPrefix(wildcardPrefix(q), prefix)
	}
	return len(q) > len(prefix) && strings.HasPrefix(q, prefix)
}

// Covers reports whether some pattern of set matches id. A nil set means
// "any": it covers every well-formed identifier. A non-nil empty set covers
// nothing. set need not be canonical.
func Covers(set []string, id string) bool {
	if identifierProblem(id) != "" {
		return false
	}
	if set == nil {
		return true
	}
	for _, p := range set {
		if patternProblem(p) == "" && match(p, id) {
			return true
		}
	}
	return false
}
