package authority

import (
	"crypto/ed25519"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
	"github.com/custodylog/custody/statement"
)

// AgentNamePrefix starts every agent name (the grantee name of a CONFIRM or
// DELEGATE) and no principal or admin name (DESIGN §1), so that the two
// name spaces are disjoint and no grantee can take a person's or an
// organisation's name before the admin enrolls it.
const AgentNamePrefix = "agent:"

// IsAgentName reports whether name is in the agent name space.
func IsAgentName(name string) bool { return strings.HasPrefix(name, AgentNamePrefix) }

// NameRec maps a bound name to its key: the first key of a principal
// that holds several (DESIGN §1, add_key).
type NameRec struct {
	KeyID string `json:"keyid"`
	// Added counts the keys add_key bound to a principal's name after the
	// first, and Retired how many of all its keys are retired; both stay 0
	// for a name with one key.
	Added   int `json:"added,omitempty"`
	Retired int `json:"retired,omitempty"`
}

func (c *check) genesis(admin ed25519.PublicKey) {
	g := c.st.(*statement.GenesisDoc)
	maxDepth, skew, maxTTL := g.Params()
	if c.index != 0 {
		c.deny(NotAuthorized, "GENESIS can only be leaf 0, not %d", c.index)
		return
	}
	if g.Seq != 1 {
		c.deny(SeqMismatch, "seq %d of GENESIS must be 1", g.Seq)
		return
	}
	ts, _ := statement.ParseTimestamp(g.Timestamp)
	if diff := ts.Sub(c.at); diff.Abs() > skewLimit(skew) {
		c.deny(ClockSkew, "timestamp %s is %s from the ledger's time, beyond clock_skew_seconds %d", g.Timestamp, diff.Abs(), skew)
		return
	}
	logPub, err := g.LogPublicKey()
	if err != nil {
		c.deny(SchemaInvalid, "log_key: %v", err)
		return
	}
	if err := sign.CheckPublicKey(logPub); err != nil {
		c.deny(SchemaInvalid, "log_key: %v", err)
		return
	}
	if logPub.Equal(admin) {
		c.deny(IdentityConflict, "the log key and the admin key must differ")
		return
	}
	if IsAgentName(g.Actor) {
		c.deny(IdentityConflict, "the admin's name %q starts with %q, which only agent names do", g.Actor, AgentNamePrefix)
		return
	}
	if g.Actor == g.Log {
		c.deny(IdentityConflict, "the admin's name %q is the log's origin, which names the log key", g.Actor)
		return
	}
	adminID, logID := sign.KeyID(admin), sign.KeyID(logPub)
	put(c.e.st, keyMeta, &Meta{Origin: g.Log, AdminKeyID: adminID, LogKeyID: logID,
		MaxDepth: maxDepth, ClockSkew: skew, MaxTTL: maxTTL})
	put(c.e.st, keyFormat, &FormatRec{Version: StateFormat})
	c.e.bind(adminID, RoleAdmin, g.Actor, g.AdminKey, 1)
	c.e.bind(logID, RoleLog, g.Log, sign.EncodePublicKey(logPub), 0)
	c.e.takeID(g.GenesisID, statement.Genesis, c.index)
}

func (e *Engine) bind(keyID, role, name, pub string, seq uint64) {
	put(e.st, prefKey+keyID, &KeyRec{Role: role, Name: name, PublicKey: pub, LastSeq: seq})
	put(e.st, prefName+name, &NameRec{KeyID: keyID})
}

func (e *Engine) takeID(id string, kind statement.Kind, index uint64) {
	put(e.st, prefID+id, &IDRec{Kind: string(kind), Index: index})
}

// accept records what every accepted statement changes: its id and its
// signer's seq.
func (c *check) accept() {
	c.e.takeID(c.st.ID(), c.h.Type, c.index)
	k := *c.signer
	k.LastSeq = c.h.Seq
	put(c.e.st, prefKey+c.keyID, &k)
}

// signerLive denies a statement signed by a retired principal (DESIGN §4:
// a retired principal signs nothing new).
func (c *check) signerLive() {
	if c.signer.Retired {
		c.deny(Revoked, "signer %q is a principal retired at %s and signs nothing new", c.signer.Name, c.signer.RetiredAt)
	}
}

