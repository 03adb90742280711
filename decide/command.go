package decide

import (
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// Env is what every decision of a batch is made under: the decision
// time, the deciding owner's fencing epoch, how long requestIds and queue
// dedupIds are remembered, and the two things the rules take from outside
// the standard library (injected, so that decide stays pure and its
// tests deterministic).
type Env struct {
	Now   time.Time
	Epoch int64
	// Window is how long a requestId is remembered on its key.
	Window RequestWindow
	// DedupWindow is how long a queue push's dedupId makes a repeated
	// push with it add nothing.
	DedupWindow time.Duration
	// NewID returns a fresh unique id (conflict records, transactions
	// that append nothing): the writer's UUIDv7.
	NewID func() string
	// Equal compares two JSON values canonically (RFC 8785: key order,
	// number spelling and string escapes do not matter).
	Equal func(a, b json.RawMessage) bool
	// MaxAppendBytes is the bytes of kv.changes records one decision may
	// append (the partition's budget of one round; 0: unbounded): a
	// decision of many events (a prefix write) sizes itself by it
	// (EventBytes).
	MaxAppendBytes int
}

// RequestRef names a requestId on a key.
type RequestRef struct {
	Key       string
	RequestID string
}

// AppliedRequest is the newest event of a key that carried a requestId:
// its version and the digest of the request that produced it
// (its command's digest, requestid.go), so a retry can be told from a
// reuse.
type AppliedRequest struct {
	Version int64
	Digest  string
	// Popped is the element the event popped when it is a pop (lpop,
	// rpop, qpop): a retried pop is answered as a replay with the value
	// (a queue item: data, receipt and deadline) the lost answer carried.
	Popped *contract.Element
	// After is a pop's event's metadata after it (the collection's
	// length or size then); nil for every other event.
	After json.RawMessage
	// At is when the event was written (its ts): a requestId is
	// remembered for a time as well as for a number of versions.
	At time.Time
}

// ElementRef names a collection's element row: a set member, a list
// position (elemkey.ListPosition) or a queue item (elemkey.QueueMember).
type ElementRef struct {
	Collection string
	Member     string
}

// ElementRow is an element's row as a batch knows it: the version that
// wrote it (0: no row) and, for a list element, its value.
type ElementRow struct {
	Version int64
	Value   json.RawMessage
}

// Input is what a command is decided on: what its batch read for it
// (the overlay, the state cache, the projection) and decided before it.
type Input struct {
	// State is the state of a single-key command's key; States holds
	// every key a transaction reads.
	State  keystate.State
	States map[string]keystate.State
	// Known holds earlier uses of the command's requestId (requestid.go).
	Known Memory
	// Element is the row Command.Row named (a set's member, a list's
	// end), when it named one.
	Element ElementRow
	// Queue is a queue write's items (QueueInput).
	Queue QueueInput
	// Under is what a prefix write reads (Plan.Prefixes): the keys
	// under its prefix, whose states are in States.
	Under PrefixKeys
}

// Plan is what a batch reads before it decides any of its commands, in
// one round trip: every key's state, the earlier uses of requestIds,
// and element rows that do not depend on any state.
type Plan struct {
	Keys     []string
	Requests []RequestRef
	Elements []ElementRef
	// Prefixes are the key ranges a prefix write reads (ranges.go): the
	// batch reads the keys under each, and their states, from its own
	// decisions, the overlay and the projection.
	Prefixes []PrefixRef
}

// Command is one write of an op family, decided by the partition's owner:
// it says what it reads (Plan, Row) and decides given what was read
// (Decide: state in, events, an answer or a refusal out). The writer runs
// every command alike: plan all, read once, decide each, commit.
type Command interface {
	// Head is what every write carries: its key, op, requestId and
	// principal.
	Head() *Header
	// Plan adds to p what the command reads before its batch decides.
	Plan(p *Plan)
	// Row names the element row the command decides on given its key's
	// state cur at now (a set's member, a list's end); ok is false when
	// it decides on none.
	Row(cur keystate.State, now time.Time) (ref ElementRef, ok bool)
	// Decide decides the command on in. It is pure.
	Decide(in Input, env Env) Decision
}

// planKey is the plan of a single-key write: its key and its requestId
// (a denied write's is never consulted).
func planKey(h *Header, denied bool, p *Plan) {
	p.Keys = append(p.Keys, h.Key.String())
	if ref, ok := requestRef(h, denied); ok {
		p.Requests = append(p.Requests, ref)
	}
}

// planSession adds the session a write attaches to (if any) to p.
func planSession(session string, p *Plan) {
	if session != "" {
		p.Keys = append(p.Keys, session)
	}
}

func (c *KV) Head() *Header                                    { return &c.Header }
func (c *KV) Plan(p *Plan)                                     { planKey(&c.Header, c.Denied, p); planSession(c.Session, p) }
func (c *KV) Row(keystate.State, time.Time) (ElementRef, bool) { return ElementRef{}, false }
func (c *KV) Decide(in Input, env Env) Decision                { return decideKV(c, in, env) }

func (c *Lock) Head() *Header                                    { return &c.Header }
func (c *Lock) Plan(p *Plan)                                     { planKey(&c.Header, false, p); planSession(c.Session, p) }
func (c *Lock) Row(keystate.State, time.Time) (ElementRef, bool) { return ElementRef{}, false }
func (c *Lock) Decide(in Input, env Env) Decision                { return decideLock(c, in, env) }

func (c *Queue) Head() *Header                                    { return &c.Header }
func (c *Queue) Plan(p *Plan)                                     { planKey(&c.Header, false, p) }
func (c *Queue) Row(keystate.State, time.Time) (ElementRef, bool) { return ElementRef{}, false }
func (c *Queue) Decide(in Input, env Env) Decision                { return decideQueue(c, in, env) }

func (c *List) Head() *Header { return &c.Header }
func (c *List) Plan(p *Plan)  { planKey(&c.Header, false, p) }
func (c *List) Row(cur keystate.State, now time.Time) (ElementRef, bool) {
	return popRef(cur, c, now)
}
func (c *List) Decide(in Input, env Env) Decision { return decideList(c, in, env) }

func (c *Set) Head() *Header { return &c.Header }
func (c *Set) Plan(p *Plan) {
	planKey(&c.Header, false, p)
	if ref, ok := memberRef(c); ok {
		p.Elements = append(p.Elements, ref)
	}
}
func (c *Set) Row(keystate.State, time.Time) (ElementRef, bool) { return memberRef(c) }
func (c *Set) Decide(in Input, env Env) Decision                { return decideSet(c, in, env) }

func (c *Txn) Head() *Header { return &c.Header }
func (c *Txn) Plan(p *Plan) {
	p.Keys = append(p.Keys, Keys(c)...)
	p.Requests = append(p.Requests, c.requestRefs()...)
}
func (c *Txn) Row(keystate.State, time.Time) (ElementRef, bool) { return ElementRef{}, false }
func (c *Txn) Decide(in Input, env Env) Decision                { return decideTxn(c, in, env) }

func (c *Range) Head() *Header                                    { return &c.Header }
func (c *Range) Plan(p *Plan)                                     { p.Prefixes = append(p.Prefixes, c.Ref()) }
func (c *Range) Row(keystate.State, time.Time) (ElementRef, bool) { return ElementRef{}, false }
func (c *Range) Decide(in Input, env Env) Decision                { return decideRange(c, in, env) }
