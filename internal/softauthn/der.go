package softauthn

import (
	"encoding/asn1"
	"math/big"
)

type ecdsaSig struct{ R, S *big.Int }

func parseDER(b []byte) (r, s *big.Int, err error) {
	var v ecdsaSig
	if _, err := asn1.Unmarshal(b, &v); err != nil {
		return nil, nil, err
	}
	return v.R, v.S, nil
}

func marshalDER(r, s *big.Int) ([]byte, error) { return asn1.Marshal(ecdsaSig{r, s}) }
