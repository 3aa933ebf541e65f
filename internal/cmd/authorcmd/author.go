// Package authorcmd holds the commands that author, sign and submit
// statements as a principal or an agent (principal, confirm, delegate,
// receipt, stop, resume, revoke) and the approval commands (approve,
// approvals). Authoring itself is package internal/author's.
package authorcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/internal/author"
	"github.com/custodylog/custody/internal/clikit"
	"github.com/custodylog/custody/internal/keyfile"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// The authoring commands (principal, confirm, delegate, receipt, stop,
// resume, revoke) share one flow: read the signer's key, build the
// statement from flags and from the entries it refers to, fill the header
// (timestamp now, the ledger's origin, the signer's bound name, the next
// seq), seal, sign, and either append it and print the decision or, with
// --out, write the envelope for someone else to submit.

// authorFlags are the flags every authoring command has; keyFlag names the
// signer's key flag ("key", or "admin-key" for principal).
func authorFlags(keyFlag, keyUsage string) []cli.Flag {
	return clikit.WithRemote(
		clikit.DirFlag(),
		&cli.StringFlag{Name: keyFlag, Usage: keyUsage, Required: true, TakesFile: true},
		&cli.StringFlag{Name: "id", Usage: "the statement id (default: <kind>_<8 random hex>)"},
		&cli.StringFlag{Name: "actor", Usage: "the signer's name (default: the name the ledger binds to the key)"},
		&cli.StringFlag{Name: "out", Usage: "write the signed envelope to this file (- for standard output) instead of appending it", TakesFile: true},
		&cli.Uint64Flag{Name: "seq", HideDefault: true, Usage: "with --out: the seq to use (default: the key's next seq in the ledger)"},
		&cli.StringFlag{Name: "origin", Usage: "with --out: the log's origin (default: the ledger's)"},
		clikit.JSONFlag(),
	)
}

// authoring is one authoring command in progress: the flags of c given
// to an author.Session.
type authoring struct {
	*author.Session
	c       *cli.Command
	offline bool // --out: the ledger is opened only if something needs it
}

func beginAuthoring(ctx context.Context, c *cli.Command, keyFlag string) (*authoring, error) {
	if _, err := clikit.Args(c, 0, 0, ""); err != nil {
		return nil, err
	}
	if err := checkEnums(c); err != nil {
		return nil, err
	}
	a := &authoring{c: c, offline: c.IsSet("out")}
	if !a.offline {
		for _, f := range []string{"seq", "origin"} {
			if c.IsSet(f) {
				return nil, clikit.Usage(c, "--%s is for --out (when appending, the ledger decides it)", f)
			}
		}
	}
	priv, err := keyfile.ReadPrivate(c.String(keyFlag))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	a.Session = author.New(priv, func() (author.Log, error) { return clikit.OpenStore(ctx, c) }, a.offline)
	a.Actor, a.Origin, a.Seq = c.String("actor"), c.String("origin"), c.Uint64("seq")
	if !a.offline {
		if _, err := a.Log("append"); err != nil {
			a.Close()
			return nil, err
		}
	}
	return a, nil
}

// id returns --id or a fresh one.
func (a *authoring) id(prefix string) string {
	if id := a.c.String("id"); id != "" {
		return id
	}
	return author.NewID(prefix)
}

// header fills the common fields of a statement of kind k.
func (a *authoring) header(k statement.Kind) (statement.Header, error) {
	if a.c.IsSet("seq") && a.Seq == 0 {
		return statement.Header{}, clikit.Usage(a.c, "--seq must be at least 1")
	}
	return a.Header(k)
}

// authorAction is the Action of a command that authors one statement
// signed with the key file in keyFlag: body runs on the begun authoring
// session, which is closed after it.
func authorAction(keyFlag string, body func(ctx context.Context, c *cli.Command, a *authoring) error) cli.ActionFunc {
	return func(ctx context.Context, c *cli.Command) error {
		a, err := beginAuthoring(ctx, c, keyFlag)
		if err != nil {
			return err
		}
		defer a.Close()
		return body(ctx, c, a)
	}
}

