// Package signcmd holds sign (validate, canonicalise and sign a statement
// file) and scope (hash scope descriptors and check attenuation).
package signcmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/author"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/statement"
)

// SignCommand is `custody sign`.
func SignCommand() *cli.Command {
	return &cli.Command{
		Name:      "sign",
		Usage:     "validate, canonicalise and sign a statement file",
		UsageText: "custody sign --key FILE [--seal] STATEMENT.json|-",
		Description: `Reads a statement written by hand or by another tool (any whitespace and key
order; the strict profile otherwise: no nulls, no floats, no unknown fields),
checks it against the schema of its "type", and prints its DSSE envelope as
canonical JSON, ready for custody append. A CONFIRM or DELEGATE carries a
scope_hash computed from its scope, limits, timestamp and ttl_seconds:
custody confirm and custody delegate fill it for you, and --seal computes it
here (replacing any value the file has).

Example:

   custody sign --key alice.key --seal confirm.json >> envelopes.jsonl`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "key", Usage: "the signer's private key file", Required: true, TakesFile: true},
			&cli.BoolFlag{Name: "seal", Usage: "compute scope_hash of a CONFIRM or DELEGATE"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := clikit.Args(c, 1, 1, "the STATEMENT file (or - for standard input)")
			if err != nil {
				return err
			}
			data, err := clikit.ReadInput(c, a[0])
			if err != nil {
				return fmt.Errorf("sign: %w", err)
			}
			st, note, err := author.ParseStatement(data, c.Bool("seal"))
			if err != nil {
				return fmt.Errorf("sign: %s: %w", a[0], err)
			}
			if note != "" {
				fmt.Fprintf(c.Root().ErrWriter, "custody: sign: %s\n", note)
			}
			priv, err := keyfile.ReadPrivate(c.String("key"))
			if err != nil {
				return fmt.Errorf("sign: %w", err)
			}
			defer clear(priv)
			_, raw, err := statement.Sign(priv, st)
			if err != nil {
				return fmt.Errorf("sign: %w", err)
			}
			_, err = fmt.Fprintf(c.Root().Writer, "%s\n", raw)
			return err
		},
	}
}

// ScopeCommand is `custody scope`.
func ScopeCommand() *cli.Command {
	return &cli.Command{
		Name:  "scope",
		Usage: "hash scope descriptors and check attenuation",
		Description: `A scope descriptor is what a grant allows, derived from it: workflow_id,
the sets step_ids, targets, capabilities, principals, the limits and
expires_at. Its hash is the grant's scope_hash; a child grant must attenuate
(be strictly narrower than) its parent.

Example:

   custody scope hash descriptor.json
   custody scope check --parent parent.json --child child.json`,
		Commands: []*cli.Command{scopeHashCommand(), scopeCheckCommand()},
	}
}

func scopeHashCommand() *cli.Command {
	return &cli.Command{
		Name:      "hash",
		Usage:     "print the scope_hash of a scope descriptor",
		UsageText: "custody scope hash [--json] DESCRIPTOR.json|-",
		Description: `Reads a scope descriptor (JSON; whitespace and key order are free, the sets
must be canonical: sorted, no duplicates, no element covered by another) and
prints its scope_hash: hex SHA-256 of "custody/scope/v1\x00" || JCS(descriptor).

Example:

   echo '{"capabilities":["purchase"],"expires_at":"2026-03-19T08:27:00Z","targets":["airline_portal/account_123"],"workflow_id":"wf_9f3a"}' | custody scope hash -`,
		Flags: []cli.Flag{clikit.JSONFlag()},
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := clikit.Args(c, 1, 1, "the DESCRIPTOR file (or - for standard input)")
			if err != nil {
				return err
			}
			d, err := readDescriptor(c, a[0])
			if err != nil {
				return err
			}
			h, err := d.Hash()
			if err != nil {
				return fmt.Errorf("scope hash: %w", err)
			}
			if c.Bool("json") {
				return clikit.WriteJSON(c.Root().Writer, map[string]string{"scope_hash": h})
			}
			_, err = fmt.Fprintln(c.Root().Writer, h)
			return err
		},
	}
}

