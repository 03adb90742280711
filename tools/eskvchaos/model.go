package main

import (
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The history the clients record is checked against a CAS register per
// key: its state is the key's version and value (version 0: the key does
// not exist; the harness never deletes). A read returns the value and
// version, or not found. A write carries the expected version (0: the key
// must not exist) and a value unique to the operation; it returns ok with
// the new version, or a conflict with the current version and value.
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

// opKind is a register operation.
type opKind uint8

const (
	opRead opKind = iota
	opWrite
)

// casInput is what a client asked.
type casInput struct {
	Key      string
	Kind     opKind
	Expected int64  // write: the expected version
	Value    string // write: the new value
}

// outcome is what a client learnt.
type outcome uint8

const (
	outOK outcome = iota
	outNotFound
	outConflict
	outUnknown
	// outFailed: definitely no effect; never given to the checker.
	outFailed
)

func (o outcome) String() string {
	switch o {
	case outOK:
		return "ok"
	case outNotFound:
		return "not found"
	case outConflict:
		return "conflict"
	case outUnknown:
		return "unknown"
	default:
		return "failed"
	}
}

// casOutput is the answer: for ok, the version and value read or written;
// for a conflict, the current version and value ("" when absent).
type casOutput struct {
	Outcome outcome
	Version int64
	Value   string
}

// register is the model's state for one key.
type register struct {
	Version int64
	Value   string
}

func casStep(state, input, output any) (bool, any) {
	s, in, out := state.(register), input.(casInput), output.(casOutput)
	switch in.Kind {
	case opRead:
		switch out.Outcome {
		case outOK:
			return s.Version > 0 && s.Version == out.Version && s.Value == out.Value, s
		case outNotFound:
			return s.Version == 0, s
		case outUnknown:
			return true, s
		}
	case opWrite:
		switch out.Outcome {
		case outOK:
			if s.Version == in.Expected && out.Version == s.Version+1 && out.Value == in.Value {
				return true, register{Version: out.Version, Value: in.Value}
			}
		case outConflict:
			return s.Version != in.Expected && s.Version == out.Version && s.Value == out.Value, s
		case outUnknown:
			if s.Version == in.Expected {
				return true, register{Version: s.Version + 1, Value: in.Value}
			}
			return true, s
		}
	}
	return false, s
}

// casModel is the per-key CAS register, partitioned by key.
var casModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(casInput).Key
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
		in, out := input.(casInput), output.(casOutput)
		var call string
		if in.Kind == opRead {
			call = "read()"
		} else {
			call = fmt.Sprintf("cas(v%d → %q)", in.Expected, in.Value)
		}
		switch out.Outcome {
		case outOK:
			if in.Kind == opRead {
				return fmt.Sprintf("%s → v%d %q", call, out.Version, out.Value)
			}
			return fmt.Sprintf("%s → ok v%d", call, out.Version)
		case outConflict:
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

// op is one operation a client performed, with its invocation and
// response times on the harness's monotonic clock (since the start).
type op struct {
	Client int       `json:"client"`
	Writer int       `json:"writer"` // index of the writer the request was sent to
	In     casInput  `json:"input"`
	Out    casOutput `json:"output"`
	Call   int64     `json:"call"`
	Return int64     `json:"return"`
	// Detail says why an outcome is failed or unknown (status, message or
	// transport error).
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// operations turns the recorded history into porcupine operations: failed
// operations are dropped, and unknown reads too (a read has no effect);
// unknown writes return at the end of the history.
func operations(h []op) []porcupine.Operation {
	var end int64
	for _, o := range h {
		end = max(end, o.Call, o.Return)
	}
	end++
	out := make([]porcupine.Operation, 0, len(h))
	for _, o := range h {
		switch {
		case o.Out.Outcome == outFailed:
			continue
		case o.Out.Outcome == outUnknown && o.In.Kind == opRead:
			continue
		}
		ret := o.Return
		if o.Out.Outcome == outUnknown {
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

// linearizability is the verdict on a history.
type linearizability struct {
	Result  porcupine.CheckResult
	Ops     int // operations given to the checker
	Unknown int // of which unknown writes
	Keys    int
	Elapsed time.Duration
	info    porcupine.LinearizationInfo
}

// checkLinearizable checks the history per key with the CAS-register
// model, giving up after timeout (Result Unknown).
func checkLinearizable(h []op, timeout time.Duration) linearizability {
	ops := operations(h)
	l := linearizability{Ops: len(ops)}
	keys := map[string]bool{}
	for _, o := range ops {
		keys[o.Input.(casInput).Key] = true
		if o.Output.(casOutput).Outcome == outUnknown {
			l.Unknown++
		}
	}
	l.Keys = len(keys)
	start := time.Now()
	l.Result, l.info = porcupine.CheckOperationsVerbose(casModel, ops, timeout)
	l.Elapsed = time.Since(start)
	return l
}

// visualize writes porcupine's HTML view of the checked history to path.
func (l linearizability) visualize(path string) error {
	return porcupine.VisualizePath(casModel, l.info, path)
}
