package authority

// Linked records for what would otherwise be lists that grow with history
// (DESIGN §4, Bounded cost): the STOPs in force on a workflow's chain or
// on one of its steps, and the grants a key holds in a workflow. Each
// change reads and writes a constant number of records; a decision reads
// the head of a list (for held grants, past dead ones it jumps over with
// hints).

// firstStop returns the earliest STOP in force on a workflow's chain (step
// "") or on exactly one step, or nil.
func (e *Engine) firstStop(wf, step string) *StopRec {
	l := get[StopListRec](e.st, stopListKey(wf, step))
	if l == nil || l.First == "" {
		return nil
	}
	return e.StopRecord(l.First)
}

// pushStop records an accepted STOP at the end of its list.
func (e *Engine) pushStop(s *StopRec) {
	key := stopListKey(s.Workflow, s.Step)
	var l StopListRec
	if r := get[StopListRec](e.st, key); r != nil {
		l = *r
	}
	if l.Last != "" {
		last := *e.StopRecord(l.Last)
		last.Next = s.ID
		put(e.st, prefStop+last.ID, &last)
		s.Prev = l.Last
	} else {
		l.First = s.ID
	}
	l.Last = s.ID
	put(e.st, key, &l)
	put(e.st, prefStop+s.ID, s)
}

// unlinkStop takes a lifted STOP out of its list. s is the caller's copy,
// which it then puts.
func (e *Engine) unlinkStop(s *StopRec) {
	key := stopListKey(s.Workflow, s.Step)
	l := *get[StopListRec](e.st, key)
	if s.Prev != "" {
		p := *e.StopRecord(s.Prev)
		p.Next = s.Next
		put(e.st, prefStop+p.ID, &p)
	} else {
		l.First = s.Next
	}
	if s.Next != "" {
		n := *e.StopRecord(s.Next)
		n.Prev = s.Prev
		put(e.st, prefStop+n.ID, &n)
	} else {
		l.Last = s.Prev
	}
	s.Prev, s.Next = "", ""
	put(e.st, key, &l)
}

// liveHeld returns the newest grant key holds in workflow wf that is live
// now, or nil. It walks the list from the newest grant. A grant that died
// of its own REVOKE has left the list (unlinkHeld); one that expired, or
// whose ancestor was revoked, is still on it, so the walk leaves hints
// (HintRec) that let later walks jump past the dead grants it met: dead is
// for good (a revocation is never undone, logged_at never goes backwards),
// so a hint never hides a live grant. Hints are kept whatever the
// decision, refused or denied too, so each dead grant is walked past a
// bounded number of times over a log, not once per STOP.
func (c *check) liveHeld(keyID, wf string) *GrantRec {
	var dead []string
	var live *GrantRec
	for id := c.e.keyWF(keyID, wf).Newest; id != ""; {
		g := c.e.Grant(id)
		if g == nil {
			break
		}
		if c.isLive(g) {
			live = g
			break
		}
		dead = append(dead, g.ID)
		id = g.OlderHeld
		if h := get[HintRec](c.e.st, hintKey(g.ID)); h != nil {
			id = h.Next
		}
	}
	next := ""
	if live != nil {
		next = live.ID
	}
	for _, id := range dead {
		if h := get[HintRec](c.e.st, hintKey(id)); h == nil || h.Next != next {
			put(c.e.st, hintKey(id), &HintRec{Next: next})
		}
	}
	return live
}

// unlinkHeld takes a grant out of its grantee's list. g is the caller's
// copy, which it then puts. Its own links are kept: a hint may still lead
// a walk to it, and from it the walk must reach every older grant.
func (e *Engine) unlinkHeld(g *GrantRec) {
	if g.OffHeld {
		return
	}
	if g.NewerHeld != "" {
		n := *e.Grant(g.NewerHeld)
		n.OlderHeld = g.OlderHeld
		put(e.st, prefGrant+n.ID, &n)
	} else {
		kw := e.keyWF(g.GranteeKey, g.Workflow)
		kw.Newest = g.OlderHeld
		put(e.st, keyWFKey(g.GranteeKey, g.Workflow), kw)
	}
	if g.OlderHeld != "" {
		o := *e.Grant(g.OlderHeld)
		o.NewerHeld = g.NewerHeld
		put(e.st, prefGrant+o.ID, &o)
	}
	g.OffHeld = true
}