func (c *check) principal(p *statement.PrincipalDoc) {
	if c.signer.Role != RoleAdmin {
		c.deny(NotAuthorized, "only the admin key enrolls or retires principals; %q is bound as %s", c.signer.Name, c.signer.Role)
		return
	}
	kid := principalKeyID(p) // statement.Parse checked the key
	existing := c.e.Key(kid)
	switch p.Op {
	case statement.OpEnroll, statement.OpAddKey:
		if IsAgentName(p.Name) {
			c.deny(IdentityConflict, "name %q starts with %q, which only agent names do; a principal's name never does", p.Name, AgentNamePrefix)
			return
		}
		if existing != nil {
			c.deny(IdentityConflict, "key %s is already bound as %s %q", short(kid), existing.Role, existing.Name)
			return
		}
		if c.boundElsewhere(otherEncoding(p)) {
			return
		}
		n := get[NameRec](c.e.st, prefName+p.Name)
		if p.Op == statement.OpEnroll {
			if n != nil {
				c.deny(IdentityConflict, "name %q already belongs to key %s; add a device's key to it with op add_key", p.Name, short(n.KeyID))
				return
			}
		} else {
			if n == nil {
				c.deny(NotPrincipal, "name %q is not an enrolled principal; enroll it before adding keys to it", p.Name)
				return
			}
			if first := c.e.Key(n.KeyID); first == nil || first.Role != RolePrincipal {
				c.deny(IdentityConflict, "name %q is not a principal's name", p.Name)
				return
			}
			if c.e.liveKeys(n) == 0 {
				c.deny(Revoked, "every key of principal %q is retired; a retired principal gains no new key", p.Name)
				return
			}
		}
		c.accept()
		if p.Op == statement.OpEnroll {
			n = nil
		}
		c.bindPrincipal(kid, p, n)
		c.e.Key(kid).BoundAt = c.index // the record bindPrincipal just put
	case statement.OpRetire:
		if existing == nil || existing.Role != RolePrincipal {
			c.deny(NotPrincipal, "key %s is not an enrolled principal", short(kid))
			return
		}
		if existing.Name != p.Name {
			c.deny(IdentityConflict, "key %s is enrolled as %q, not %q", short(kid), existing.Name, p.Name)
			return
		}
		if existing.Retired {
			c.deny(Revoked, "principal %q was already retired at %s", p.Name, existing.RetiredAt)
			return
		}
		c.accept()
		r := *existing
		r.Retired, r.RetiredAt = true, statement.FormatLoggedAt(c.at)
		put(c.e.st, prefKey+kid, &r)
		if n := get[NameRec](c.e.st, prefName+p.Name); n != nil && n.Added > 0 {
			nn := *n
			nn.Retired++
			put(c.e.st, prefName+p.Name, &nn)
		}
	case statement.OpLogKey:
		c.rotateLogKey(p, kid, existing) // trustkeys.go
	}
}

// grantee checks the identity rules for a grant's grantee and returns its key id.
func (c *check) grantee(g *statement.Grant) string {
	pub := boundKey(g.Grantee.PublicKey) // statement.Parse checked it (sign.CheckPublicKey)
	kid := sign.KeyID(pub)
	if !IsAgentName(g.Grantee.Name) {
		c.deny(IdentityConflict, "grantee name %q does not start with %q: agent names do, so that no grantee can take a principal's name before it is enrolled", g.Grantee.Name, AgentNamePrefix)
		return kid
	}
	if kid == c.keyID {
		c.deny(IdentityConflict, "grantee key %s is the issuer's own key", short(kid))
		return kid
	}
	if c.granteeElsewhere(pub) {
		return kid
	}
	if k := c.e.Key(kid); k != nil {
		if k.Role != RoleAgent {
			c.deny(IdentityConflict, "grantee key %s is already bound as %s %q", short(kid), k.Role, k.Name)
		} else if k.Name != g.Grantee.Name {
			c.deny(IdentityConflict, "grantee key %s is bound to name %q, not %q", short(kid), k.Name, g.Grantee.Name)
		}
		return kid
	}
	if n := get[NameRec](c.e.st, prefName+g.Grantee.Name); n != nil && n.KeyID != kid {
		c.deny(IdentityConflict, "name %q already belongs to key %s", g.Grantee.Name, short(n.KeyID))
	}
	return kid
}

// descriptor derives a grant's descriptor and checks its scope_hash.
func (c *check) descriptor(g *statement.Grant) scope.Descriptor {
	ts, _ := statement.ParseTimestamp(c.h.Timestamp)
	d, err := scope.DeriveRules(g.Scope, g.Limits, g.Approvals, ts, g.TTLSeconds)
	if err != nil {
		c.deny(NonCanonical, "scope: %v", err)
		return d
	}
	h, err := d.Hash()
	if err != nil {
		c.deny(NonCanonical, "scope: %v", err)
		return d
	}
	if h != g.ScopeHash {
		c.deny(ScopeHashMismatch, "scope_hash %s is not %s, the hash of the grant's scope descriptor", g.ScopeHash, h)
	}
	return d
}

