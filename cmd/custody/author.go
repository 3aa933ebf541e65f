package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/custodylog/custody/authority"
	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/ledger"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/server/api"
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
	return withRemote(
		dirFlag(),
		&cli.StringFlag{Name: keyFlag, Usage: keyUsage, Required: true, TakesFile: true},
		&cli.StringFlag{Name: "id", Usage: "the statement id (default: <kind>_<8 random hex>)"},
		&cli.StringFlag{Name: "actor", Usage: "the signer's name (default: the name the ledger binds to the key)"},
		&cli.StringFlag{Name: "out", Usage: "write the signed envelope to this file (- for standard output) instead of appending it", TakesFile: true},
		&cli.Uint64Flag{Name: "seq", HideDefault: true, Usage: "with --out: the seq to use (default: the key's next seq in the ledger)"},
		&cli.StringFlag{Name: "origin", Usage: "with --out: the log's origin (default: the ledger's)"},
		jsonFlag(),
	)
}

// authoring is one authoring command in progress.
type authoring struct {
	ctx     context.Context
	c       *cli.Command
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	l       logStore // the data folder's ledger, or the server of --ledger
	openErr error
	offline bool // --out: the ledger is opened only if something needs it
}

func beginAuthoring(ctx context.Context, c *cli.Command, keyFlag string) (*authoring, error) {
	if _, err := args(c, 0, 0, ""); err != nil {
		return nil, err
	}
	if err := checkEnums(c); err != nil {
		return nil, err
	}
	a := &authoring{ctx: ctx, c: c, offline: c.IsSet("out")}
	if !a.offline {
		for _, f := range []string{"seq", "origin"} {
			if c.IsSet(f) {
				return nil, usage(c, "--%s is for --out (when appending, the ledger decides it)", f)
			}
		}
	}
	priv, err := readPrivateKey(c.String(keyFlag))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	a.priv, a.pub = priv, publicOf(priv)
	if !a.offline {
		if _, err := a.ledger("append"); err != nil {
			a.close()
			return nil, err
		}
	}
	return a, nil
}

func (a *authoring) close() {
	clear(a.priv)
	if a.l != nil {
		a.l.Close()
	}
}

// ledger opens the ledger the first time something needs it; why says what
// for, in the error when it cannot be opened.
func (a *authoring) ledger(why string) (logStore, error) {
	if a.l != nil || a.openErr != nil {
		return a.l, a.openErr
	}
	a.l, a.openErr = openStore(a.ctx, a.c)
	if a.openErr != nil && a.offline {
		a.openErr = fmt.Errorf("%s needs the ledger (%w); give it with --dir or --ledger, or the value with its flag", why, a.openErr)
	}
	return a.l, a.openErr
}

// entry returns an accepted statement by id, of one of the given kinds.
func (a *authoring) entry(flag, id string, kinds ...statement.Kind) (*ledger.Entry, error) {
	l, err := a.ledger("looking up --" + flag + " " + id)
	if err != nil {
		return nil, err
	}
	e, err := l.EntryByID(id)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	for _, k := range kinds {
		if e.Kind() == k {
			return e, nil
		}
	}
	return nil, fmt.Errorf("--%s %s is a %s at index %d, not a %v", flag, id, e.Kind(), e.Index, kinds)
}

// id returns --id or a fresh one.
// workflow returns --workflow, or else the workflow of the entry the id in
// --flag names (which must be of one of kinds).
func (a *authoring) workflow(c *cli.Command, flag string, kinds ...statement.Kind) (string, error) {
	if wf := c.String("workflow"); wf != "" {
		return wf, nil
	}
	e, err := a.entry(flag, c.String(flag), kinds...)
	if err != nil {
		return "", err
	}
	return e.Statement.WorkflowID(), nil
}

func (a *authoring) id(prefix string) string {
	if id := a.c.String("id"); id != "" {
		return id
	}
	return newID(prefix)
}

