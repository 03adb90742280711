package writer

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
)

// TestConflictPurpose: a conflict is attributed to the key's current
// purpose, and to the request's only when the key is absent: in the
// kv.conflicts record and in the WARN log line.
func TestConflictPurpose(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	key := mustKey(t, "tenant/a/project/b/k")
	counter := keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: key.String(), Version: 3, Value: json.RawMessage(`1`),
		Semantics: contract.Semantics{Purpose: "counter"}}}
	cfg := contract.Semantics{Purpose: "config"}
	for _, tc := range []struct {
		name    string
		cur     keystate.State
		req     decide.KV
		purpose string
	}{
		{"PutWithoutSemantics", counter, decide.KV{Header: decide.Header{Op: contract.OpPut}, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1)}, "counter"},
		{"PutOtherPurpose", counter, decide.KV{Header: decide.Header{Op: contract.OpPut}, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1), Semantics: cfg}, "counter"},
		{"Delete", counter, decide.KV{Header: decide.Header{Op: contract.OpDelete}, ExpectedVersion: ptr(1)}, "counter"},
		{"Increment", counter, decide.KV{Header: decide.Header{Op: contract.OpIncrement}, By: 1, ExpectedVersion: ptr(1)}, "counter"},
		{"PatchAbsent", keystate.State{}, decide.KV{Header: decide.Header{Op: contract.OpPatch}, Set: map[string]json.RawMessage{"a": json.RawMessage(`1`)}, ExpectedVersion: ptr(1)}, "other"},
		{"PutAbsent", keystate.State{}, decide.KV{Header: decide.Header{Op: contract.OpPut}, Value: json.RawMessage(`2`), ExpectedVersion: ptr(1), Semantics: cfg}, "config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			r.Key, r.Principal = key, "p"
			d := r.Decide(decide.Input{State: tc.cur}, testEnv(now, 1))
			if d.Conflict == nil || d.Conflict.Semantics.Purpose != tc.purpose {
				t.Fatalf("conflict %+v, want purpose %s", d.Conflict, tc.purpose)
			}
			var log bytes.Buffer
			m, err := newMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			w := &Writer{log: slog.New(slog.NewJSONHandler(&log, nil)), metrics: m}
			w.logDecision(&r, d)
			if !strings.Contains(log.String(), `"purpose":"`+tc.purpose+`"`) {
				t.Fatalf("WARN line %s, want purpose %s", log.String(), tc.purpose)
			}
		})
	}
}

func ptr(v int64) *int64 { return &v }

func mustKey(t *testing.T, s string) contract.Key {
	t.Helper()
	k, err := contract.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testEnv is the Env of a decision at now by epoch under testWindow.
func testEnv(now time.Time, epoch int64) decide.Env {
	return testEnvW(now, epoch, testWindow)
}

// testEnvW is testEnv under window.
func testEnvW(now time.Time, epoch int64, window decide.RequestWindow) decide.Env {
	c := Config{QueueDedupWindow: DefaultQueueDedupWindow}
	env := c.env(now, epoch)
	env.Window = window
	return env
}