func (c *check) confirm(s *statement.ConfirmDoc) {
	// Step 4: role, ownership, identity.
	if c.signer.Role != RolePrincipal {
		c.deny(NotPrincipal, "only an enrolled principal may CONFIRM; signer %q is bound as %s", c.signer.Name, c.signer.Role)
		return
	}
	wfID := s.Scope.WorkflowID
	wf := c.e.Workflow(wfID)
	if wf != nil && !c.sameHolder(wf.Owner) {
		owner := c.e.Key(wf.Owner)
		c.deny(WorkflowOwned, "workflow %q belongs to principal %q", wfID, owner.Name)
		return
	}
	gk := c.grantee(&s.Grant)
	if c.failed() {
		return
	}
	// Step 5: the issuing principal is live.
	c.signerLive()
	// Step 6: a chain STOP blocks new grants.
	if wf != nil {
		c.stopped(wf, wfID, "")
	}
	// Step 7: scope.
	d := c.descriptor(&s.Grant)
	if c.failed() {
		return
	}
	if err := scope.CheckDepth(1, int(c.meta.MaxDepth)); err != nil {
		c.deny(scopeCode(err), "%s", err.(*scope.Error).Msg)
		return
	}
	c.checkRules(s.Approvals, s.Limits, nil, c.signer.Name)
	if c.failed() {
		return
	}
	c.accept()
	c.e.noteApprovers(wfID, s.Approvals)
	if wf == nil {
		wf = &WorkflowRec{Owner: c.keyID, Last: c.index} // Link starts its chain here
		put(c.e.st, prefWF+wfID, wf)
	}
	c.e.addGrant(&GrantRec{ID: s.ConfirmID, Kind: string(statement.Confirm), Index: c.index, Workflow: wfID,
		Depth: 1, IssuerKey: c.keyID, GranteeKey: gk, GranteeName: s.Grantee.Name, RootKey: c.keyID,
		Descriptor: d, Revocable: s.Revocable, ScopeHash: s.ScopeHash}, s.Grantee.PublicKey)
}

// addGrant records an accepted grant, binds its grantee and puts it at the
// head of the grants its grantee holds in the workflow: a constant number
// of records, whatever the key held before.
func (e *Engine) addGrant(g *GrantRec, granteePub string) {
	if e.Key(g.GranteeKey) == nil {
		e.bind(g.GranteeKey, RoleAgent, g.GranteeName, granteePub, 0)
	}
	held := e.keyWF(g.GranteeKey, g.Workflow)
	held.Held++
	if held.Newest != "" {
		older := *e.Grant(held.Newest)
		older.NewerHeld = g.ID
		put(e.st, prefGrant+older.ID, &older)
		g.OlderHeld = held.Newest
	}
	held.Newest = g.ID
	put(e.st, prefGrant+g.ID, g)
	put(e.st, keyWFKey(g.GranteeKey, g.Workflow), held)
	issued := e.keyWF(g.IssuerKey, g.Workflow)
	if !issued.Issued {
		issued.Issued = true
		put(e.st, keyWFKey(g.IssuerKey, g.Workflow), issued)
	}
}

func keyWFKey(keyID, wf string) string { return prefKeyWF + keyID + "/" + wf }

// keyWF returns a copy of what a key holds or issued in a workflow.
func (e *Engine) keyWF(keyID, wf string) *KeyWorkflowRec {
	if r := get[KeyWorkflowRec](e.st, keyWFKey(keyID, wf)); r != nil {
		cp := *r
		return &cp
	}
	return &KeyWorkflowRec{}
}

// chain returns g and its ancestors, g first.
func (e *Engine) chain(g *GrantRec) []*GrantRec {
	out := []*GrantRec{g}
	for g.Parent != "" && len(out) <= 64 {
		g = e.Grant(g.Parent)
		if g == nil {
			break
		}
		out = append(out, g)
	}
	return out
}

// live denies unless every grant of the chain is live at the decision time
// (DESIGN §4 step 5): not revoked, its root principal not retired, not expired.
func (c *check) live(chain []*GrantRec, what string) {
	for _, g := range chain {
		if g.Revoked {
			c.deny(Revoked, "%s %s was revoked by %s at %s", describe(g, chain[0], what), g.ID, g.RevokedBy, g.RevokedAt)
			return
		}
	}
	root := chain[len(chain)-1]
	if p := c.e.Key(root.RootKey); p != nil && p.Retired {
		if t, _ := statement.ParseLoggedAt(p.RetiredAt); !c.at.Before(t) {
			c.deny(Revoked, "%s rests on grants of principal %q, retired at %s", what, p.Name, p.RetiredAt)
			return
		}
	}
	for _, g := range chain {
		if !c.at.Before(g.expires()) {
			c.deny(Expired, "%s %s expired at %s (ledger time %s)", describe(g, chain[0], what), g.ID, g.Descriptor.ExpiresAt, statement.FormatLoggedAt(c.at))
			return
		}
	}
}