// header fills the common fields of a statement of kind k.
func (a *authoring) header(k statement.Kind) (statement.Header, error) {
	h := statement.Header{Type: k, Timestamp: statement.FormatTimestamp(time.Now()), Actor: a.c.String("actor"), Log: a.c.String("origin"), Seq: a.c.Uint64("seq")}
	keyID := sign.KeyID(a.pub)
	if h.Log == "" {
		l, err := a.ledger("finding the log's origin")
		if err != nil {
			return h, err
		}
		h.Log = l.Origin()
	}
	if h.Actor == "" {
		l, err := a.ledger("finding the key's bound name")
		if err != nil {
			return h, err
		}
		rec, err := l.KeyBinding(keyID)
		if err != nil {
			return h, err
		}
		if rec == nil {
			return h, fmt.Errorf("key %s is not bound in the ledger %s: a person's key is enrolled with custody principal enroll, an agent's is bound as the grantee of a grant (or pass --actor)", keyID, l.Origin())
		}
		h.Actor = rec.Name
	}
	if !a.c.IsSet("seq") {
		l, err := a.ledger("finding the key's next seq")
		if err != nil {
			return h, err
		}
		if h.Seq, err = l.NextSeq(keyID); err != nil {
			return h, err
		}
	} else if h.Seq == 0 {
		return h, usage(a.c, "--seq must be at least 1")
	}
	return h, nil
}

