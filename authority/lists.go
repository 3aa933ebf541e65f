package authority

// Linked records for what would otherwise be lists that grow with history
// (DESIGN §4, Bounded cost): the STOPs in force on a workflow's chain or
// on one of its steps, and the grants a key holds in a workflow. Each
// change reads and writes a constant number of records; a decision reads
// the head of a list.

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
// now, and the ids of the dead grants newer than it, which the caller
// drops with pruneHeld if its decision is accepted. A grant that dies of
// its own REVOKE leaves the list at once (unlinkHeld); one that expires,
// or whose ancestor is revoked, is walked past once and then dropped, so
// over a log each grant is walked past a bounded number of times.
func (c *check) liveHeld(keyID, wf string) (*GrantRec, []string) {
	var dead []string
	for id := c.e.keyWF(keyID, wf).Newest; id != ""; {
		g := c.e.Grant(id)
		if g == nil {
			break
		}
		if c.isLive(g) {
			return g, dead
		}
		dead = append(dead, g.ID)
		id = g.OlderHeld
	}
	return nil, dead
}

// pruneHeld drops dead grants from their grantee's list. Dead is for good
// (a revocation is never undone, logged_at never goes backwards), so no
// later decision can need them.
func (e *Engine) pruneHeld(dead []string) {
	for _, id := range dead {
		g := *e.Grant(id)
		e.unlinkHeld(&g)
		put(e.st, prefGrant+g.ID, &g)
	}
}

// unlinkHeld takes a grant out of its grantee's list. g is the caller's
// copy, which it then puts.
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
	g.NewerHeld, g.OlderHeld, g.OffHeld = "", "", true
}