func describe(g, first *GrantRec, what string) string {
	if g == first {
		return what
	}
	return "ancestor grant"
}

// stopped denies when a STOP in force covers the workflow, or the step
// (DESIGN §4 step 6). step "" checks only chain STOPs.
func (c *check) stopped(wf *WorkflowRec, wfID, step string) {
	s := c.e.stopInForce(wf, wfID, step)
	switch {
	case s == nil:
	case s.Scope == statement.StopChain:
		c.deny(WorkflowStopped, "workflow %q is stopped by %s (index %d)", wfID, s.ID, s.Index)
	default:
		c.deny(StepStopped, "step %q is stopped by %s (stop on step %q, index %d)", step, s.ID, s.Step, s.Index)
	}
}

// StopInForce returns the STOP in force that covers step of workflow wf
// (step "": the chain only), or nil: a chain STOP first, else the earliest
// step STOP on step or a step above it (step_3 covers step_3/retry).
func (e *Engine) StopInForce(wf, step string) *StopRec {
	w := e.Workflow(wf)
	if w == nil {
		return nil
	}
	return e.stopInForce(w, wf, step)
}

// stopInForce reads the first STOP in force on the chain and, if step
// STOPs are in force, on the step and each step above it: a cost bounded
// by the step id, not by how many STOPs came before.
func (e *Engine) stopInForce(w *WorkflowRec, wf, step string) *StopRec {
	if s := e.firstStop(wf, ""); s != nil {
		return s
	}
	if step == "" || w.StepStops == 0 {
		return nil
	}
	var first *StopRec
	for i := 0; i <= len(step); i++ {
		if i < len(step) && step[i] != '/' {
			continue
		}
		if s := e.firstStop(wf, step[:i]); s != nil && (first == nil || s.Index < first.Index) {
			first = s
		}
	}
	return first
}

func (c *check) delegate(s *statement.DelegateDoc) {
	if c.signer.Role != RoleAgent {
		c.deny(NotGrantee, "only an agent holding the parent grant may DELEGATE; signer %q is bound as %s", c.signer.Name, c.signer.Role)
		return
	}
	parent := c.e.Grant(s.ParentRef)
	if parent == nil {
		c.deny(UnknownReference, "parent_ref %q names no accepted CONFIRM or DELEGATE", s.ParentRef)
		return
	}
	if parent.GranteeKey != c.keyID {
		c.deny(NotGrantee, "signer %q is not the grantee of %s (granted to %q)", c.signer.Name, parent.ID, parent.GranteeName)
		return
	}
	if s.Scope.WorkflowID != parent.Workflow {
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of parent %s", s.Scope.WorkflowID, parent.Workflow, parent.ID)
		return
	}
	gk := c.grantee(&s.Grant)
	if c.failed() {
		return
	}
	chain := c.e.chain(parent)
	c.live(chain, "parent grant")
	if c.failed() {
		return
	}
	c.stopped(c.e.Workflow(parent.Workflow), parent.Workflow, "")
	if c.failed() {
		return
	}
	// Step 7: hashes, depth, attenuation, principals.
	if s.ParentScopeHash != parent.ScopeHash {
		c.deny(ScopeHashMismatch, "parent_scope_hash %s is not %s, the scope_hash of parent %s", s.ParentScopeHash, parent.ScopeHash, parent.ID)
		return
	}
	d := c.descriptor(&s.Grant)
	if c.failed() {
		return
	}
	depth := parent.Depth + 1
	if err := scope.CheckDepth(int(depth), int(c.meta.MaxDepth)); err != nil {
		c.deny(scopeCode(err), "%s", scopeMsg(err))
		return
	}
	// A grant at max_depth can never delegate, so its principals do not
	// make it narrower (DESIGN §3).
	if err := scope.Attenuates(scope.Grant{Descriptor: parent.Descriptor, Revocable: parent.Revocable},
		scope.Grant{Descriptor: d, Revocable: s.Revocable, Final: depth >= c.meta.MaxDepth}); err != nil {
		c.deny(scopeCode(err), "against parent %s: %s", parent.ID, scopeMsg(err))
		return
	}
	ancestors := make([]scope.Descriptor, len(chain))
	for i, g := range chain {
		ancestors[i] = g.Descriptor
	}
	if err := scope.CheckGrantee(s.Grantee.Name, ancestors); err != nil {
		c.deny(scopeCode(err), "%s", scopeMsg(err))
		return
	}
	ownerName := ""
	if o := c.e.Key(parent.RootKey); o != nil {
		ownerName = o.Name
	}
	c.checkRules(s.Approvals, s.Limits, chain, ownerName)
	if c.failed() {
		return
	}
	c.accept()
	c.e.noteApprovers(parent.Workflow, s.Approvals)
	c.e.addGrant(&GrantRec{ID: s.DelegationID, Kind: string(statement.Delegate), Index: c.index, Workflow: parent.Workflow,
		Parent: parent.ID, Depth: depth, IssuerKey: c.keyID, GranteeKey: gk, GranteeName: s.Grantee.Name,
		RootKey: parent.RootKey, Descriptor: d, Revocable: s.Revocable, ScopeHash: s.ScopeHash}, s.Grantee.PublicKey)
}