// sign fills the header of a statement of kind k, builds it with doc and
// finishes it (finish).
func (a *authoring) sign(ctx context.Context, k statement.Kind, doc func(h statement.Header) statement.Statement) error {
	h, err := a.header(k)
	if err != nil {
		return err
	}
	return a.finish(ctx, doc(h))
}

// finish seals, signs, and appends (or writes) st, and prints the outcome.
func (a *authoring) finish(ctx context.Context, st statement.Statement) error {
	name := a.c.FullName()
	var te *author.TTLError
	if err := a.Precheck(st); errors.As(err, &te) {
		return clikit.Usage(a.c, "%v", err)
	}
	raw, out, err := a.Sign(st)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if a.offline {
		return a.write(raw, out)
	}
	out, err = a.Append(ctx, raw, out)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	w, stderr := a.c.Root().Writer, a.c.Root().ErrWriter
	if a.c.Bool("json") {
		if err := clikit.WriteJSON(w, out); err != nil {
			return err
		}
	}
	switch {
	case out.Verdict == "refused":
		fmt.Fprintf(stderr, "refused: %s: %s (nothing was logged)\n", out.ReasonCode, clikit.SafeText(out.Reason))
		return clikit.Denied()
	case a.c.Bool("json"):
	case out.Verdict == "held":
		fmt.Fprintf(w, "held: %s %s at index %d until %s (checkpoint size %d): the step waits for approval\n", out.Kind, clikit.SafeText(out.ID), *out.Index, out.ExpiresAt, out.CheckpointSize)
		for _, r := range out.Rules {
			fmt.Fprintf(w, "needs: %d of %s (rule %s of %s)\n", r.Quorum, clikit.SafeText(strings.Join(r.Approvers, ", ")), clikit.SafeText(r.RuleID), clikit.SafeText(r.Grant))
		}
	case out.Verdict == "accepted":
		dup := ""
		if out.Duplicate {
			dup = " (duplicate: accepted before)"
		}
		fmt.Fprintf(w, "accepted: %s %s at index %d (checkpoint size %d)%s\n", out.Kind, clikit.SafeText(out.ID), *out.Index, out.CheckpointSize, dup)
		if out.ScopeHash != "" {
			fmt.Fprintf(w, "scope_hash %s\n", out.ScopeHash)
		}
		if p, ok := st.(*statement.PrincipalDoc); ok && p.Op != statement.OpRetire && out.KeyID != "" {
			// The fingerprint the person and the admin compare (DESIGN
			// §1): the registering page shows the same.
			fmt.Fprintf(w, "keyid %s (compare it with the key id the person's device or page shows)\n", out.KeyID)
		}
		for _, n := range out.Notes {
			fmt.Fprintf(w, "note: %s\n", clikit.SafeText(n))
		}
	}
	if out.Verdict != "accepted" && out.Verdict != "held" {
		fmt.Fprintf(stderr, "denied: %s: %s (DENIAL at index %d)\n", out.ReasonCode, clikit.SafeText(out.Reason), *out.Index)
		return clikit.Denied()
	}
	return nil
}

// write puts the envelope in --out instead of appending it.
func (a *authoring) write(raw []byte, out author.Outcome) error {
	file := a.c.String("out")
	out.Verdict, out.File = "written", file
	line := append(raw, '\n')
	if file == "-" {
		_, err := a.c.Root().Writer.Write(line)
		return err
	}
	if err := os.WriteFile(file, line, 0o644); err != nil {
		return fmt.Errorf("%s: %w", a.c.FullName(), err)
	}
	if a.c.Bool("json") {
		return clikit.WriteJSON(a.c.Root().Writer, out)
	}
	fmt.Fprintf(a.c.Root().Writer, "wrote %s %s (seq %d) to %s; submit it with: custody append %s\n", out.Kind, clikit.SafeText(out.ID), out.Seq, file, file)
	return nil
}

