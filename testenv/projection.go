package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/projection"
)

// WaitProjected waits until the offsets s has stored for topic reach want
// on every partition of want, failing the test after timeout.
func WaitProjected(tb testing.TB, timeout time.Duration, s *projection.Store, topic string, want map[int32]int64) {
	tb.Helper()
	var got map[int32]int64
	reached := false
	defer func() {
		if !reached {
			tb.Logf("stored offsets of %s: %v; want %v", topic, got, want)
		}
	}()
	WaitFor(tb, timeout, fmt.Sprintf("the projection of %s to reach %v", topic, want), func() bool {
		var err error
		if got, err = s.Offsets(context.Background(), topic); err != nil {
			tb.Fatalf("stored offsets of %s: %v", topic, err)
		}
		for p, o := range want {
			if got[p] < o {
				return false
			}
		}
		reached = true
		return true
	})
}