func scopeMsg(err error) string {
	if se, ok := err.(*scope.Error); ok {
		return se.Msg
	}
	return err.Error()
}

func (c *check) revoke(s *statement.RevokeDoc) {
	target := c.e.Grant(s.TargetRef)
	if target == nil {
		c.deny(UnknownReference, "target_ref %q names no accepted CONFIRM or DELEGATE", s.TargetRef)
		return
	}
	if s.Workflow != target.Workflow {
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of %s", s.Workflow, target.Workflow, target.ID)
		return
	}
	chain := c.e.chain(target)
	isAdmin := c.signer.Role == RoleAdmin
	allowed := isAdmin || c.keyID == target.GranteeKey
	for _, g := range chain {
		allowed = allowed || c.sameHolder(g.IssuerKey)
	}
	if !allowed {
		c.deny(NotAuthorized, "signer %q neither issued %s or an ancestor, nor holds it, nor is the admin", c.signer.Name, target.ID)
		return
	}
	if !target.Revocable && !isAdmin {
		c.deny(NotAuthorized, "%s is not revocable; only the admin may revoke it", target.ID)
		return
	}
	c.signerLive()
	for _, g := range chain {
		if g.Revoked && !c.failed() {
			c.deny(Revoked, "%s is already revoked: %s was revoked by %s at %s", target.ID, g.ID, g.RevokedBy, g.RevokedAt)
		}
	}
	if c.failed() {
		return
	}
	c.accept()
	t := *target
	t.Revoked, t.RevokedAt, t.RevokedBy = true, statement.FormatLoggedAt(c.at), s.RevokeID
	c.e.unlinkHeld(&t)
	put(c.e.st, prefGrant+t.ID, &t)
}

// authorization resolves a receipt's grant (DESIGN §4 step 4).
func (c *check) authorization(r *statement.ReceiptDoc) *GrantRec {
	if c.signer.Role != RoleAgent {
		c.deny(NotGrantee, "only the agent holding authorization_ref may write a RECEIPT; signer %q is bound as %s", c.signer.Name, c.signer.Role)
		return nil
	}
	g := c.e.Grant(r.AuthorizationRef)
	if g == nil {
		c.deny(UnknownReference, "authorization_ref %q names no accepted CONFIRM or DELEGATE", r.AuthorizationRef)
		return nil
	}
	if g.GranteeKey != c.keyID {
		c.deny(NotGrantee, "signer %q is not the grantee of %s (granted to %q)", c.signer.Name, g.ID, g.GranteeName)
		return nil
	}
	if r.Workflow != g.Workflow {
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of %s", r.Workflow, g.Workflow, g.ID)
		return nil
	}
	return g
}

// inForce lists the limit keys in force on a chain, sorted.
func inForce(chain []*GrantRec) []string {
	keys := map[string]bool{}
	for _, g := range chain {
		for k := range g.Descriptor.Limits {
			keys[k] = true
		}
	}
	return sortedKeys(keys)
}