// PrincipalCommand is `custody principal`.
func PrincipalCommand() *cli.Command {
	sub := func(op, usageLine, desc string) *cli.Command {
		flags := append(authorFlags("admin-key", "the admin's private key file"),
			&cli.StringFlag{Name: "name", Usage: "the principal's name, like user:alice", Required: op != statement.OpRetire},
			&cli.StringFlag{Name: "public-key", Usage: "the principal's Ed25519 public key: a key file or the base64 key (or --passkey)"},
			&cli.StringFlag{Name: "passkey", Usage: "a passkey file {key_type, public_key, credential_id, rp_id, origins[, allowed_types]} (instead of --public-key)"},
		)
		cmdName := strings.ReplaceAll(op, "_", "-")
		return &cli.Command{
			Name:        cmdName,
			Usage:       usageLine,
			UsageText:   "custody principal " + cmdName + " --dir D --admin-key K --name N (--public-key PUB | --passkey FILE) [--id ID] [--json]",
			Description: desc,
			Flags:       flags,
			Action: func(ctx context.Context, c *cli.Command) error {
				if (c.String("public-key") == "") == (c.String("passkey") == "") {
					return clikit.Usage(c, "give exactly one of --public-key (an Ed25519 key) and --passkey (a passkey file)")
				}
				var doc statement.PrincipalDoc
				var keyID string
				if file := c.String("passkey"); file != "" {
					b, err := os.ReadFile(file)
					var pf *sign.PasskeyFile
					var pk *sign.Passkey
					if err == nil {
						pf, pk, err = sign.ParsePasskeyFile(b)
					}
					if err != nil {
						return fmt.Errorf("%s: --passkey %s: %w", c.FullName(), file, err)
					}
					author.BindPasskey(&doc, pf)
					keyID = pk.KeyID()
				} else {
					pub, _, err := keyfile.Public(c.String("public-key"))
					if err != nil {
						return fmt.Errorf("%s: --public-key: %w", c.FullName(), err)
					}
					doc.PublicKey, keyID = sign.EncodePublicKey(pub), sign.KeyID(pub)
				}
				a, err := beginAuthoring(ctx, c, "admin-key")
				if err != nil {
					return err
				}
				defer a.Close()
				name := c.String("name")
				if name == "" { // retire: the bound name
					if name, err = a.BoundName(keyID, "finding the principal's name"); err != nil {
						return err
					}
					if name == "" {
						return fmt.Errorf("%s: key %s is not bound in the ledger", c.FullName(), keyID)
					}
				}
				return a.sign(ctx, statement.Principal, func(h statement.Header) statement.Statement {
					doc.Header, doc.PrincipalID, doc.Op, doc.Name = h, a.id("principal"), op, name
					return &doc
				})
			},
		}
	}
	return &cli.Command{
		Name:  "principal",
		Usage: "enroll or retire a person's or organisation's key, or add a device's key",
		Description: `Principals are the people and organisations who grant agents authority. The
admin enrolls a principal's key under a name, once and for ever; retiring it
ends its grants from then on and never frees the key or the name. A key is
an Ed25519 key (--public-key) or a passkey (--passkey FILE, a WebAuthn
credential: see docs/FORMATS.md). A name may hold several keys, one per
device: add-key binds another one to an enrolled name.

Example:

   custody principal enroll --admin-key custody-data/keys/admin.key --name user:alice --public-key alice.key
   custody principal add-key --admin-key custody-data/keys/admin.key --name user:alice --passkey alice-phone.json`,
		Commands: []*cli.Command{
			sub(statement.OpEnroll, "bind a principal's key to a name", `Appends a PRINCIPAL statement, signed by the admin key, that binds the key
to the name. The key may then sign CONFIRMs, granting agents authority. A
passkey (--passkey FILE) signs only the kinds its allowed_types list
(default APPROVAL, STOP, RESUME). It prints the key id, for the person and
the admin to compare.

Example:

   custody principal enroll --dir ./custody-data --admin-key ./custody-data/keys/admin.key --name user:alice --public-key alice.key`),
			sub(statement.OpAddKey, "bind another key (a device, a passkey) to an enrolled principal's name", `Appends a PRINCIPAL add_key statement, signed by the admin key, that binds
one more key to an enrolled principal's name: a second device. The name's
authority (the workflows it owns, the grants it issued, its STOPs) is then
the new key's too; an approval quorum counts the name once. It prints the
key id, for the person and the admin to compare.

Example:

   custody principal add-key --dir ./custody-data --admin-key ./custody-data/keys/admin.key --name user:alice --passkey alice-phone.json`),
			sub(statement.OpRetire, "retire a principal's key", `Appends a PRINCIPAL retire statement, signed by the admin key. From then on
the key signs nothing new and the grants it issued (and everything below
them) end as if revoked; the name's other keys stay live. --name defaults
to the key's bound name.

Example:

   custody principal retire --dir ./custody-data --admin-key ./custody-data/keys/admin.key --public-key alice.key`),
		},
	}
}

