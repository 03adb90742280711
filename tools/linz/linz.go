// Package linz checks the history eskvchaos's clients record for
// linearizability, with porcupine, against a CAS register per key: its
// state is the key's version and value (version 0: the key does
// not exist; the harness never deletes a register key). A read returns the value and
// version, or not found. A write carries the expected version (0: the key
// must not exist) and a value unique to the operation; it returns ok with
// the new version, or a conflict with the current version and value. A
// touch (POST :touch, a new expiry) carries the expected version only: it
// is a write of the value the register holds, so it returns ok with the
// next version and that same value, or a conflict as a write does.
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
	"sort"
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
)

// Writes reports whether operations of the kind change the register (a
// write or a touch): their acknowledged answers are versions the key has
// had, holding the answer's value.
func (k Kind) Writes() bool { return k != Read }

// Input is what a client asked.
type Input struct {
	Key      string
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
// for a conflict, the current version and value ("" when absent).
type Output struct {
	Outcome Outcome
	Version int64
	Value   string
}

// register is the model's state for one key.
type register struct {
	Version int64
	Value   string
}

func casStep(state, input, output any) (bool, any) {
	s, in, out := state.(register), input.(Input), output.(Output)
	switch in.Kind {
	case Read:
		switch out.Outcome {
		case OK:
			return s.Version > 0 && s.Version == out.Version && s.Value == out.Value, s
		case NotFound:
			return s.Version == 0, s
		case Unknown:
			return true, s
		}
	case Write:
		switch out.Outcome {
		case OK:
			if s.Version == in.Expected && out.Version == s.Version+1 && out.Value == in.Value {
				return true, register{Version: out.Version, Value: in.Value}
			}
		case Conflict:
			return s.Version != in.Expected && s.Version == out.Version && s.Value == out.Value, s
		case Unknown:
			if s.Version == in.Expected {
				return true, register{Version: s.Version + 1, Value: in.Value}
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
	applies := s.Version > 0 && s.Version == in.Expected
	switch out.Outcome {
	case OK:
		if applies && out.Version == s.Version+1 && out.Value == s.Value {
			return true, register{Version: out.Version, Value: s.Value}
		}
	case Conflict:
		return !applies && s.Version == out.Version && s.Value == out.Value, s
	case Unknown:
		if applies {
			return true, register{Version: s.Version + 1, Value: s.Value}
		}
		return true, s
	}
	return false, s
}

// Model is the per-key CAS register, partitioned by key.
var Model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(Input).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return register{} },
	Step: casStep,
	Hash: func(state any) uint64 {
		s := state.(register)
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s", s.Version, s.Value)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		var call string
		switch in.Kind {
		case Read:
			call = "read()"
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
		s := state.(register)
		if s.Version == 0 {
			return "absent"
		}
		return fmt.Sprintf("v%d %q", s.Version, s.Value)
	},
	DescribeOperationMetadata: func(info any) string {
		if info == nil {
			return ""
		}
		return fmt.Sprint(info)
	},
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
	Unknown int // of which unknown writes
	Keys    int
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
		keys[o.Input.(Input).Key] = true
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
