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
	WaitForNil(tb, timeout, fmt.Sprintf("the projection of %s to reach %v", topic, want), func() error {
		got, err := s.Offsets(context.Background(), topic)
		if err != nil {
			tb.Fatalf("stored offsets of %s: %v", topic, err)
		}
		for p, o := range want {
			if got[p] < o {
				return fmt.Errorf("stored offsets of %s: %v", topic, got)
			}
		}
		return nil
	})
}