func (c *check) pending(r *statement.ReceiptDoc) {
	g := c.authorization(r)
	if c.failed() {
		return
	}
	chain := c.e.chain(g)
	c.live(chain, "grant")
	if c.failed() {
		return
	}
	c.stopped(c.e.Workflow(g.Workflow), g.Workflow, r.StepID)
	if c.failed() {
		return
	}
	if err := scope.InScope(g.Descriptor, r.Action, r.Target, r.StepID); err != nil {
		c.deny(OutOfScope, "under %s: %s", g.ID, scopeMsg(err))
		return
	}
	if r.ScopeHash != g.ScopeHash {
		c.deny(ScopeHashMismatch, "scope_hash %s is not %s, the scope_hash of %s", r.ScopeHash, g.ScopeHash, g.ID)
		return
	}
	// Step 8: limits.
	keys := inForce(chain)
	for _, k := range sortedKeys(r.Reserve) {
		if !slices.Contains(keys, k) {
			c.deny(SchemaInvalid, "reserve names %q, which is not a limit in force on %s's chain (%s)", k, g.ID, strings.Join(keys, ", "))
			return
		}
	}
	for _, k := range keys {
		if _, ok := r.Reserve[k]; !ok {
			c.deny(ReserveMissing, "limit %q is in force on %s's chain and must be reserved (0 is allowed)", k, g.ID)
			return
		}
	}
	// Reservations of held receipts that have since been rejected, expired
	// or closed are given back at that point in the log (DESIGN §7): they
	// no longer count, whether or not a decision has written that yet.
	rel := c.e.releasable(chain, c.at)
	for _, cg := range chain {
		for _, k := range sortedKeys(cg.Descriptor.Limits) {
			limit, spent, want := cg.Descriptor.Limits[k], cg.Spent[k], r.Reserve[k]
			if rel != nil {
				spent -= releasedOn(cg, rel, k)
			}
			total, ok := addChecked(spent, want)
			if !ok || total > limit {
				c.deny(LimitExceeded, "reserving %d %s would bring %s to %d of its %d (%d already charged)", want, k, cg.ID, total, limit, spent)
				return
			}
		}
	}
	// Step 9: approval rules.
	hold := matchRules(chain, r)
	if len(hold) > 0 {
		for _, cg := range chain {
			if len(cg.Descriptor.Limits) > 0 && len(cg.OnHold)-countListed(cg, rel) >= MaxOnHold {
				c.deny(LimitExceeded, "grant %s already has %d receipts held for approval, the most it may have at once; a held receipt must be approved, rejected or expire first", cg.ID, MaxOnHold)
				return
			}
		}
	}
	c.accept()
	for id := range rel {
		c.e.giveBack(c.e.Pending(id))
	}
	if rel != nil {
		chain = c.e.chain(c.e.Grant(g.ID)) // giveBack rewrote them
	}
	for _, cg := range chain {
		if len(cg.Descriptor.Limits) == 0 {
			continue
		}
		ng := *cg
		ng.Spent = maps.Clone(cg.Spent)
		if ng.Spent == nil {
			ng.Spent = map[string]int64{}
		}
		for k := range cg.Descriptor.Limits {
			ng.Spent[k], _ = addChecked(ng.Spent[k], r.Reserve[k])
		}
		if len(hold) > 0 {
			ng.OnHold = append(slices.Clone(cg.OnHold), r.ReceiptID)
		}
		put(c.e.st, prefGrant+ng.ID, &ng)
	}
	p := &PendingRec{ID: r.ReceiptID, Index: c.index, SignerKey: c.keyID,
		Workflow: r.Workflow, Grant: g.ID, Step: r.StepID, Action: r.Action, Target: r.Target, Reserve: maps.Clone(r.Reserve)}
	if len(hold) > 0 {
		deadline, byGrant := c.e.holdDeadline(chain, hold, c.at)
		p.Hold = &HoldRec{SHA256: payloadSHA256(c.payload), LoggedAt: statement.FormatLoggedAt(c.at), TrustHead: c.meta.TrustHead,
			Deadline: statement.FormatLoggedAt(deadline), ByGrant: byGrant, Rules: hold}
		c.e.listHold(p)
		c.d.Hold = &HoldInfo{ExpiresAt: deadline, Rules: hold}
	}
	put(c.e.st, prefPend+r.ReceiptID, p)
}

// countListed counts the receipts on g's hold list that rel releases.
func countListed(g *GrantRec, rel map[string]*PendingRec) int {
	n := 0
	for _, id := range g.OnHold {
		if _, ok := rel[id]; ok {
			n++
		}
	}
	return n
}

// addChecked adds two non-negative amounts, reporting overflow; on overflow
// it returns the largest int64 (charges saturate, they never wrap).
func addChecked(a, b int64) (int64, bool) {
	if b > math.MaxInt64-a {
		return math.MaxInt64, false
	}
	return a + b, true
}

