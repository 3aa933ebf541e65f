package sign

// Passphrase-encrypted PKCS#8 (RFC 5958 EncryptedPrivateKeyInfo) with PBES2
// (RFC 8018 §6.2): what `openssl pkcs8 -topk8 -v2 aes-256-cbc [-scrypt]`
// writes and reads.
//
//	EncryptedPrivateKeyInfo ::= SEQUENCE {
//	    encryptionAlgorithm  AlgorithmIdentifier {PBES2, PBES2-params},
//	    encryptedData        OCTET STRING }
//	PBES2-params ::= SEQUENCE {
//	    keyDerivationFunc AlgorithmIdentifier,  -- PBKDF2 (RFC 8018 A.2) or scrypt (RFC 7914 §7)
//	    encryptionScheme  AlgorithmIdentifier } -- aes256-CBC-PAD, params = IV

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"

	"golang.org/x/crypto/scrypt"
)

var (
	oidPBES2          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidScrypt         = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11591, 4, 11}
	oidHMACWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACWithSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidAES256CBC      = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
)

// Scrypt parameters used when writing: N = 2^14, r = 8, p = 1 (16 MiB,
// tens of milliseconds). This is OpenSSL's own -scrypt default and the
// largest N with r = 8 that OpenSSL 3.0 will decrypt under its default
// 32 MiB scrypt memory limit, so files stay readable by `openssl pkcs8`.
const (
	scryptN       = 1 << 14
	scryptR       = 8
	scryptP       = 1
	kdfSaltLen    = 16
	aes256KeySize = 32
)

// kdfLimits bounds the work an encrypted key file can ask of us, so that a
// hostile file cannot demand gigabytes of memory or hours of PBKDF2.
type kdfLimits struct {
	maxScryptMem int64 // bytes: 128 * r * N
	maxScryptP   int
	maxPBKDF2    int // iterations
}

var defaultKDFLimits = kdfLimits{maxScryptMem: 1 << 30, maxScryptP: 16, maxPBKDF2: 10_000_000}

type encryptedPrivateKeyInfo struct {
	Algo          pkix.AlgorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc pkix.AlgorithmIdentifier
	EncryptionScheme  pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

type scryptParams struct {
	Salt                     []byte
	CostParameter            int
	BlockSize                int
	ParallelizationParameter int
	KeyLength                int `asn1:"optional"`
}

// unmarshalDER parses exactly one DER value into v, with no trailing bytes.
func unmarshalDER(der []byte, v any, what string) error {
	rest, err := asn1.Unmarshal(der, v)
	if err != nil {
		return fmt.Errorf("malformed %s: %v", what, err)
	}
	if len(rest) != 0 {
		return fmt.Errorf("malformed %s: trailing data", what)
	}
	return nil
}

// encryptPKCS8 wraps a DER PKCS#8 PrivateKeyInfo with PBES2(scrypt,
// AES-256-CBC) at the writing parameters above.
func encryptPKCS8(plain, passphrase []byte) ([]byte, error) {
	return encryptPBES2(plain, passphrase, kdfSpec{scryptN: scryptN, scryptR: scryptR, scryptP: scryptP})
}

// kdfSpec selects the key derivation for encryptPBES2: scrypt when scryptN
// is set, else PBKDF2-HMAC-SHA256 with pbkdf2Iter iterations (tests only).
type kdfSpec struct {
	scryptN, scryptR, scryptP int
	pbkdf2Iter                int
}

func encryptPBES2(plain, passphrase []byte, spec kdfSpec) ([]byte, error) {
	salt := make([]byte, kdfSaltLen)
	iv := make([]byte, aes.BlockSize)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	if _, err := rand.Read(iv); err != nil {
		return nil, err
	}
	var key []byte
	var kdfAlg pkix.AlgorithmIdentifier
	if spec.scryptN != 0 {
		k, err := scrypt.Key(passphrase, salt, spec.scryptN, spec.scryptR, spec.scryptP, aes256KeySize)
		if err != nil {
			return nil, err
		}
		params, err := asn1.Marshal(scryptParams{Salt: salt, CostParameter: spec.scryptN, BlockSize: spec.scryptR, ParallelizationParameter: spec.scryptP})
		if err != nil {
			return nil, err
		}
		key, kdfAlg = k, pkix.AlgorithmIdentifier{Algorithm: oidScrypt, Parameters: asn1.RawValue{FullBytes: params}}
	} else {
		k, err := pbkdf2.Key(sha256.New, string(passphrase), salt, spec.pbkdf2Iter, aes256KeySize)
		if err != nil {
			return nil, err
		}
		params, err := asn1.Marshal(pbkdf2Params{Salt: salt, IterationCount: spec.pbkdf2Iter,
			PRF: pkix.AlgorithmIdentifier{Algorithm: oidHMACWithSHA256, Parameters: asn1.NullRawValue}})
		if err != nil {
			return nil, err
		}
		key, kdfAlg = k, pkix.AlgorithmIdentifier{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: params}}
	}
	defer clear(key)
	ivDER, err := asn1.Marshal(iv)
	if err != nil {
		return nil, err
	}
	params, err := asn1.Marshal(pbes2Params{
		KeyDerivationFunc: kdfAlg,
		EncryptionScheme:  pkix.AlgorithmIdentifier{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: ivDER}},
	})
	if err != nil {
		return nil, err
	}
	// PKCS#5 padding (RFC 8018 §6.1.1 step 4): 1..16 bytes of value n.
	n := aes.BlockSize - len(plain)%aes.BlockSize
	padded := append(bytes.Clone(plain), bytes.Repeat([]byte{byte(n)}, n)...)
	defer clear(padded)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	ct := make([]byte, len(padded))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(ct, padded)
	return asn1.Marshal(encryptedPrivateKeyInfo{
		Algo:          pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: params}},
		EncryptedData: ct,
	})
}

