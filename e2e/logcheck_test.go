package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/logcheck"
)

// assertLogInvariants runs the checks eskvchaos runs after its fault
// phase on a stack whose projector consumed the whole log: per key,
// versions 1, 2, 3, ... each once and each event continuing the previous
// one (prevVersion, before); per partition, writer and producer epochs
// never going back; kv_entries the fold of the log, no row more or less;
// and every acknowledged write in kv_history.
func assertLogInvariants(t *testing.T, s *stack, acks []ack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	l, err := logcheck.Read(ctx, s.broker.Addrs, s.broker.Topics)
	if err != nil {
		t.Fatal(err)
	}
	if v := logcheck.Check(l.Events).Violations(); len(v) > 0 {
		t.Fatalf("the log of %d events breaks %d invariants:\n%s", len(l.Events), len(v), strings.Join(v[:min(len(v), 20)], "\n"))
	}
	acked := make([]logcheck.Acked, len(acks))
	for i, a := range acks {
		acked[i] = logcheck.Acked{Key: a.key, Version: a.version, Value: json.RawMessage(a.value)}
	}
	f, err := logcheck.Projection(ctx, s.pg.Pool, l, acked)
	if err != nil {
		t.Fatal(err)
	}
	if d := append(f.FoldDiffs, f.LostInProjection...); len(d) > 0 {
		t.Fatalf("the projection is not the fold of the log (%d differences):\n%s", len(d), strings.Join(d[:min(len(d), 20)], "\n"))
	}
}