func (c *check) outcome(r *statement.ReceiptDoc) {
	if c.signer.Role != RoleAgent {
		c.deny(NotGrantee, "only the agent that wrote the pending receipt may record its outcome; signer %q is bound as %s", c.signer.Name, c.signer.Role)
		return
	}
	p := c.e.Pending(r.PendingRef)
	if p == nil {
		c.deny(UnknownReference, "pending_ref %q names no accepted pending RECEIPT", r.PendingRef)
		return
	}
	switch {
	case p.SignerKey != c.keyID:
		c.deny(NotGrantee, "pending receipt %s was written by another key; only its signer records the outcome", p.ID)
	case r.Workflow != p.Workflow:
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of pending receipt %s", r.Workflow, p.Workflow, p.ID)
	case r.AuthorizationRef != p.Grant:
		c.deny(OutcomeMismatch, "authorization_ref %q is not %q, the grant of pending receipt %s", r.AuthorizationRef, p.Grant, p.ID)
	case r.StepID != p.Step:
		c.deny(OutcomeMismatch, "step_id %q is not %q, the step of pending receipt %s", r.StepID, p.Step, p.ID)
	case r.Action != p.Action:
		c.deny(OutcomeMismatch, "action %q is not %q, the action of pending receipt %s", r.Action, p.Action, p.ID)
	case r.Target != p.Target:
		c.deny(OutcomeMismatch, "target %q is not %q, the target of pending receipt %s", r.Target, p.Target, p.ID)
	case p.Outcome != "":
		c.deny(OutcomeExists, "pending receipt %s already has its outcome %s", p.ID, p.Outcome)
	}
	if c.failed() {
		return
	}
	// An outcome records what happened: no liveness or STOP check.
	g := c.e.Grant(p.Grant)
	if r.ScopeHash != g.ScopeHash {
		c.deny(ScopeHashMismatch, "scope_hash %s is not %s, the scope_hash of %s", r.ScopeHash, g.ScopeHash, g.ID)
		return
	}
	chain := c.e.chain(g)
	keys := inForce(chain)
	for _, k := range sortedKeys(r.Consumed) {
		if !slices.Contains(keys, k) {
			c.deny(SchemaInvalid, "consumed names %q, which is not a limit in force on %s's chain", k, g.ID)
			return
		}
	}
	// A held receipt: was it approved when its outcome was logged? Its
	// reservation may have been given back (rejected, expired, closed):
	// then the outcome charges what it consumed in full (DESIGN §7).
	charged := p.Reserve
	if p.Hold != nil {
		state, why := c.e.HoldState(p, c.at)
		if state != HoldApproved && !(r.Result == statement.ResultFailure && len(r.Consumed) == 0 && len(r.SideEffects) == 0) {
			c.d.Notes = append(c.d.Notes, fmt.Sprintf("violation: outcome %s (%s) of held receipt %s, which was %s when it was logged (%s)", r.ReceiptID, r.Result, p.ID, state, whyOr(why, "no approval yet")))
		}
		if c.e.released(p, c.at) {
			charged = nil
		}
	}
	for _, nr := range rulesInForce(chain) {
		if !nr.Rule.Matches(r.Action, r.Target, r.StepID, nil) || len(nr.Rule.Above) == 0 || p.Hold != nil && heldUnder(p.Hold, nr) {
			continue
		}
		for _, k := range sortedKeys(nr.Rule.Above) {
			if r.Consumed[k] > nr.Rule.Above[k] {
				c.d.Notes = append(c.d.Notes, fmt.Sprintf("violation: outcome %s consumed %d %s, above the %d of approval rule %q of %s, which %s did not reserve enough to meet", r.ReceiptID, r.Consumed[k], k, nr.Rule.Above[k], nr.Rule.RuleID, nr.Grant, p.ID))
				break
			}
		}
	}
	c.accept()
	if p.Hold != nil && charged == nil && !p.Hold.Released {
		c.e.giveBack(p)
		chain = c.e.chain(c.e.Grant(g.ID))
	}
	np := *c.e.Pending(p.ID)
	np.Outcome = r.ReceiptID
	for _, k := range sortedKeys(r.Consumed) {
		if r.Consumed[k] > p.Reserve[k] {
			np.Overrun = true
			c.d.Notes = append(c.d.Notes, fmt.Sprintf("consumed %d %s, above the %d reserved by %s", r.Consumed[k], k, p.Reserve[k], p.ID))
		}
		if over := r.Consumed[k] - charged[k]; over > 0 {
			for _, cg := range chain {
				if _, has := cg.Descriptor.Limits[k]; !has {
					continue
				}
				cg = c.e.Grant(cg.ID) // re-read: an earlier key of this loop may have changed it
				ng := *cg
				ng.Spent = maps.Clone(cg.Spent)
				if ng.Spent == nil {
					ng.Spent = map[string]int64{}
				}
				ng.Spent[k], _ = addChecked(ng.Spent[k], over)
				put(c.e.st, prefGrant+ng.ID, &ng)
			}
		}
	}
	put(c.e.st, prefPend+np.ID, &np)
}

