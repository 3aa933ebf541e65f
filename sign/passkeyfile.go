package sign

import (
	"bytes"
	"fmt"

	"github.com/custodylog/custody/canon"
)

// PasskeyFile is a passkey file (docs/FORMATS.md; custody principal
// enroll --passkey reads one): a WebAuthn credential's public key and
// where it signs, as a PRINCIPAL binds them.
type PasskeyFile struct {
	KeyType      string   `json:"key_type"`
	PublicKey    string   `json:"public_key"`
	CredentialID string   `json:"credential_id"`
	RPID         string   `json:"rp_id"`
	Origins      []string `json:"origins"`
	AllowedTypes []string `json:"allowed_types,omitempty"`
}

// ParsePasskeyFile reads and checks a passkey file's bytes: strict JSON,
// closed schema, and the key, rp_id and origins as NewPasskey takes them.
func ParsePasskeyFile(b []byte) (*PasskeyFile, *Passkey, error) {
	var pf PasskeyFile
	if err := canon.UnmarshalRelaxed(bytes.TrimSpace(b), &pf); err != nil {
		return nil, nil, fmt.Errorf("not a passkey file {key_type, public_key, credential_id, rp_id, origins[, allowed_types]}: %w", err)
	}
	pk, err := NewPasskey(pf.KeyType, pf.PublicKey, pf.RPID, pf.Origins)
	if err != nil {
		return nil, nil, err
	}
	return &pf, pk, nil
}
