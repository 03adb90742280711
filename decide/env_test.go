package decide

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/gowebpki/jcs"

	"github.com/eskv/eskv/projection/keystate"
)

// testEnv is the Env of a decision at now by epoch under testWindow,
// with the writer's ids and JSON comparison.
func testEnv(now time.Time, epoch int64) Env {
	return testEnvW(now, epoch, testWindow)
}

// testEnvW is testEnv under window.
func testEnvW(now time.Time, epoch int64, window RequestWindow) Env {
	return Env{Now: now, Epoch: epoch, Window: window, DedupWindow: DefaultQueueDedupWindow,
		NewID: func() string { return uuid.Must(uuid.NewV7()).String() },
		Equal: func(a, b json.RawMessage) bool {
			ca, err1 := jcs.Transform(a)
			cb, err2 := jcs.Transform(b)
			return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
		}}
}

// requestIDDecision is decideRequestID of r on cur when known says prior
// is the known earlier use of r's requestId.
func requestIDDecision(cur keystate.State, prior AppliedRequest, known bool, r *fixture, env Env) (Decision, bool) {
	m := Memory{}
	if ref, ok := requestRef(r.head(), r.Denied); ok && known {
		m[ref] = prior
	}
	return decideRequestID(newWrite(cur, commonOf(r), &env), m)
}
