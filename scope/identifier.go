package scope

import "fmt"

// MaxIdentifierLen is the longest identifier, and the longest pattern, in
// bytes (DESIGN §1: 1..256 bytes).
const MaxIdentifierLen = 256

// segmentAlphabet holds, in byte order, every byte a segment may contain:
// A-Z a-z 0-9 . _ : @ + = - (DESIGN §1). '/' separates segments.
const segmentAlphabet = "+-.0123456789:=@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

var segmentByte = func() (t [256]bool) {
	for i := 0; i < len(segmentAlphabet); i++ {
		t[segmentAlphabet[i]] = true
	}
	return t
}()

// CheckIdentifier reports whether s is an identifier: 1..256 bytes of
// A-Z a-z 0-9 . _ : @ + = - with '/' as a segment separator, no empty
// segment and no segment made only of dots. Ids, names, workflow and step
// ids, targets, capabilities, principals and limit keys are identifiers.
// The error is an *Error with CodeNonCanonical.
func CheckIdentifier(s string) error {
	if p := identifierProblem(s); p != "" {
		return errorf(CodeNonCanonical, "identifier %s %s", quote(s), p)
	}
	return nil
}

// identifierProblem returns "" if s is an identifier, or the phrase that
// says why not. It allocates only on failure.
func identifierProblem(s string) string {
	if len(s) == 0 {
		return "is empty"
	}
	if len(s) > MaxIdentifierLen {
		return fmt.Sprintf("is %d bytes, over the %d-byte limit", len(s), MaxIdentifierLen)
	}
	start, dotsOnly := 0, true
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '/' {
			if i == start {
				return fmt.Sprintf("has an empty segment at byte %d", i)
			}
			if dotsOnly {
				return fmt.Sprintf("has a segment made only of dots (%q)", s[start:i])
			}
			start, dotsOnly = i+1, true
			continue
		}
		c := s[i]
		if !segmentByte[c] {
			return fmt.Sprintf("has byte 0x%02x at offset %d; only A-Z a-z 0-9 . _ : @ + = - and '/' between segments are allowed", c, i)
		}
		if c != '.' {
			dotsOnly = false
		}
	}
	return ""
}