// grantFlags are the scope flags of confirm and delegate.
func grantFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "grantee", Usage: "the agent's name, like agent:planner", Required: true},
		&cli.StringFlag{Name: "grantee-key", Usage: "the agent's public key: a key file or the base64 key", Required: true},
		&cli.StringSliceFlag{Name: "step", Usage: "a step_ids pattern (repeat; default: any step)"},
		&cli.StringSliceFlag{Name: "target", Usage: "a targets pattern, like airline_portal/account_123 or portal/* (repeat)", Required: true},
		&cli.StringSliceFlag{Name: "capability", Usage: "a capabilities pattern, like purchase (repeat)", Required: true},
		&cli.StringSliceFlag{Name: "principal", Usage: "a principals pattern restricting the grantees below (repeat; default: any)"},
		&cli.StringSliceFlag{Name: "limit", Usage: "a limit, key=N, like budget_usd=800 (repeat)"},
		&cli.DurationFlag{Name: "ttl", Usage: "how long the grant lasts, like 15m", Required: true},
		&cli.BoolFlag{Name: "revocable", Value: true, Usage: "whether the grant's issuer may revoke it (default: true; --revocable=false: only the admin can)"},
		&cli.StringFlag{Name: "approvals", Usage: "a JSON file holding the grant's approval rules: an array of {rule_id, capabilities, targets?, step_ids?, above?, approvers, quorum, ttl_seconds} (README: Require a person's approval)"},
	}
}

// grantFromFlags builds the grant part of a CONFIRM or DELEGATE.
func grantFromFlags(c *cli.Command, workflow string) (statement.Grant, error) {
	pub, _, err := keyfile.Public(c.String("grantee-key"))
	if err != nil {
		return statement.Grant{}, fmt.Errorf("--grantee-key: %w", err)
	}
	spec := author.GrantSpec{Grantee: c.String("grantee"), GranteeKey: pub, Workflow: workflow,
		Steps: c.StringSlice("step"), Targets: c.StringSlice("target"), Capabilities: c.StringSlice("capability"),
		Principals: c.StringSlice("principal"), Revocable: c.Bool("revocable")}
	if spec.Limits, err = author.ParseAmounts("limit", c.StringSlice("limit")); err != nil {
		return statement.Grant{}, clikit.Usage(c, "%v", err)
	}
	if spec.TTLSeconds, err = author.Seconds("ttl", c.Duration("ttl")); err != nil {
		return statement.Grant{}, clikit.Usage(c, "%v", err)
	}
	if file := c.String("approvals"); file != "" {
		if spec.Approvals, err = os.ReadFile(file); err != nil {
			return statement.Grant{}, fmt.Errorf("--approvals: %w", err)
		}
		spec.ApprovalsFrom = "--approvals " + file
	}
	return spec.Grant()
}