// decisionInfo is what an authoring command prints with --json.
type decisionInfo struct {
	Verdict        string         `json:"verdict"`              // accepted, held, denied, refused, written
	ExpiresAt      string         `json:"expires_at,omitempty"` // held: the approval deadline
	Rules          []api.HoldRule `json:"rules,omitempty"`      // held: the rules it waits for
	Kind           string         `json:"kind"`
	ID             string         `json:"id"`
	Seq            uint64         `json:"seq"`
	Index          *uint64        `json:"index,omitempty"`
	ReasonCode     string         `json:"reason_code,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	Duplicate      bool           `json:"duplicate,omitempty"`
	ScopeHash      string         `json:"scope_hash,omitempty"`
	KeyID          string         `json:"keyid,omitempty"` // the key a PRINCIPAL binds, to compare
	Notes          []string       `json:"notes,omitempty"`
	CheckpointSize uint64         `json:"checkpoint_size,omitempty"`
	Checkpoint     string         `json:"checkpoint,omitempty"`
	InclusionProof []string       `json:"inclusion_proof,omitempty"`
	File           string         `json:"file,omitempty"` // with --out
}

// finish seals, signs, and appends (or writes) st, and prints the outcome.
func (a *authoring) finish(ctx context.Context, st statement.Statement) error {
	name := a.c.FullName()
	if err := a.precheck(st); err != nil {
		return err
	}
	if err := statement.Seal(st); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, raw, err := statement.Sign(a.priv, st)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	h := st.Head()
	out := decisionInfo{Kind: string(h.Type), ID: st.ID(), Seq: h.Seq}
	if g := statement.GrantOf(st); g != nil {
		out.ScopeHash = g.ScopeHash
	}
	if p, ok := st.(*statement.PrincipalDoc); ok {
		out.KeyID = principalDocKeyID(p)
	}
	w := a.c.Root().Writer
	if a.offline {
		return a.write(raw, out)
	}
	res, err := a.l.Append(ctx, raw)
	var de *authority.DecisionError
	if errors.As(err, &de) {
		out.Verdict, out.ReasonCode, out.Reason = "refused", string(de.Code), de.Reason
		if a.c.Bool("json") {
			writeJSON(w, out)
		}
		fmt.Fprintf(a.c.Root().ErrWriter, "refused: %s: %s (nothing was logged)\n", de.Code, safeText(de.Reason))
		return deniedErr()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	idx := res.Index
	out.Verdict, out.Index, out.ReasonCode, out.Reason = res.Verdict.String(), &idx, string(res.Code), res.Reason
	out.Duplicate, out.Notes, out.CheckpointSize = res.Duplicate, res.Notes, res.Head.Size
	out.Checkpoint, out.InclusionProof = string(res.Head.Checkpoint), hashStrings(res.Proof)
	if res.Verdict == authority.Accepted && res.Hold != nil {
		out.Verdict, out.ExpiresAt = "held", statement.FormatLoggedAt(res.Hold.ExpiresAt)
		for _, r := range res.Hold.Rules {
			out.Rules = append(out.Rules, api.HoldRule{Grant: r.Grant, RuleID: r.RuleID, Approvers: r.Approvers, Quorum: r.Quorum})
		}
	}
	if a.c.Bool("json") {
		if err := writeJSON(w, out); err != nil {
			return err
		}
	} else if out.Verdict == "held" {
		fmt.Fprintf(w, "held: %s %s at index %d until %s (checkpoint size %d): the step waits for approval\n", h.Type, safeText(st.ID()), res.Index, out.ExpiresAt, res.Head.Size)
		for _, r := range out.Rules {
			fmt.Fprintf(w, "needs: %d of %s (rule %s of %s)\n", r.Quorum, safeText(strings.Join(r.Approvers, ", ")), safeText(r.RuleID), safeText(r.Grant))
		}
	} else if res.Verdict == authority.Accepted {
		dup := ""
		if res.Duplicate {
			dup = " (duplicate: accepted before)"
		}
		fmt.Fprintf(w, "accepted: %s %s at index %d (checkpoint size %d)%s\n", h.Type, safeText(st.ID()), res.Index, res.Head.Size, dup)
		if out.ScopeHash != "" {
			fmt.Fprintf(w, "scope_hash %s\n", out.ScopeHash)
		}
		if p, ok := st.(*statement.PrincipalDoc); ok && p.Op != statement.OpRetire && out.KeyID != "" {
			// The fingerprint the person and the admin compare (DESIGN
			// §1): the registering page shows the same.
			fmt.Fprintf(w, "keyid %s (compare it with the key id the person's device or page shows)\n", out.KeyID)
		}
		for _, n := range res.Notes {
			fmt.Fprintf(w, "note: %s\n", safeText(n))
		}
	}
	if res.Verdict != authority.Accepted {
		fmt.Fprintf(a.c.Root().ErrWriter, "denied: %s: %s (DENIAL at index %d)\n", res.Code, safeText(res.Reason), res.Index)
		return deniedErr()
	}
	return nil
}

// write puts the envelope in --out instead of appending it.
func (a *authoring) write(raw []byte, out decisionInfo) error {
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
		return writeJSON(a.c.Root().Writer, out)
	}
	fmt.Fprintf(a.c.Root().Writer, "wrote %s %s (seq %d) to %s; submit it with: custody append %s\n", out.Kind, safeText(out.ID), out.Seq, file, file)
	return nil
}

func principalCommand() *cli.Command {
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
					return usage(c, "give exactly one of --public-key (an Ed25519 key) and --passkey (a passkey file)")
				}
				var doc statement.PrincipalDoc
				var keyID string
				if file := c.String("passkey"); file != "" {
					pk, err := readPasskeyFile(file)
					if err != nil {
						return fmt.Errorf("%s: --passkey %s: %w", c.FullName(), file, err)
					}
					doc.PublicKey, doc.KeyType, doc.CredentialID = pk.PublicKey, pk.KeyType, pk.CredentialID
					doc.RPID, doc.Origins, doc.AllowedTypes = pk.RPID, pk.Origins, pk.AllowedTypes
					keyID = pk.keyID
				} else {
					pub, _, err := loadAnyPublicKey(c.String("public-key"))
					if err != nil {
						return fmt.Errorf("%s: --public-key: %w", c.FullName(), err)
					}
					doc.PublicKey, keyID = sign.EncodePublicKey(pub), sign.KeyID(pub)
				}
				a, err := beginAuthoring(ctx, c, "admin-key")
				if err != nil {
					return err
				}
				defer a.close()
				name := c.String("name")
				if name == "" { // retire: the bound name
					l, err := a.ledger("finding the principal's name")
					if err != nil {
						return err
					}
					rec, err := l.KeyBinding(keyID)
					if err != nil {
						return err
					}
					if rec == nil {
						return fmt.Errorf("%s: key %s is not bound in the ledger", c.FullName(), keyID)
					}
					name = rec.Name
				}
				h, err := a.header(statement.Principal)
				if err != nil {
					return err
				}
				doc.Header, doc.PrincipalID, doc.Op, doc.Name = h, a.id("principal"), op, name
				return a.finish(ctx, &doc)
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

// grantFromFlags builds the grant part of a CONFIRM or DELEGATE. The sets
// are sorted and deduplicated so that they are canonical.
func grantFromFlags(c *cli.Command, workflow string) (statement.Grant, error) {
	var g statement.Grant
	pub, _, err := loadAnyPublicKey(c.String("grantee-key"))
	if err != nil {
		return g, fmt.Errorf("--grantee-key: %w", err)
	}
	if g.Limits, err = parseAmounts("limit", c.StringSlice("limit")); err != nil {
		return g, usage(c, "%v", err)
	}
	if g.TTLSeconds, err = seconds("ttl", c.Duration("ttl")); err != nil {
		return g, usage(c, "%v", err)
	}
	g.Grantee = statement.Grantee{Name: c.String("grantee"), PublicKey: sign.EncodePublicKey(pub)}
	g.Scope.WorkflowID = workflow
	g.Scope.StepIDs = optionalSet(c.StringSlice("step"))
	g.Scope.Targets = canonicalSet(c.StringSlice("target"))
	g.Scope.Capabilities = canonicalSet(c.StringSlice("capability"))
	g.Scope.Principals = optionalSet(c.StringSlice("principal"))
	g.Revocable = c.Bool("revocable")
	if file := c.String("approvals"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return g, fmt.Errorf("--approvals: %w", err)
		}
		if g.Approvals, err = scope.ParseRules(data); err != nil {
			return g, fmt.Errorf("--approvals %s: %w", file, err)
		}
	}
	return g, nil
}

func confirmCommand() *cli.Command {
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
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			g, err := grantFromFlags(c, c.String("workflow"))
			if err != nil {
				return err
			}
			h, err := a.header(statement.Confirm)
			if err != nil {
				return err
			}
			return a.finish(ctx, &statement.ConfirmDoc{Header: h, ConfirmID: a.id("confirm"), Grant: g, RiskLevel: c.String("risk")})
		},
	}
}

// grantEntry returns the grant part of a CONFIRM or DELEGATE entry.
func grantEntry(e *ledger.Entry) *statement.Grant { return statement.GrantOf(e.Statement) }

func delegateCommand() *cli.Command {
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
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			parent := c.String("parent")
			wf, ph := c.String("workflow"), c.String("parent-scope-hash")
			if wf == "" || ph == "" {
				e, err := a.entry("parent", parent, statement.Confirm, statement.Delegate)
				if err != nil {
					return err
				}
				pg := grantEntry(e)
				if wf == "" {
					wf = pg.Scope.WorkflowID
				}
				if ph == "" {
					ph = pg.ScopeHash
				}
			}
			g, err := grantFromFlags(c, wf)
			if err != nil {
				return err
			}
			h, err := a.header(statement.Delegate)
			if err != nil {
				return err
			}
			return a.finish(ctx, &statement.DelegateDoc{Header: h, DelegationID: a.id("delegate"), ParentRef: parent, ParentScopeHash: ph, Grant: g})
		},
	}
}

func receiptCommand() *cli.Command {
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
						return usage(c, "a pending receipt needs --%s", f)
					}
				}
				for _, f := range []string{"pending-ref", "consumed", "error"} {
					if c.IsSet(f) {
						return usage(c, "--%s is for an outcome receipt (--result success|failure|partial)", f)
					}
				}
			} else {
				if c.String("pending-ref") == "" {
					return usage(c, "an outcome receipt (--result %s) needs --pending-ref", result)
				}
				if c.IsSet("reserve") {
					return usage(c, "--reserve is for a pending receipt")
				}
			}
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			r := &statement.ReceiptDoc{Result: result, AuthorizationRef: c.String("auth"), Workflow: c.String("workflow"),
				StepID: c.String("step"), Action: c.String("action"), Target: c.String("target"),
				PendingRef: c.String("pending-ref"), EvidenceRefs: c.StringSlice("evidence"), Error: c.String("error"),
				ScopeHash: c.String("scope-hash")}
			if len(r.EvidenceRefs) == 0 {
				r.EvidenceRefs = nil
			}
			if r.Reserve, err = parseAmounts("reserve", c.StringSlice("reserve")); err != nil {
				return usage(c, "%v", err)
			}
			if r.Consumed, err = parseAmounts("consumed", c.StringSlice("consumed")); err != nil {
				return usage(c, "%v", err)
			}
			if r.SideEffects, err = parsePairs("side-effect", c.StringSlice("side-effect")); err != nil {
				return usage(c, "%v", err)
			}
			if !pending && (r.AuthorizationRef == "" || r.Workflow == "" || r.StepID == "" || r.Action == "" || r.Target == "") {
				e, err := a.entry("pending-ref", r.PendingRef, statement.Receipt)
				if err != nil {
					return err
				}
				p := e.Statement.(*statement.ReceiptDoc)
				fill := func(dst *string, src string) {
					if *dst == "" {
						*dst = src
					}
				}
				fill(&r.AuthorizationRef, p.AuthorizationRef)
				fill(&r.Workflow, p.Workflow)
				fill(&r.StepID, p.StepID)
				fill(&r.Action, p.Action)
				fill(&r.Target, p.Target)
			}
			if r.ScopeHash == "" || r.Workflow == "" {
				e, err := a.entry("auth", r.AuthorizationRef, statement.Confirm, statement.Delegate)
				if err != nil {
					return err
				}
				g := grantEntry(e)
				if r.ScopeHash == "" {
					r.ScopeHash = g.ScopeHash
				}
				if r.Workflow == "" {
					r.Workflow = g.Scope.WorkflowID
				}
			}
			if r.Header, err = a.header(statement.Receipt); err != nil {
				return err
			}
			r.ReceiptID = a.id("receipt")
			return a.finish(ctx, r)
		},
	}
}

func stopCommand() *cli.Command {
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
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			h, err := a.header(statement.Stop)
			if err != nil {
				return err
			}
			return a.finish(ctx, &statement.StopDoc{Header: h, RequestID: a.id("stop"), Workflow: c.String("workflow"),
				StopScope: c.String("scope"), StepID: c.String("step"), TakeoverMode: c.String("takeover"),
				TakeoverTo: c.String("takeover-to"), Reason: c.String("reason")})
		},
	}
}

func resumeCommand() *cli.Command {
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
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			wf, err := a.workflow(c, "stop-ref", statement.Stop)
			if err != nil {
				return err
			}
			h, err := a.header(statement.Resume)
			if err != nil {
				return err
			}
			return a.finish(ctx, &statement.ResumeDoc{Header: h, ResumeID: a.id("resume"), Workflow: wf, StopRef: c.String("stop-ref")})
		},
	}
}

func revokeCommand() *cli.Command {
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
		Action: func(ctx context.Context, c *cli.Command) error {
			a, err := beginAuthoring(ctx, c, "key")
			if err != nil {
				return err
			}
			defer a.close()
			wf, err := a.workflow(c, "grant", statement.Confirm, statement.Delegate)
			if err != nil {
				return err
			}
			h, err := a.header(statement.Revoke)
			if err != nil {
				return err
			}
			return a.finish(ctx, &statement.RevokeDoc{Header: h, RevokeID: a.id("revoke"), Workflow: wf, TargetRef: c.String("grant"), Reason: c.String("reason")})
		},
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
			return usage(c, "--%s %q: want %s", flag, v, strings.Join(values, ", "))
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

// precheck refuses, before anything is signed, what the ledger would
// certainly deny as malformed, so that a typo does not leave a DENIAL in
// the log forever: a grant's ttl above the log's max_ttl_seconds (from its
// GENESIS). It checks only when the ledger is open (not with --out).
func (a *authoring) precheck(st statement.Statement) error {
	g := statement.GrantOf(st)
	if g == nil || a.l == nil {
		return nil
	}
	e, err := a.l.Entry(0)
	if err != nil {
		return nil // the ledger decides, as ever
	}
	gd, ok := e.Statement.(*statement.GenesisDoc)
	if !ok {
		return nil
	}
	if _, _, maxTTL := gd.Params(); g.TTLSeconds > maxTTL {
		return usage(a.c, "--ttl %s is longer than this log allows (max_ttl_seconds %d, %s): the ledger would deny it; nothing was signed",
			time.Duration(g.TTLSeconds)*time.Second, maxTTL, time.Duration(maxTTL)*time.Second)
	}
	return nil
}

// passkeyFile is the file custody principal enroll --passkey reads.
type passkeyFile struct {
	KeyType      string   `json:"key_type"`
	PublicKey    string   `json:"public_key"`
	CredentialID string   `json:"credential_id"`
	RPID         string   `json:"rp_id"`
	Origins      []string `json:"origins"`
	AllowedTypes []string `json:"allowed_types,omitempty"`

	keyID string
}

// readPasskeyFile reads and checks a passkey file: strict JSON, closed
// schema, and the key, rp_id and origins as a PRINCIPAL binds them.
func readPasskeyFile(file string) (*passkeyFile, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var pf passkeyFile
	if err := canon.UnmarshalRelaxed(bytes.TrimSpace(b), &pf); err != nil {
		return nil, fmt.Errorf("not a passkey file {key_type, public_key, credential_id, rp_id, origins[, allowed_types]}: %w", err)
	}
	pk, err := sign.NewPasskey(pf.KeyType, pf.PublicKey, pf.RPID, pf.Origins)
	if err != nil {
		return nil, err
	}
	pf.keyID = pk.KeyID()
	return &pf, nil
}

// principalDocKeyID is the key id a PRINCIPAL statement binds.
func principalDocKeyID(p *statement.PrincipalDoc) string {
	if p.IsPasskey() {
		if k, err := sign.ParsePasskeyKey(p.KeyType, p.PublicKey); err == nil {
			return k.KeyID()
		}
		return ""
	}
	if pub, err := sign.ParsePublicKey(p.PublicKey); err == nil {
		return sign.KeyID(pub)
	}
	return ""
}