func (c *check) stop(s *statement.StopDoc) {
	wf := c.e.Workflow(s.Workflow)
	if wf == nil {
		c.deny(UnknownReference, "workflow %q has no accepted CONFIRM in this log", s.Workflow)
		return
	}
	role := ""
	switch {
	case c.signer.Role == RoleAdmin:
		role = "admin"
	case c.sameHolder(wf.Owner):
		role = "owner"
	case c.liveHeld(c.keyID, s.Workflow) != nil:
		role = "grantee"
	}
	if role == "" {
		c.deny(NotAuthorized, "signer %q is not the owner of workflow %q, the grantee of a live grant in it, or the admin", c.signer.Name, s.Workflow)
		return
	}
	c.signerLive()
	if c.failed() {
		return
	}
	step := s.StepID
	if s.StopScope == statement.StopChain {
		step = ""
	}
	if by := get[StopByRec](c.e.st, stopByKey(c.keyID, s.Workflow, step)); by != nil && by.ID != "" {
		where := fmt.Sprintf("workflow %q", s.Workflow)
		if step != "" {
			where = fmt.Sprintf("step %q of workflow %q", step, s.Workflow)
		}
		c.deny(AlreadyStopped, "signer %q already has %s in force on %s; a second STOP there changes nothing", c.signer.Name, by.ID, where)
		return
	}
	c.accept()
	c.e.pushStop(&StopRec{ID: s.RequestID, Index: c.index, Workflow: s.Workflow,
		Scope: s.StopScope, Step: step, SignerKey: c.keyID, Role: role})
	put(c.e.st, stopByKey(c.keyID, s.Workflow, step), &StopByRec{ID: s.RequestID})
	if step != "" {
		nw := *wf
		nw.StepStops++
		put(c.e.st, prefWF+s.Workflow, &nw)
	}
	c.e.markStop(s.Workflow, step, s.RequestID, c.index, c.at)
}

// isLive reports, without denying, whether a grant's chain is live now.
func (c *check) isLive(g *GrantRec) bool {
	probe := &check{e: c.e, d: &Decision{}, st: c.st, h: c.h, at: c.at}
	probe.live(c.e.chain(g), "grant")
	return !probe.failed()
}

func (c *check) resume(s *statement.ResumeDoc) {
	stop := c.e.StopRecord(s.StopRef)
	if stop == nil {
		c.deny(UnknownReference, "stop_ref %q names no accepted STOP", s.StopRef)
		return
	}
	if s.Workflow != stop.Workflow {
		c.deny(WorkflowMismatch, "workflow %q is not %q, the workflow of %s", s.Workflow, stop.Workflow, stop.ID)
		return
	}
	wf := c.e.Workflow(stop.Workflow)
	isAdmin := c.signer.Role == RoleAdmin
	allowed := isAdmin ||
		(stop.Role != "admin" && c.sameHolder(stop.SignerKey)) ||
		(stop.Role == "grantee" && c.sameHolder(wf.Owner))
	if !allowed {
		who := "its signer, the workflow's owner or the admin"
		if stop.Role == "admin" {
			who = "the admin"
		} else if stop.Role == "owner" {
			who = "its signer or the admin"
		}
		c.deny(NotAuthorized, "%s may be lifted only by %s; signer is %q", stop.ID, who, c.signer.Name)
		return
	}
	if stop.Resumed {
		c.deny(StopLifted, "%s was already lifted by %s", stop.ID, stop.ResumedBy)
		return
	}
	// A grantee's right to STOP comes from a live grant, and so does its
	// right to lift its own STOP: once its grants are revoked or expired,
	// only the owner or the admin may (docs/DECISIONS.md).
	if !isAdmin && stop.Role == "grantee" && c.keyID == stop.SignerKey {
		if c.liveHeld(c.keyID, stop.Workflow) == nil {
			c.deny(NotAuthorized, "%s was signed by %q as a grantee, which no longer holds a live grant in workflow %q; only the workflow's owner or the admin may lift it now", stop.ID, c.signer.Name, stop.Workflow)
			return
		}
	}
	c.signerLive()
	if c.failed() {
		return
	}
	c.accept()
	ns := *stop
	ns.Resumed, ns.ResumedBy = true, s.ResumeID
	c.e.unlinkStop(&ns)
	put(c.e.st, prefStop+ns.ID, &ns)
	put(c.e.st, stopByKey(ns.SignerKey, ns.Workflow, ns.Step), &StopByRec{})
	if ns.Step != "" {
		nw := *c.e.Workflow(stop.Workflow)
		nw.StepStops--
		put(c.e.st, prefWF+stop.Workflow, &nw)
	}
}

// sortedKeys is slices.Sorted(maps.Keys(m)) in one allocation (none for an
// empty map): the rules walk limits in key order so that the first failure
// reported never depends on map order.
func sortedKeys[V any](m map[string]V) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func whyOr(why, dflt string) string {
	if why == "" {
		return dflt
	}
	return why
}

// heldUnder reports whether a held receipt matched the named rule.
func heldUnder(h *HoldRec, nr NamedRule) bool {
	for _, hr := range h.Rules {
		if hr.Grant == nr.Grant && hr.RuleID == nr.Rule.RuleID {
			return true
		}
	}
	return false
}