// ConfirmCommand is `custody confirm`.
func ConfirmCommand() *cli.Command {
	flags := append(authorFlags("key", "the principal's private key file"), grantFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "workflow", Usage: "the workflow the grant is for", Required: true},
		&cli.StringFlag{Name: "risk", Usage: "risk level: low, medium or high"},
	)
	return &cli.Command{
		Name:      "confirm",
		Usage:     "grant an agent bounded authority (as a principal)",
		UsageText: "custody confirm --dir D --key K --grantee NAME --grantee-key PUB --workflow WF [--step S]... --target T... --capability C... [--principal P]... [--limit key=N]... --ttl 15m [--revocable=false] [--approvals FILE] [--risk low|medium|high] [--json]",
		Description: `Appends a CONFIRM: the principal who owns K grants the agent NAME (key PUB)
authority in workflow WF over the given targets and capabilities, optionally
only for some steps, within the limits, for ttl. The first CONFIRM of a
workflow makes the principal its owner. Repeated flags build the sets; they
are sorted and deduplicated, and scope_hash is computed for you. Prints the
grant's id and scope_hash, which delegations and receipts refer to.

Example:

   custody confirm --dir ./custody-data --key alice.key --grantee agent:planner --grantee-key planner.key \
       --workflow wf_9f3a --step step_2 --step step_3 --target airline_portal/account_123 \
       --capability purchase --capability submit_form --limit budget_usd=800 --limit max_side_effects=1 \
       --ttl 15m --risk high --id confirm_42c1`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			g, err := grantFromFlags(c, c.String("workflow"))
			if err != nil {
				return err
			}
			return a.sign(ctx, statement.Confirm, func(h statement.Header) statement.Statement {
				return &statement.ConfirmDoc{Header: h, ConfirmID: a.id("confirm"), Grant: g, RiskLevel: c.String("risk")}
			})
		}),
	}
}

// DelegateCommand is `custody delegate`.
func DelegateCommand() *cli.Command {
	flags := append(authorFlags("key", "the delegating agent's private key file"), grantFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "parent", Usage: "the id of the grant being delegated (a CONFIRM or DELEGATE)", Required: true},
		&cli.StringFlag{Name: "workflow", Usage: "the workflow (default: the parent's)"},
		&cli.StringFlag{Name: "parent-scope-hash", Usage: "the parent's scope_hash (default: read from the parent entry)"},
	)
	return &cli.Command{
		Name:      "delegate",
		Usage:     "hand a sub-agent a strictly narrower part of a grant (as its grantee)",
		UsageText: "custody delegate --dir D --key K --parent GRANT_ID --grantee NAME --grantee-key PUB [--step S]... --target T... --capability C... [--limit key=N]... --ttl 10m [--approvals FILE] [--json]",
		Description: `Appends a DELEGATE: the grantee of the parent grant hands the agent NAME a
part of it. The ledger requires a proper attenuation: every pattern covered
by the parent's, every parent limit kept and not raised, no later expiry,
and strictly narrower somewhere (a transfer of the whole grant is denied);
and no chain deeper than the log's max_depth. The workflow and
parent_scope_hash are read from the parent entry.

Example:

   custody delegate --dir ./custody-data --key planner.key --parent confirm_42c1 \
       --grantee agent:planner/booker --grantee-key booker.key --step step_3 \
       --target airline_portal/account_123 --capability purchase \
       --limit budget_usd=742 --limit max_side_effects=1 --ttl 10m`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			parent := c.String("parent")
			wf, ph := c.String("workflow"), c.String("parent-scope-hash")
			if err := a.FromGrant("--parent", parent, &wf, &ph); err != nil {
				return err
			}
			g, err := grantFromFlags(c, wf)
			if err != nil {
				return err
			}
			return a.sign(ctx, statement.Delegate, func(h statement.Header) statement.Statement {
				return &statement.DelegateDoc{Header: h, DelegationID: a.id("delegate"), ParentRef: parent, ParentScopeHash: ph, Grant: g}
			})
		}),
	}
}

