// Package linz checks the history eskvchaos's clients record for
// linearizability, with porcupine, against a CAS register per key: its
// state is the key's version, whether it is live and its value (version
// 0: never written; a deleted key keeps its version, which the next
// write continues). A read returns the value and version, or not found
// when the key is not live. A write carries the expected version (0: the
// key must not be live) and a value unique to the operation; it returns
// ok with the next version, or a conflict with the current version and
// value (0 and "" when not live). A touch (POST :touch, a new expiry)
// carries the expected version only: it is a write of the value the
// register holds, so it returns ok with the next version and that same
// value, or a conflict as a write does.
//
// A range delete (POST /v1/kv:deleteRange in its atomic mode) carries a
// prefix: in one step it deletes every live register under it (each one
// version on, not live) and returns ok with how many. The registers
// under one prefix are then one partition of the check, their states
// one; the model assumes the history names every key that lives under
// a range delete's prefix (the count would not match otherwise). A
// refused range delete (too_many_keys) had no effect and is failed.
// expireDue is not an operation of the model: which keys it removes
// depends on the writer's clock when it decides, which no history holds.
//
// An operation whose outcome the client could not learn (a timeout, a
// connection broken after the request was sent, a 503 that says the outcome
// is unknown) is unknown: its return time is the end of the history and
// Step accepts it in any state. An unknown write applies when the state
// matches its expected version and is a no-op otherwise. That deterministic
// rule loses nothing against "may or may not apply": a write that did not
// apply can be linearized at the very end of the history, where applying
// it or not is invisible to every other operation.
//
// Operations that definitely had no effect (a refused connection, a 503
// given before the request was queued, a read that failed) are left out.
//
// CheckListings checks the listings of prefixes against the register's
// writes and the unconditional puts and deletes of other keys beside
// them (listing.go).
package linz

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is a register operation.
type Kind uint8

// Kinds of operations.
const (
	Read Kind = iota
	Write
	Touch
	// DeleteRange deletes every register under the prefix Input.Key.
	DeleteRange
)

// Writes reports whether operations of the kind write one register (a
// write or a touch): their acknowledged answers are versions the key has
// had, holding the answer's value. A range delete's answer is a count.
func (k Kind) Writes() bool { return k == Write || k == Touch }

// Input is what a client asked.
type Input struct {
	Key      string // a range delete: the prefix
	Kind     Kind
	Expected int64  // write, touch: the expected version
	Value    string // write: the new value
}

// Outcome is what a client learnt.
type Outcome uint8

// Outcomes of an operation.
const (
	OK Outcome = iota
	NotFound
	Conflict
	Unknown
	// Failed: definitely no effect; never given to the checker.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case NotFound:
		return "not found"
	case Conflict:
		return "conflict"
	case Unknown:
		return "unknown"
	default:
		return "failed"
	}
}

// Output is the answer: for ok, the version and value read or written;
// for a conflict, the current version and value ("" when absent); for a
// range delete, the count of keys it deleted.
type Output struct {
	Outcome Outcome
	Version int64
	Value   string
	Count   int `json:",omitempty"`
}

// register is the model's state for one key.
type register struct {
	Version int64
	Live    bool
	Value   string
}

// visible is the version and value a conflict answers: 0 and "" when
// the key is not live.
func (r register) visible() (int64, string) {
	if !r.Live {
		return 0, ""
	}
	return r.Version, r.Value
}

// keyed is one key's register in a partition's state.
type keyed struct {
	Key string
	register
}

// registers is the state of one partition: the registers written so
// far, in key order (a key not there was never written). Steps never
// change one in place: a changed state is a new slice.
type registers []keyed

func (rs registers) find(key string) (int, bool) {
	return sort.Find(len(rs), func(i int) int { return strings.Compare(key, rs[i].Key) })
}

// get is key's register.
func (rs registers) get(key string) register {
	if i, ok := rs.find(key); ok {
		return rs[i].register
	}
	return register{}
}

// with is rs with key's register r.
func (rs registers) with(key string, r register) registers {
	i, ok := rs.find(key)
	out := make(registers, 0, len(rs)+1)
	out = append(out, rs[:i]...)
	out = append(out, keyed{Key: key, register: r})
	if ok {
		i++
	}
	return append(out, rs[i:]...)
}

// step applies one operation to a partition's state.
func step(state, input, output any) (bool, any) {
	rs, in, out := state.(registers), input.(Input), output.(Output)
	if in.Kind == DeleteRange {
		return deleteRangeStep(rs, in, out)
	}
	ok, next := casStep(rs.get(in.Key), in, out)
	if r := next.(register); ok && r != rs.get(in.Key) {
		return true, rs.with(in.Key, r)
	}
	return ok, rs
}

