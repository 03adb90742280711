package writer

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/gowebpki/jcs"

	"github.com/eskv/eskv/decide"
)

// The write rules are package decide's; the writer runs its commands
// (one type per op family, decide.Command).

// Result is the outcome of an accepted write (decide.Result).
type Result = decide.Result

// Defaults of the windows the rules remember requestIds and dedupIds
// for (Config.RequestIDWindow, RequestIDAge, QueueDedupWindow).
const (
	DefaultRequestIDWindow  = decide.DefaultRequestIDWindow
	DefaultRequestIDAge     = decide.DefaultRequestIDAge
	DefaultQueueDedupWindow = decide.DefaultQueueDedupWindow
)

// env is what the decisions of a batch decided at now by the ownership
// of epoch are made under.
func (c *Config) env(now time.Time, epoch int64) decide.Env {
	return decide.Env{Now: now, Epoch: epoch, Window: c.requestWindow(), DedupWindow: c.QueueDedupWindow,
		NewID: newID, Equal: jsonEqual}
}

// newID is a conflict record's or an appending-nothing transaction's id.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// jsonEqual compares two JSON values canonically (RFC 8785: key order,
// number spelling and string escapes do not matter).
func jsonEqual(a, b json.RawMessage) bool {
	ca, err1 := jcs.Transform(a)
	cb, err2 := jcs.Transform(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
