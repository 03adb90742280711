package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// TestWriterRefusesRecreatedTopic: once kv.changes is deleted and
// recreated under a running writer, the writer never acknowledges another
// write: the projection holds the old topic's state, and versions built on
// it would not be in the new log.
func TestWriterRefusesRecreatedTopic(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.ProjectorMayStop())
	if r := s.do("PUT", base+"before", devToken, `{"value":1}`); r.Status != 200 {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)

	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, s.broker.Topics.Changes); err != nil {
		t.Fatal(err)
	}
	if err := changelog.Ensure(ctx, adm, s.broker.Topics); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(8 * time.Second)
	refused := 0
	for time.Now().Before(deadline) {
		r := s.do("PUT", base+"after", devToken, `{"value":2}`)
		if r.Status == 200 {
			t.Fatalf("a write was acknowledged on the recreated topic: %s", r.Body)
		}
		refused++
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d writes refused on the recreated topic", refused)
}
