package merkle

import (
	"strings"
	"testing"
)

// TestProofFailureReadable: a failed proof names the roots in base64 on
// one line, never as Go byte slices.
func TestProofFailureReadable(t *testing.T) {
	leaf := LeafHash([]byte("a"))
	other := LeafHash([]byte("b"))
	root := NodeHash(leaf, other)
	err := VerifyInclusion(0, 2, leaf, []Hash{leaf}, root) // wrong sibling
	if err == nil {
		t.Fatal("a wrong proof verified")
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "[\n") || !strings.Contains(msg, root.String()) || !strings.Contains(msg, "not "+root.String()) {
		t.Errorf("proof failure: %q", msg)
	}
}