// decryptPKCS8 unwraps an EncryptedPrivateKeyInfo and returns the DER
// PrivateKeyInfo. It accepts PBES2 with PBKDF2 (PRF HMAC-SHA256, or the
// RFC 8018 default HMAC-SHA1 for older files) or scrypt, and AES-256-CBC.
// A wrong passphrase yields ErrWrongPassphrase.
func decryptPKCS8(der, passphrase []byte, lim kdfLimits) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if err := unmarshalDER(der, &info, "EncryptedPrivateKeyInfo"); err != nil {
		return nil, err
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("unsupported encryption %v (want PBES2)", info.Algo.Algorithm)
	}
	var params pbes2Params
	if err := unmarshalDER(info.Algo.Parameters.FullBytes, &params, "PBES2 parameters"); err != nil {
		return nil, err
	}
	if !params.EncryptionScheme.Algorithm.Equal(oidAES256CBC) {
		return nil, fmt.Errorf("unsupported cipher %v (want aes-256-cbc)", params.EncryptionScheme.Algorithm)
	}
	var iv []byte
	if err := unmarshalDER(params.EncryptionScheme.Parameters.FullBytes, &iv, "AES-CBC IV"); err != nil {
		return nil, err
	}
	if len(iv) != aes.BlockSize {
		return nil, fmt.Errorf("AES-CBC IV is %d bytes, want %d", len(iv), aes.BlockSize)
	}
	key, err := deriveKey(params.KeyDerivationFunc, passphrase, lim)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	ct := info.EncryptedData
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted data is %d bytes, not a positive multiple of %d", len(ct), aes.BlockSize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	plain := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, ct)
	n := int(plain[len(plain)-1])
	if n == 0 || n > aes.BlockSize {
		return nil, ErrWrongPassphrase
	}
	for _, b := range plain[len(plain)-n:] {
		if int(b) != n {
			return nil, ErrWrongPassphrase
		}
	}
	return plain[:len(plain)-n], nil
}

func deriveKey(kdf pkix.AlgorithmIdentifier, passphrase []byte, lim kdfLimits) ([]byte, error) {
	switch {
	case kdf.Algorithm.Equal(oidPBKDF2):
		var p pbkdf2Params
		if err := unmarshalDER(kdf.Parameters.FullBytes, &p, "PBKDF2 parameters"); err != nil {
			return nil, err
		}
		if p.KeyLength != 0 && p.KeyLength != aes256KeySize {
			return nil, fmt.Errorf("PBKDF2 key length %d, want %d", p.KeyLength, aes256KeySize)
		}
		if p.IterationCount < 1 || p.IterationCount > lim.maxPBKDF2 {
			return nil, fmt.Errorf("PBKDF2 iteration count %d outside 1..%d", p.IterationCount, lim.maxPBKDF2)
		}
		if len(p.Salt) == 0 {
			return nil, errors.New("PBKDF2 salt is empty")
		}
		switch {
		case p.PRF.Algorithm.Equal(oidHMACWithSHA256):
			return pbkdf2.Key(sha256.New, string(passphrase), p.Salt, p.IterationCount, aes256KeySize)
		case len(p.PRF.Algorithm) == 0 || p.PRF.Algorithm.Equal(oidHMACWithSHA1):
			return nil, errors.New("PBKDF2 with HMAC-SHA1 is not supported (re-encrypt with `openssl pkcs8 -topk8 -v2 aes-256-cbc`)")
		default:
			return nil, fmt.Errorf("unsupported PBKDF2 PRF %v (want hmacWithSHA256)", p.PRF.Algorithm)
		}
	case kdf.Algorithm.Equal(oidScrypt):
		var p scryptParams
		if err := unmarshalDER(kdf.Parameters.FullBytes, &p, "scrypt parameters"); err != nil {
			return nil, err
		}
		if p.KeyLength != 0 && p.KeyLength != aes256KeySize {
			return nil, fmt.Errorf("scrypt key length %d, want %d", p.KeyLength, aes256KeySize)
		}
		n, r, pp := p.CostParameter, p.BlockSize, p.ParallelizationParameter
		if n < 2 || n&(n-1) != 0 || r < 1 || pp < 1 || pp > lim.maxScryptP ||
			int64(r) > lim.maxScryptMem/128 || int64(n) > lim.maxScryptMem/(128*int64(r)) {
			return nil, fmt.Errorf("scrypt parameters N=%d r=%d p=%d out of bounds", n, r, pp)
		}
		if len(p.Salt) == 0 {
			return nil, errors.New("scrypt salt is empty")
		}
		return scrypt.Key(passphrase, p.Salt, n, r, pp, aes256KeySize)
	default:
		return nil, fmt.Errorf("unsupported key derivation %v (want PBKDF2 or scrypt)", kdf.Algorithm)
	}
}
