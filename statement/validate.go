package statement

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/custodylog/custody/canon"
	"github.com/custodylog/custody/scope"
	"github.com/custodylog/custody/sign"
)

// TimestampLayout is the one spelling of a statement timestamp.
const TimestampLayout = "2006-01-02T15:04:05Z"

// ParseTimestamp reads an RFC 3339 UTC timestamp with whole seconds, and
// rejects every other spelling of the same instant.
func ParseTimestamp(s string) (time.Time, error) {
	if t, ok := parseTimestampFast(s); ok {
		return t, nil
	}
	t, err := time.Parse(TimestampLayout, s)
	if err != nil || t.Format(TimestampLayout) != s {
		return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339 UTC with whole seconds (like 2026-03-19T08:12:00Z)", s)
	}
	return t, nil
}

// parseTimestampFast reads the one spelling ParseTimestamp accepts without
// time.Parse and the round trip through Format; ok is false for anything
// it does not accept, which ParseTimestamp then reads the slow way to say
// why. Whatever it accepts, time.Parse reads to the same instant and
// Format spells the same way (FuzzFastParse checks).
func parseTimestampFast(s string) (time.Time, bool) {
	if len(s) != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z' {
		return time.Time{}, false
	}
	var bad bool
	num := func(i, n int) int {
		v := 0
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				bad = true
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if bad || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC), true
}

// daysIn is the number of days in a month of the proleptic Gregorian
// calendar, as time.Parse checks it.
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// FormatTimestamp is the inverse of ParseTimestamp (t is truncated to the second).
func FormatTimestamp(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(TimestampLayout)
}

func invalid(path, format string, args ...any) error {
	return &canon.Error{Path: path, Code: canon.CodeSchemaInvalid, Msg: fmt.Sprintf(format, args...)}
}

// v collects the first failure of a sequence of field checks.
type v struct{ err error }

func (c *v) ident(path, s string) {
	if c.err == nil {
		if err := scope.CheckIdentifier(s); err != nil {
			c.err = invalid(path, "%v", err)
		}
	}
}

func (c *v) optIdent(path, s string) {
	if s != "" {
		c.ident(path, s)
	}
}

func (c *v) text(path, s string) {
	if c.err == nil && s == "" {
		c.err = invalid(path, "must not be empty")
	}
}

func (c *v) hash(path, s string) {
	if c.err == nil && !isHex64(s) {
		c.err = invalid(path, "%q is not 64 lowercase hex digits", s)
	}
}

func (c *v) pubkey(path, s string) {
	if c.err == nil {
		if _, err := sign.ParsePublicKey(s); err != nil {
			c.err = invalid(path, "%v", err)
		}
	}
}

func (c *v) oneOf(path, s string, allowed ...string) {
	if c.err != nil {
		return
	}
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	c.err = invalid(path, "%q is not one of %q", s, allowed)
}

func (c *v) limits(path string, m map[string]int64) {
	for k, n := range m {
		c.ident(path+"."+k, k)
		if c.err == nil && n < 0 {
			c.err = invalid(path+"."+k, "%d is negative", n)
		}
	}
}

func (c *v) absent(path string, present bool, why string) {
	if c.err == nil && present {
		c.err = invalid(path, "not allowed %s", why)
	}
}

func (c *v) header(h *Header) {
	if c.err == nil {
		if _, err := ParseTimestamp(h.Timestamp); err != nil {
			c.err = invalid("timestamp", "%v", err)
		}
	}
	c.ident("log", h.Log)
	c.ident("actor", h.Actor)
	if c.err == nil && h.Seq < 1 {
		c.err = invalid("seq", "must be at least 1")
	}
}

func (c *v) grant(g *Grant) {
	c.ident("grantee.name", g.Grantee.Name)
	c.pubkey("grantee.public_key", g.Grantee.PublicKey)
	c.limits("limits", g.Limits)
	if c.err == nil && g.TTLSeconds < 1 {
		c.err = invalid("ttl_seconds", "%d is not a positive number of seconds", g.TTLSeconds)
	}
	c.hash("scope_hash", g.ScopeHash)
	if c.err == nil {
		// The scope's grammar and canonical sets (DESIGN §3) are checked
		// on its descriptor; the instant used here does not matter.
		if g.Approvals != nil && len(g.Approvals) == 0 {
			c.err = invalid("approvals", "an empty list; omit it instead")
			return
		}
		d, err := scope.DeriveRules(g.Scope, g.Limits, g.Approvals, time.Unix(0, 0).UTC(), g.TTLSeconds)
		if err == nil {
			err = d.Validate()
		}
		if err != nil {
			c.err = scopeError(err)
		}
	}
}

