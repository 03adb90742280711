package decide

import (
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
)

// LockValue is the value of a lock or leader-pool entry; only the lock
// and leader ops write it. Token is the entry's version when Holder's
// tenure began: it grows strictly from one tenure to the next (versions
// never go back, also across release, expiry and a break by a plain
// write) and stays the same while the holder re-enters or extends, so a
// protected resource can refuse any request carrying a token lower than
// the highest it has seen. Principal is who holds the tenure: Holder is
// that principal's label inside it, and another principal naming the
// same Holder does not hold it.
type LockValue struct {
	Holder     string    `json:"holder"`
	Token      int64     `json:"token"`
	AcquiredAt time.Time `json:"acquiredAt"`
	Principal  string    `json:"principal,omitempty"`
	// Session is the session the tenure is attached to (contract
	// session.go), if any: only an acquire naming the same session (or,
	// for a tenure without one, none) re-enters it, so one tenure is
	// never shared by two sessions.
	Session string `json:"session,omitempty"`
}

// HeldBy reports whether the tenure is holder's on behalf of principal.
// A value written before tenures named their principal belongs to the
// entry's last writer (lastWriter): only the lock ops write lock values,
// so that is the principal that acquired or last extended it.
func (v LockValue) HeldBy(holder, principal, lastWriter string) bool {
	owner := v.Principal
	if owner == "" {
		owner = lastWriter
	}
	return v.Holder == holder && owner == principal
}

// LockAnswerOf reads a lock-shaped entry; a value that is no lock is
// wrong_type.
func LockAnswerOf(e *contract.Entry) (contract.LockAnswer, error) {
	var v LockValue
	if err := json.Unmarshal(e.Value, &v); err != nil || v.Holder == "" {
		return contract.LockAnswer{}, contract.FieldErrorf(contract.EWrongType, "key", "key %s does not hold a lock value", e.Key)
	}
	return contract.LockAnswer{Key: e.Key, Holder: v.Holder, Token: v.Token, Version: e.Version, AcquiredAt: v.AcquiredAt, ExpiresAt: e.ExpiresAt}, nil
}