// deleteRangeStep deletes the live registers under the prefix in.Key at
// once: ok when it answered their count; an unknown one applies (as an
// unknown write: linearized at the end of the history, applying it is
// invisible).
func deleteRangeStep(rs registers, in Input, out Output) (bool, any) {
	next := make(registers, len(rs))
	n := 0
	for i, k := range rs {
		next[i] = k
		if k.Live && strings.HasPrefix(k.Key, in.Key) {
			next[i].register = register{Version: k.Version + 1}
			n++
		}
	}
	switch out.Outcome {
	case OK:
		return out.Count == n, next
	case Unknown:
		return true, next
	}
	return false, rs
}

// casStep applies a read, write or touch to one register.
func casStep(s register, in Input, out Output) (bool, any) {
	switch in.Kind {
	case Read:
		switch out.Outcome {
		case OK:
			return s.Live && s.Version == out.Version && s.Value == out.Value, s
		case NotFound:
			return !s.Live, s
		case Unknown:
			return true, s
		}
	case Write:
		// Expected 0 asks for a key not live; N for live version N.
		applies := s.Live && s.Version == in.Expected || !s.Live && in.Expected == 0
		switch out.Outcome {
		case OK:
			if applies && out.Version == s.Version+1 && out.Value == in.Value {
				return true, register{Version: out.Version, Live: true, Value: in.Value}
			}
		case Conflict:
			v, value := s.visible()
			return !applies && v == out.Version && value == out.Value, s
		case Unknown:
			if applies {
				return true, register{Version: s.Version + 1, Live: true, Value: in.Value}
			}
			return true, s
		}
	case Touch:
		return touchStep(s, in, out)
	}
	return false, s
}

// touchStep is casStep of a touch: a write of the value s holds, so it
// applies only to a key that exists (a touch never creates one; it names
// a version read, never 0).
func touchStep(s register, in Input, out Output) (bool, any) {
	applies := s.Live && s.Version == in.Expected
	switch out.Outcome {
	case OK:
		if applies && out.Version == s.Version+1 && out.Value == s.Value {
			return true, register{Version: out.Version, Live: true, Value: s.Value}
		}
	case Conflict:
		v, value := s.visible()
		return !applies && v == out.Version && value == out.Value, s
	case Unknown:
		if applies {
			return true, register{Version: s.Version + 1, Live: true, Value: s.Value}
		}
		return true, s
	}
	return false, s
}

// Model is the per-key CAS register, partitioned by key, the keys under
// a range delete's prefix in one partition with it (partition).
var Model = porcupine.Model{
	Partition: partition,
	Init:      func() any { return registers(nil) },
	Step:      step,
	Equal: func(a, b any) bool {
		return slices.Equal(a.(registers), b.(registers))
	},
	Hash: func(state any) uint64 {
		h := fnv.New64a()
		for _, k := range state.(registers) {
			fmt.Fprintf(h, "%s/%d/%t/%s\x00", k.Key, k.Version, k.Live, k.Value)
		}
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		var call string
		switch in.Kind {
		case Read:
			call = "read()"
		case DeleteRange:
			call = fmt.Sprintf("deleteRange(%s)", in.Key)
			if out.Outcome == OK {
				return fmt.Sprintf("%s → ok, %d deleted", call, out.Count)
			}
			return call + " → " + out.Outcome.String()
		case Touch:
			call = fmt.Sprintf("touch(v%d)", in.Expected)
		default:
			call = fmt.Sprintf("cas(v%d → %q)", in.Expected, in.Value)
		}
		switch out.Outcome {
		case OK:
			if in.Kind == Read {
				return fmt.Sprintf("%s → v%d %q", call, out.Version, out.Value)
			}
			return fmt.Sprintf("%s → ok v%d", call, out.Version)
		case Conflict:
			return fmt.Sprintf("%s → conflict, current v%d %q", call, out.Version, out.Value)
		default:
			return call + " → " + out.Outcome.String()
		}
	},
	DescribeState: func(state any) string {
		var b strings.Builder
		for i, k := range state.(registers) {
			if i > 0 {
				b.WriteString(", ")
			}
			if !k.Live {
				fmt.Fprintf(&b, "%s: absent at v%d", k.Key, k.Version)
				continue
			}
			fmt.Fprintf(&b, "%s: v%d %q", k.Key, k.Version, k.Value)
		}
		if b.Len() == 0 {
			return "absent"
		}
		return b.String()
	},
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
}