// scopeError maps a scope package error to a canon.Error with the right code.
func scopeError(err error) error {
	code := canon.CodeSchemaInvalid
	if se, ok := err.(*scope.Error); ok && se.Code == scope.CodeNonCanonical {
		code = canon.CodeNonCanonical
	}
	path := "scope"
	if se, ok := err.(*scope.Error); ok && (strings.HasPrefix(se.Msg, "approvals") || strings.HasPrefix(se.Msg, "rule ")) {
		path = "approvals"
	}
	return &canon.Error{Path: path, Code: code, Msg: err.Error()}
}

func (d *GenesisDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("genesis_id", d.GenesisID)
	c.pubkey("admin_key", d.AdminKey)
	if c.err == nil {
		vk, err := note.NewVerifier(d.LogKey)
		switch {
		case err != nil:
			c.err = invalid("log_key", "not a signed-note verifier key: %v", err)
		case vk.Name() != d.Log:
			c.err = invalid("log_key", "key name %q is not the log's origin %q", vk.Name(), d.Log)
		}
	}
	if c.err == nil && (d.MaxDepth < 0 || d.MaxDepth > 16) {
		c.err = invalid("max_depth", "%d is outside 1..16", d.MaxDepth)
	}
	if c.err == nil && d.ClockSkewSeconds < 0 {
		c.err = invalid("clock_skew_seconds", "%d is negative", d.ClockSkewSeconds)
	}
	if c.err == nil && d.MaxTTLSeconds < 0 {
		c.err = invalid("max_ttl_seconds", "%d is negative", d.MaxTTLSeconds)
	}
	return c.err
}

func (d *PrincipalDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("principal_id", d.PrincipalID)
	c.oneOf("op", d.Op, OpEnroll, OpAddKey, OpRetire, OpLogKey)
	c.ident("name", d.Name)
	if c.err != nil {
		return c.err
	}
	if d.KeyType == "" {
		c.pubkey("public_key", d.PublicKey)
		switch {
		case c.err != nil:
		case d.CredentialID != "" || d.RPID != "" || len(d.Origins) > 0 || len(d.AllowedTypes) > 0:
			c.err = invalid("key_type", "credential_id, rp_id, origins and allowed_types belong to a passkey; key_type is absent (an Ed25519 key)")
		}
		return c.err
	}
	// A passkey (DESIGN §1). key_type "ed25519" is spelled by its absence.
	if !sign.IsPasskeyType(d.KeyType) {
		return invalid("key_type", "%q is not %s or %s (absent for an Ed25519 key)", d.KeyType, sign.KeyTypeWebAuthnES256, sign.KeyTypeWebAuthnEd25519)
	}
	if d.Op == OpLogKey {
		return invalid("key_type", "the log's DENIAL key is an Ed25519 key, never a passkey")
	}
	if _, err := sign.NewPasskey(d.KeyType, d.PublicKey, d.RPID, d.Origins); err != nil {
		var se *sign.Error
		if errors.As(err, &se) && se.Field != "" {
			return invalid(se.Field, "%s", se.Msg)
		}
		return invalid("public_key", "%v", err)
	}
	if d.CredentialID == "" {
		return invalid("credential_id", "required for a passkey")
	}
	if id, err := base64.StdEncoding.Strict().DecodeString(d.CredentialID); err != nil || len(id) == 0 || len(id) > 1023 ||
		base64.StdEncoding.EncodeToString(id) != d.CredentialID {
		return invalid("credential_id", "must be the canonical standard base64 of 1..1023 bytes (WebAuthn's limit)")
	}
	for i, t := range d.AllowedTypes {
		if !slices.Contains(PasskeyKinds, t) {
			return invalid("allowed_types", "%q is not a kind a principal signs (%s)", t, strings.Join(PasskeyKinds, ", "))
		}
		if i > 0 && d.AllowedTypes[i-1] >= t {
			return invalid("allowed_types", "must be sorted without repeats: %q after %q", t, d.AllowedTypes[i-1])
		}
	}
	return nil
}

func (d *ConfirmDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("confirm_id", d.ConfirmID)
	c.grant(&d.Grant)
	if d.RiskLevel != "" {
		c.oneOf("risk_level", d.RiskLevel, RiskLevels...)
	}
	return c.err
}

func (d *DelegateDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("delegation_id", d.DelegationID)
	c.ident("parent_ref", d.ParentRef)
	c.hash("parent_scope_hash", d.ParentScopeHash)
	c.grant(&d.Grant)
	return c.err
}

func (d *RevokeDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("revoke_id", d.RevokeID)
	c.ident("workflow_id", d.Workflow)
	c.ident("target_ref", d.TargetRef)
	c.text("reason", d.Reason)
	return c.err
}

