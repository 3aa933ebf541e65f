package verify

import (
	"fmt"
	"time"

	"github.com/transparency-dev/formats/proof"

	"github.com/custodylog/custody/witness"
)

// CheckWitnesses requires the policy's quorum of valid witness
// cosignatures (C2SP tlog-cosignature, cosignature/v1) on checkpoint, the
// signed note the verdict was made against, and adds the check to v: it
// names each witness that cosigned and when, and, when the quorum is not
// met, which witnesses are missing. It reports whether the quorum is met.
func CheckWitnesses(v *Verdict, checkpoint []byte, p *witness.Policy) bool {
	ev := p.Evaluate(checkpoint)
	c := Check{Name: "witness quorum", OK: ev.Satisfied}
	for _, s := range ev.Signed {
		v.Witnessed = append(v.Witnessed, s)
		c.Checks = append(c.Checks, Check{Name: "witness " + s.Witness, OK: true,
			Detail: fmt.Sprintf("%s cosigned at %s", s.KeyName, s.Time.Format(time.RFC3339))})
	}
	switch {
	case ev.Satisfied:
		c.Detail = ev.Describe()
	case len(ev.Signed) == 0 && len(ev.Invalid) == 0:
		c.Detail = fmt.Sprintf("the checkpoint (size %d) carries no witness cosignature, and the policy requires %s: "+
			"it was published before its witnesses answered, or they never did; get a checkpoint the witnesses cosigned", v.Size, ev.Quorum)
	default:
		c.Detail = "the checkpoint does not meet the witness policy: " + ev.Describe()
	}
	return v.add(c)
}

// TLogProofCheckpoint returns the checkpoint a C2SP tlog-proof file
// carries (with its cosignature lines), or nil if the file does not parse.
func TLogProofCheckpoint(data []byte) []byte {
	var p proof.TLogProof
	if err := p.Unmarshal(data); err != nil {
		return nil
	}
	return p.Checkpoint
}
