package contract

import (
	"strconv"
	"time"
)

// Blocking waits (docs/collections.md "Blocking waits"): :qpop, :lpop,
// :rpop and a lock's :acquire take the query parameter wait, how long
// the owning writer may hold the request for an item to arrive or the
// lock to be granted (in arrival order) before it answers as without it.

// WaitParam is the query parameter of a blocking wait.
const WaitParam = "wait"

// MaxWait bounds a wait.
const MaxWait = 30 * time.Second

// Waits reports whether op takes a wait: the pops, and a lock's acquire.
func Waits(op Op) bool {
	switch op {
	case OpQPop, OpLPop, OpRPop, OpLockAcquire:
		return true
	}
	return false
}

// ParseWait reads a wait: a Go duration (500ms, 30s) or whole seconds
// (30), from 0 to MaxWait. Anything else is 400 invalid naming the field
// wait.
func ParseWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.ParseInt(s, 10, 64)
		if nerr != nil {
			return 0, FieldErrorf(EInvalid, WaitParam, "wait must be a duration (500ms, 30s) or whole seconds, from 0 to %s", MaxWait)
		}
		if n < 0 || n > int64(MaxWait/time.Second) {
			return 0, FieldErrorf(EInvalid, WaitParam, "wait %ds is outside 0 to %s", n, MaxWait)
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > MaxWait {
		return 0, FieldErrorf(EInvalid, WaitParam, "wait %s is outside 0 to %s", d, MaxWait)
	}
	return d, nil
}

// FormatWait is d as the wait parameter carries it: whole milliseconds.
func FormatWait(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}
