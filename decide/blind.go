package decide

import (
	"github.com/eskv/eskv/contract"
)

// Blind writes (docs/security.md, "What a write-only token learns"). A
// principal that may write a key but not read it learns from a write no
// more than whether its own write succeeded, and that yes or no must not
// depend on the value. So it may not ask for a condition on the value:
// an increment's min and max (a binary search of the counter in 63
// probes, each undone), a patch's if and a transaction's field condition
// (a guessed field confirmed), a transaction's check (a read), nor add
// more than MaxBlindStep (whether the sum leaves the 64-bit range
// is a bound on the value, as max is). Versions and existence are not
// values: expectedVersion and a transaction's version and exists
// conditions stay. Collections hide the rest: a blind sadd, srem or
// ltrim always appends (decideSet, decideList), and the API answers a
// blind write neither values, sizes nor membership.

// CheckBlind refuses the parts of c that a principal that may not read
// its key may not ask for (403 forbidden, field naming the parameter;
// in a transaction, ops[i].<parameter>). It is pure and decides on the
// command alone, before any state is read, so the refusal tells nothing
// of the key either. Only KV writes (alone or in a transaction) have
// such parts: a lock op or a collection write asks nothing of the value.
func CheckBlind(c Command) error {
	switch c := c.(type) {
	case *KV:
		if err := checkBlind(c); err != nil { // a nil *contract.Error is no nil error
			return err
		}
	case *Txn:
		for i, s := range c.Steps {
			if err := checkBlindStep(s); err != nil {
				return contract.InOp(i, err)
			}
		}
	}
	return nil
}

// checkBlindStep is CheckBlind of one step of a transaction: its check
// or field condition, then its write.
func checkBlindStep(s TxnStep) *contract.Error {
	c := s.Write
	switch {
	case !c.Blind:
		return nil
	case c.Op == contract.OpCheck:
		return blindRefusal(&c.Header, "key", "a check reads it")
	case s.Cond != nil && s.Cond.Field != "":
		return blindRefusal(&c.Header, "condition.field", "condition.field tests its value")
	}
	return checkBlind(c)
}

// checkBlind is CheckBlind of one key's write.
func checkBlind(c *KV) *contract.Error {
	switch {
	case !c.Blind:
		return nil
	case c.Min != nil:
		return blindRefusal(&c.Header, "min", "min tests the counter's value")
	case c.Max != nil:
		return blindRefusal(&c.Header, "max", "max tests the counter's value")
	case c.If != nil:
		return blindRefusal(&c.Header, "if", "if tests a field's value")
	case c.Op == contract.OpIncrement && (c.By > MaxBlindStep || c.By < -MaxBlindStep):
		return contract.FieldErrorf(contract.EForbidden, "by",
			"principal %s may not read %s: it may add at most %d either way (whether a larger sum leaves the 64-bit range tells the counter's value)",
			c.Principal, c.Key.String(), int64(MaxBlindStep))
	}
	return nil
}

// blindRefusal refuses field of the write h heads: why says what it
// would read.
func blindRefusal(h *Header, field, why string) *contract.Error {
	return contract.FieldErrorf(contract.EForbidden, field, "principal %s may not read %s: %s, which needs the read right as well as the write right",
		h.Principal, h.Key.String(), why)
}

// MaxBlindStep bounds the addend of an increment by a principal that may
// write the counter but not read it (403 forbidden on field by beyond
// it): whether an increment leaves the 64-bit range tells the counter's
// value, and with steps this small a principal must make about 2^31
// increments before it reaches the range's end.
const MaxBlindStep = 1 << 32
