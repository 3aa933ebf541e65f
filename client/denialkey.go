package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	"github.com/custodylog/custody/server/api"
	"github.com/custodylog/custody/verify"
)

// verifyDenialKey checks a DENIAL signed by a key the client does not hold:
// after the admin rotates the DENIAL key (DESIGN §1), DENIALs are signed by
// a key named in the log's trust chain, not by a checkpoint key. The
// client fetches the DENIAL's bundle and verifies it offline with its key
// set: the bundle carries the trust chain, and the decisions re-run
// requires the DENIAL to be signed by the key the chain names at its
// index. The bundle must hold exactly the answer's leaf.
func (c *Client) verifyDenialKey(ctx context.Context, doc *api.AppendResponse) error {
	b, err := c.BundleAt(ctx, doc.Index, false)
	if err != nil {
		return fmt.Errorf("fetching its bundle to check the DENIAL key: %w", err)
	}
	v, err := verify.VerifyBundle(b, c.vkey)
	if err != nil {
		return err
	}
	if !v.Valid {
		f := v.Failure()
		if f == nil {
			return fmt.Errorf("its bundle does not verify")
		}
		return fmt.Errorf("its bundle does not verify: %s: %s", f.Name, f.Detail)
	}
	if b.Subject != doc.Index {
		return fmt.Errorf("its bundle proves entry %d", b.Subject)
	}
	for _, e := range b.Entries {
		if e.Index == doc.Index {
			leaf, err := base64.StdEncoding.DecodeString(e.Leaf)
			if err == nil && bytes.Equal(leaf, doc.Leaf) {
				return nil
			}
			return fmt.Errorf("its bundle holds another leaf at %d", doc.Index)
		}
	}
	return fmt.Errorf("its bundle lacks entry %d", doc.Index)
}
