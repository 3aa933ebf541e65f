package sign

import (
	"strings"
	"testing"
)

func TestParsePasskeyFile(t *testing.T) {
	if _, _, err := ParsePasskeyFile([]byte(`{"key_type":"webauthn-es256"}`)); err == nil {
		t.Fatal("a passkey file without its key was accepted")
	}
	if _, _, err := ParsePasskeyFile([]byte(`{"key_type":"webauthn-es256","extra":1}`)); err == nil || !strings.Contains(err.Error(), "not a passkey file") {
		t.Fatalf("an unknown field: %v", err)
	}
}