func readDescriptor(c *cli.Command, name string) (scope.Descriptor, error) {
	data, err := clikit.ReadInput(c, name)
	if err != nil {
		return scope.Descriptor{}, fmt.Errorf("scope: %w", err)
	}
	d, err := scope.ParseDescriptor(data)
	if err != nil {
		return scope.Descriptor{}, fmt.Errorf("scope: %s: %w", name, err)
	}
	return d, nil
}

// ScopeVerdict is what scope check prints with --json.
type ScopeVerdict struct {
	OK         bool   `json:"ok"`
	ReasonCode string `json:"reason_code,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

func scopeCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "check that a child scope attenuates its parent",
		UsageText: "custody scope check --parent P.json --child C.json [--parent-revocable=true] [--child-revocable=true] [--child-depth N [--max-depth 3]] [--owner NAME] [--json]",
		Description: `Decides, with the same function the ledger uses, whether the child
descriptor is a proper attenuation of the parent: same workflow, every child
pattern covered, every parent limit kept and not raised, no later expiry, not
less revocable, and strictly narrower somewhere; and that the child's approval
rules (its "approvals") name only approvers the parent's rules cover, or the
workflow's owner given with --owner. Prints "ok" and exits 0, or
prints "<reason_code>: <sentence>" and exits 3. Revocability is a field of the
grant, not of the descriptor: give it with --parent-revocable and
--child-revocable (both default to true). So is depth: with --child-depth
equal to --max-depth (default 3) the child can never delegate, so a
principals set there restricts nothing and does not count as narrowing
(a child whose only narrowing is principals is then equal_scope).

Example:

   custody scope check --parent confirm-scope.json --child delegate-scope.json --child-revocable=false`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "parent", Usage: "the parent's scope descriptor", Required: true, TakesFile: true},
			&cli.StringFlag{Name: "child", Usage: "the child's scope descriptor", Required: true, TakesFile: true},
			&cli.BoolFlag{Name: "parent-revocable", Value: true, Usage: "whether the parent grant is revocable"},
			&cli.BoolFlag{Name: "child-revocable", Value: true, Usage: "whether the child grant is revocable"},
			&cli.IntFlag{Name: "child-depth", Usage: "the child grant's depth (a CONFIRM's grantee is 1); at --max-depth its principals do not count as narrowing"},
			&cli.IntFlag{Name: "max-depth", Value: scope.DefaultMaxDepth, Usage: "the log's max_depth from GENESIS"},
			&cli.StringFlag{Name: "owner", Usage: "the workflow owner's name, which a child's approval rules may always name as an approver"},
			clikit.JSONFlag(),
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			if _, err := clikit.Args(c, 0, 0, ""); err != nil {
				return err
			}
			p, err := readDescriptor(c, c.String("parent"))
			if err != nil {
				return err
			}
			ch, err := readDescriptor(c, c.String("child"))
			if err != nil {
				return err
			}
			final := false
			if c.IsSet("child-depth") {
				if err := scope.CheckDepth(int(c.Int("child-depth")), int(c.Int("max-depth"))); err != nil {
					return clikit.Usage(c, "--child-depth %d: %v", c.Int("child-depth"), err)
				}
				final = c.Int("child-depth") == c.Int("max-depth")
			}
			err = scope.Attenuates(scope.Grant{Descriptor: p, Revocable: c.Bool("parent-revocable")},
				scope.Grant{Descriptor: ch, Revocable: c.Bool("child-revocable"), Final: final})
			if err == nil {
				// Approval rules are not attenuated by copying: the child
				// may add rules, naming only approvers the parent's rules
				// cover or the workflow's owner (DESIGN §7).
				err = scope.CheckApprovers(ch.Approvals, []scope.Descriptor{p}, c.String("owner"))
			}
			v := ScopeVerdict{OK: err == nil}
			var se *scope.Error
			if errors.As(err, &se) {
				v.ReasonCode, v.Reason = string(se.Code), se.Msg
			} else if err != nil {
				return fmt.Errorf("scope check: %w", err)
			}
			w := c.Root().Writer
			if c.Bool("json") {
				if err := clikit.WriteJSON(w, v); err != nil {
					return err
				}
			} else if v.OK {
				fmt.Fprintln(w, "ok")
			} else {
				fmt.Fprintf(w, "%s: %s\n", v.ReasonCode, clikit.SafeText(v.Reason))
			}
			if !v.OK {
				return clikit.Denied()
			}
			return nil
		},
	}
}