// ReceiptCommand is `custody receipt`.
func ReceiptCommand() *cli.Command {
	flags := append(authorFlags("key", "the acting agent's private key file"),
		&cli.StringFlag{Name: "result", Value: statement.ResultPending, Usage: "pending (before the step), or success, failure, partial (after it)"},
		&cli.StringFlag{Name: "auth", Usage: "the id of the grant the agent acts under (pending; outcomes default to the pending receipt's)"},
		&cli.StringFlag{Name: "workflow", Usage: "the workflow (default: the grant's)"},
		&cli.StringFlag{Name: "step", Usage: "the step id"},
		&cli.StringFlag{Name: "action", Usage: "the action, a capability like purchase"},
		&cli.StringFlag{Name: "target", Usage: "the target, like airline_portal/account_123"},
		&cli.StringSliceFlag{Name: "reserve", Usage: "pending: reserve key=N of a limit (repeat; every limit in force must be reserved, 0 is allowed)"},
		&cli.StringFlag{Name: "pending-ref", Usage: "outcome: the id of the pending receipt this one completes"},
		&cli.StringSliceFlag{Name: "consumed", Usage: "outcome: consumed key=N of a limit (repeat)"},
		&cli.StringSliceFlag{Name: "side-effect", Usage: "a side effect key=value, like booking_ref=XK42 (repeat)"},
		&cli.StringSliceFlag{Name: "evidence", Usage: "an evidence reference (repeat)"},
		&cli.StringFlag{Name: "error", Usage: "outcome: what went wrong"},
		&cli.StringFlag{Name: "scope-hash", Usage: "the grant's scope_hash (default: read from the grant entry)"},
	)
	return &cli.Command{
		Name:      "receipt",
		Usage:     "gate an irreversible step (pending) or record its outcome",
		UsageText: "custody receipt --dir D --key K --auth GRANT_ID --workflow WF --step S --action A --target T --result pending --reserve key=N... [--json]\n   custody receipt --dir D --key K --result success|failure|partial --pending-ref ID [--consumed key=N]... [--side-effect key=value]... [--evidence REF]... [--error TEXT] [--json]",
		Description: `Before an irreversible step, an agent appends a pending RECEIPT: the ledger
checks the grant and its whole chain (live, not stopped, action, target and
step in scope) and that the reservations fit every limit, and answers only
once the receipt is durable. Execute the step only after "accepted". Then
append the outcome (success, failure or partial) naming the pending receipt;
its grant, workflow, step, action and target default to the pending one's.
The charge is max(reserve, consumed) and is never released.

Example:

   custody receipt --dir ./custody-data --key booker.key --auth del_booker --step step_3 \
       --action purchase --target airline_portal/account_123 \
       --reserve budget_usd=742 --reserve max_side_effects=1 --id rcpt_1
   custody receipt --dir ./custody-data --key booker.key --result success --pending-ref rcpt_1 \
       --consumed budget_usd=742 --consumed max_side_effects=1 --side-effect booking_ref=XK42`,
		Flags: flags,
		Action: func(ctx context.Context, c *cli.Command) error {
			result := c.String("result")
			pending := result == statement.ResultPending
			if pending {
				for _, f := range []string{"auth", "step", "action", "target"} {
					if c.String(f) == "" {
						return clikit.Usage(c, "a pending receipt needs --%s", f)
					}
				}
				for _, f := range []string{"pending-ref", "consumed", "error"} {
					if c.IsSet(f) {
						return clikit.Usage(c, "--%s is for an outcome receipt (--result success|failure|partial)", f)
					}
				}
			} else {
				if c.String("pending-ref") == "" {
					return clikit.Usage(c, "an outcome receipt (--result %s) needs --pending-ref", result)
				}
				if c.IsSet("reserve") {
					return clikit.Usage(c, "--reserve is for a pending receipt")
				}
			}
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.Close()
			r := &statement.ReceiptDoc{Result: result, AuthorizationRef: c.String("auth"), Workflow: c.String("workflow"),
				StepID: c.String("step"), Action: c.String("action"), Target: c.String("target"),
				PendingRef: c.String("pending-ref"), EvidenceRefs: c.StringSlice("evidence"), Error: c.String("error"),
				ScopeHash: c.String("scope-hash")}
			if len(r.EvidenceRefs) == 0 {
				r.EvidenceRefs = nil
			}
			if r.Reserve, err = author.ParseAmounts("reserve", c.StringSlice("reserve")); err != nil {
				return clikit.Usage(c, "%v", err)
			}
			if r.Consumed, err = author.ParseAmounts("consumed", c.StringSlice("consumed")); err != nil {
				return clikit.Usage(c, "%v", err)
			}
			if r.SideEffects, err = author.ParsePairs("side-effect", c.StringSlice("side-effect")); err != nil {
				return clikit.Usage(c, "%v", err)
			}
			if !pending {
				if err := a.CompleteOutcome(r, "--pending-ref"); err != nil {
					return err
				}
			}
			if err := a.FromGrant("--auth", r.AuthorizationRef, &r.Workflow, &r.ScopeHash); err != nil {
				return err
			}
			return a.sign(ctx, statement.Receipt, func(h statement.Header) statement.Statement {
				r.Header, r.ReceiptID = h, a.id("receipt")
				return r
			})
		},
	}
}