// partition splits a history by key, but keeps in one part every key
// under a range delete's prefix with that range delete (and with the
// keys of any other range delete whose keys it shares), parts in the
// order of their first key.
func partition(h []porcupine.Operation) [][]porcupine.Operation {
	var keys []string
	seen := map[string]bool{}
	for _, op := range h {
		if in := op.Input.(Input); in.Kind != DeleteRange && !seen[in.Key] {
			seen[in.Key] = true
			keys = append(keys, in.Key)
		}
	}
	sort.Strings(keys)
	// parent is a union-find over nodes: a key, or a range delete's
	// prefix ("\x00" before it: never a key).
	parent := map[string]string{}
	var root func(n string) string
	root = func(n string) string {
		p, ok := parent[n]
		if !ok || p == n {
			return n
		}
		r := root(p)
		parent[n] = r
		return r
	}
	node := func(in Input) string {
		if in.Kind == DeleteRange {
			return "\x00" + in.Key
		}
		return in.Key
	}
	for _, op := range h {
		in := op.Input.(Input)
		if in.Kind != DeleteRange {
			continue
		}
		from := sort.SearchStrings(keys, in.Key)
		for _, k := range keys[from:] {
			if !strings.HasPrefix(k, in.Key) {
				break
			}
			if a, b := root(node(in)), root(k); a != b {
				parent[a] = b
			}
		}
	}
	byRoot := map[string][]porcupine.Operation{}
	var roots []string
	for _, op := range h {
		r := root(node(op.Input.(Input)))
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], op)
	}
	sort.Strings(roots)
	out := make([][]porcupine.Operation, 0, len(roots))
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}

// Op is one operation a client performed, with its invocation and
// response times on the harness's monotonic clock (since the start).
type Op struct {
	Client int    `json:"client"`
	Writer int    `json:"writer"` // index of the writer the request was sent to
	In     Input  `json:"input"`
	Out    Output `json:"output"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	// Detail says why an outcome is failed or unknown (status, message or
	// transport error).
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// Settled: an unknown write Resolve found committed; it is OK, and
	// returns at the end of the history (when it committed is unknown).
	Settled bool `json:"settled,omitempty"`
}

// Written is the value an acknowledged write or touch left: a write's
// own, the value a touch kept (its answer's).
func (o Op) Written() string {
	if o.In.Kind == Touch {
		return o.Out.Value
	}
	return o.In.Value
}

// Resolve settles the unknown writes and touches of h by what the log
// committed, once none can still commit: committed(o) returns the
// version at which o committed and the value it left (a write's own
// value, unique to it; a touch, found by its requestId, the value it
// kept), or false when the log holds none. A committed one becomes OK
// with that version (and Settled); one the log does not hold never
// happened and becomes Failed. The checker then searches far fewer
// orders: an unknown write may or may not have happened, a settled one
// did, at a known version. It returns how many of each.
func Resolve(h []Op, committed func(o Op) (version int64, value string, ok bool)) (applied, failed int) {
	for i := range h {
		o := &h[i]
		if !o.In.Kind.Writes() || o.Out.Outcome != Unknown {
			continue
		}
		if v, value, ok := committed(*o); ok {
			o.Out, o.Settled = Output{Outcome: OK, Version: v, Value: value}, true
			applied++
		} else {
			o.Out.Outcome = Failed
			failed++
		}
	}
	return applied, failed
}

// Operations turns the recorded history into porcupine operations: failed
// operations are dropped, and unknown reads too (a read has no effect);
// unknown writes return at the end of the history.
func Operations(h []Op) []porcupine.Operation {
	var end int64
	for _, o := range h {
		end = max(end, o.Call, o.Return)
	}
	end++
	out := make([]porcupine.Operation, 0, len(h))
	for _, o := range h {
		switch {
		case o.Out.Outcome == Failed:
			continue
		case o.Out.Outcome == Unknown && o.In.Kind == Read:
			continue
		}
		ret := o.Return
		if o.Out.Outcome == Unknown || o.Settled {
			ret = end
		}
		meta := fmt.Sprintf("client %d via writer %d", o.Client, o.Writer)
		if o.RequestID != "" {
			meta += ", requestId " + o.RequestID
		}
		if o.Detail != "" {
			meta += ": " + o.Detail
		}
		out = append(out, porcupine.Operation{
			ClientId: o.Client, Input: o.In, Output: o.Out, Call: o.Call, Return: ret, Metadata: meta,
		})
	}
	return out
}

// Result is the verdict on a history.
type Result struct {
	Result  porcupine.CheckResult
	Ops     int // operations given to the checker
	Unknown int // of which unknown writes (and range deletes)
	Keys    int // keys read or written
	Elapsed time.Duration
	info    porcupine.LinearizationInfo
}

// Check checks the history per key with the CAS-register
// model, giving up after timeout (Result Unknown).
func Check(h []Op, timeout time.Duration) Result {
	ops := Operations(h)
	l := Result{Ops: len(ops)}
	keys := map[string]bool{}
	for _, o := range ops {
		if in := o.Input.(Input); in.Kind != DeleteRange {
			keys[in.Key] = true
		}
		if o.Output.(Output).Outcome == Unknown {
			l.Unknown++
		}
	}
	l.Keys = len(keys)
	start := time.Now()
	l.Result, l.info = porcupine.CheckOperationsVerbose(Model, ops, timeout)
	l.Elapsed = time.Since(start)
	return l
}

// Visualize writes porcupine's HTML view of the checked history to path.
func (l Result) Visualize(path string) error {
	return porcupine.VisualizePath(Model, l.info, path)
}
