package events

import (
	"encoding/json"
	"time"
)

// LockValue is the value of a lock or leader-pool entry. Token is the
// entry's version when Holder's tenure began: it grows strictly from one
// tenure to the next (versions never go back, also across release and
// expiry) and stays the same while the holder re-enters or extends, so a
// protected resource can refuse any request carrying a token lower than
// the highest it has seen.
type LockValue struct {
	Holder     string    `json:"holder"`
	Token      int64     `json:"token"`
	AcquiredAt time.Time `json:"acquiredAt"`
}

// LockAnswerOf reads a lock-shaped entry; a value that is no lock is
// wrong_type.
func LockAnswerOf(e *Entry) (LockAnswer, error) {
	var v LockValue
	if err := json.Unmarshal(e.Value, &v); err != nil || v.Holder == "" {
		return LockAnswer{}, FieldErrorf(EWrongType, "key", "key %s does not hold a lock value", e.Key)
	}
	return LockAnswer{Key: e.Key, Holder: v.Holder, Token: v.Token, Version: e.Version, AcquiredAt: v.AcquiredAt, ExpiresAt: e.ExpiresAt}, nil
}