// StopCommand is `custody stop`.
func StopCommand() *cli.Command {
	flags := append(authorFlags("key", "the signer's private key file (the workflow's owner, a grantee in it, or the admin)"),
		&cli.StringFlag{Name: "workflow", Usage: "the workflow to stop", Required: true},
		&cli.StringFlag{Name: "scope", Usage: "step (one step and the steps below it) or chain (the whole workflow)", Required: true},
		&cli.StringFlag{Name: "step", Usage: "with --scope step: the step"},
		&cli.StringFlag{Name: "takeover", Value: statement.TakeoverHuman, Usage: "who takes over: human, pause or delegate_to_other_agent"},
		&cli.StringFlag{Name: "takeover-to", Usage: "with --takeover delegate_to_other_agent: the agent's name"},
		&cli.StringFlag{Name: "reason", Usage: "why, for the record", Required: true},
	)
	return &cli.Command{
		Name:      "stop",
		Usage:     "halt a step or a whole workflow",
		UsageText: "custody stop --dir D --key K --workflow WF --scope step|chain [--step S] [--takeover human|pause|delegate_to_other_agent] [--takeover-to AGENT] --reason TEXT [--json]",
		Description: `Appends a STOP. A chain STOP denies every new pending receipt, delegation
and confirm in the workflow; a step STOP denies pending receipts for that
step and the steps below it. The workflow's owner, the grantee of a live
grant in it, or the admin may stop; a STOP is never denied for limits or
expiry, and any seq above the key's last is accepted. It stays in force
until a RESUME names it.

Example:

   custody stop --dir ./custody-data --key alice.key --workflow wf_9f3a --scope chain --takeover human --reason "trip cancelled"`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			return a.sign(ctx, statement.Stop, func(h statement.Header) statement.Statement {
				return &statement.StopDoc{Header: h, RequestID: a.id("stop"), Workflow: c.String("workflow"),
					StopScope: c.String("scope"), StepID: c.String("step"), TakeoverMode: c.String("takeover"),
					TakeoverTo: c.String("takeover-to"), Reason: c.String("reason")}
			})
		}),
	}
}