func (d *ReceiptDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("receipt_id", d.ReceiptID)
	c.ident("workflow_id", d.Workflow)
	c.ident("step_id", d.StepID)
	c.ident("action", d.Action)
	c.ident("target", d.Target)
	c.ident("authorization_ref", d.AuthorizationRef)
	c.oneOf("result", d.Result, ResultPending, ResultSuccess, ResultFailure, ResultPartial)
	c.hash("scope_hash", d.ScopeHash)
	if d.IsPending() {
		c.limits("reserve", d.Reserve)
		if d.ParamsSHA256 != "" {
			c.hash("params_sha256", d.ParamsSHA256)
		}
		c.absent("consumed", d.Consumed != nil, "on a pending receipt")
		c.absent("pending_ref", d.PendingRef != "", "on a pending receipt")
		c.absent("error", d.Error != "", "on a pending receipt")
	} else {
		c.absent("reserve", d.Reserve != nil, "on an outcome receipt (reserve belongs to the pending one)")
		c.absent("params_sha256", d.ParamsSHA256 != "", "on an outcome receipt (it belongs to the pending one)")
		if c.err == nil && d.PendingRef == "" {
			c.err = invalid("pending_ref", "an outcome receipt must name its pending receipt")
		}
		c.ident("pending_ref", d.PendingRef)
		c.limits("consumed", d.Consumed)
	}
	for k := range d.SideEffects {
		c.ident("side_effects."+k, k)
	}
	for i, e := range d.EvidenceRefs {
		c.text(fmt.Sprintf("evidence_refs[%d]", i), e)
	}
	return c.err
}

func (d *StopDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("request_id", d.RequestID)
	c.ident("workflow_id", d.Workflow)
	c.oneOf("stop_scope", d.StopScope, StopStep, StopChain)
	if d.StopScope == StopStep {
		if c.err == nil && d.StepID == "" {
			c.err = invalid("step_id", "a step STOP must name its step")
		}
		c.ident("step_id", d.StepID)
	} else {
		c.absent("step_id", d.StepID != "", "on a chain STOP")
	}
	c.oneOf("takeover_mode", d.TakeoverMode, TakeoverHuman, TakeoverPause, TakeoverDelegate)
	if d.TakeoverMode == TakeoverDelegate {
		if c.err == nil && d.TakeoverTo == "" {
			c.err = invalid("takeover_to", "takeover_mode %s must name the agent to take over", TakeoverDelegate)
		}
		c.ident("takeover_to", d.TakeoverTo)
	} else {
		c.absent("takeover_to", d.TakeoverTo != "", "unless takeover_mode is "+TakeoverDelegate)
	}
	c.text("reason", d.Reason)
	return c.err
}

func (d *ResumeDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("resume_id", d.ResumeID)
	c.ident("workflow_id", d.Workflow)
	c.ident("stop_ref", d.StopRef)
	return c.err
}

func (d *ApprovalDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("approval_id", d.ApprovalID)
	c.ident("workflow_id", d.Workflow)
	c.ident("receipt_ref", d.ReceiptRef)
	c.hash("receipt_sha256", d.ReceiptSHA256)
	c.oneOf("decision", d.Decision, DecisionApprove, DecisionReject)
	return c.err
}

func (d *DenialDoc) validate() error {
	c := &v{}
	c.header(&d.Header)
	c.ident("denial_id", d.DenialID)
	c.absent("envelope_size", d.Envelope != nil && d.EnvelopeSize != 0, "with the envelope itself")
	if c.err == nil && d.EnvelopeSize < 0 {
		c.err = invalid("envelope_size", "%d is negative", d.EnvelopeSize)
	}
	c.hash("envelope_sha256", d.EnvelopeSHA256)
	c.hash("signer_keyid", d.SignerKeyID)
	if c.err == nil && !d.StatementType.Valid() {
		c.err = invalid("statement_type", "%q is not a statement kind", d.StatementType)
	}
	c.optIdent("statement_id", d.StatementID)
	c.optIdent("workflow_id", d.Workflow)
	if c.err == nil && !isCode(d.ReasonCode) {
		c.err = invalid("reason_code", "%q is not a reason code", d.ReasonCode)
	}
	c.text("reason", d.Reason)
	return c.err
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func isCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'a' && s[i] <= 'z' || s[i] == '_') {
			return false
		}
	}
	return true
}

// LogPublicKey returns the Ed25519 key inside log_key, a signed-note
// verifier key "<name>+<hash>+<base64(0x01 || key)>".
func (d *GenesisDoc) LogPublicKey() (ed25519.PublicKey, error) {
	parts := strings.SplitN(d.LogKey, "+", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("log_key %q is not <name>+<hash>+<key>", d.LogKey)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, fmt.Errorf("log_key %q does not hold an Ed25519 key", d.LogKey)
	}
	return ed25519.PublicKey(raw[1:]), nil
}