// ResumeCommand is `custody resume`.
func ResumeCommand() *cli.Command {
	flags := append(authorFlags("key", "the signer's private key file"),
		&cli.StringFlag{Name: "stop-ref", Usage: "the id of the STOP to lift", Required: true},
		&cli.StringFlag{Name: "workflow", Usage: "the workflow (default: the STOP's)"},
	)
	return &cli.Command{
		Name:      "resume",
		Usage:     "lift one STOP",
		UsageText: "custody resume --dir D --key K --stop-ref ID [--workflow WF] [--json]",
		Description: `Appends a RESUME that lifts exactly the STOP it names, once. Its signer may
lift it; the owner may lift a STOP signed by a grantee; the admin may lift
any (and only the admin lifts an admin STOP).

Example:

   custody resume --dir ./custody-data --key alice.key --stop-ref stop_1a2b3c4d`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			wf, err := a.Workflow(c.String("workflow"), "--stop-ref", c.String("stop-ref"), statement.Stop)
			if err != nil {
				return err
			}
			return a.sign(ctx, statement.Resume, func(h statement.Header) statement.Statement {
				return &statement.ResumeDoc{Header: h, ResumeID: a.id("resume"), Workflow: wf, StopRef: c.String("stop-ref")}
			})
		}),
	}
}

// RevokeCommand is `custody revoke`.
func RevokeCommand() *cli.Command {
	flags := append(authorFlags("key", "the signer's private key file"),
		&cli.StringFlag{Name: "grant", Usage: "the `ID` of the grant to revoke (a CONFIRM or DELEGATE)", Required: true},
		&cli.StringFlag{Name: "reason", Usage: "why, for the record", Required: true},
		&cli.StringFlag{Name: "workflow", Usage: "the workflow (default: the grant's)"},
	)
	return &cli.Command{
		Name:      "revoke",
		Usage:     "end a grant and everything below it",
		UsageText: "custody revoke --dir D --key K --grant GRANT_ID --reason TEXT [--json]",
		Description: `Appends a REVOKE of a grant; it cascades to every grant below. The issuer of
the grant or of any ancestor, the grant's own grantee (renouncing it), or
the admin may revoke; a non-revocable grant only the admin. Pending receipts
already accepted keep their charge and may still record their outcome.

Example:

   custody revoke --dir ./custody-data --key alice.key --grant confirm_42c1 --reason "card reported stolen"`,
		Flags: flags,
		Action: authorAction("key", func(ctx context.Context, c *cli.Command, a *authoring) error {
			wf, err := a.Workflow(c.String("workflow"), "--grant", c.String("grant"), statement.Confirm, statement.Delegate)
			if err != nil {
				return err
			}
			return a.sign(ctx, statement.Revoke, func(h statement.Header) statement.Statement {
				return &statement.RevokeDoc{Header: h, RevokeID: a.id("revoke"), Workflow: wf, TargetRef: c.String("grant"), Reason: c.String("reason")}
			})
		}),
	}
}

// enumFlags are the authoring flags that take one of a few words, with
// those words (DESIGN §3). A value outside them is a usage error (exit 2),
// found before anything is signed.
var enumFlags = map[string][]string{
	"risk":     statement.RiskLevels,
	"result":   {statement.ResultPending, statement.ResultSuccess, statement.ResultFailure, statement.ResultPartial},
	"takeover": {statement.TakeoverHuman, statement.TakeoverPause, statement.TakeoverDelegate},
}

// checkEnums checks c's enum flags that were given (and stop's --scope).
func checkEnums(c *cli.Command) error {
	check := func(flag string, values []string) error {
		if !c.IsSet(flag) {
			return nil
		}
		if v := c.String(flag); !slices.Contains(values, v) {
			return clikit.Usage(c, "--%s %q: want %s", flag, v, strings.Join(values, ", "))
		}
		return nil
	}
	for _, f := range c.Flags {
		n := f.Names()[0]
		if values, ok := enumFlags[n]; ok {
			if err := check(n, values); err != nil {
				return err
			}
		}
	}
	if c.Name == "stop" {
		return check("scope", []string{statement.StopStep, statement.StopChain})
	}
	return nil
}
