//go:build go1.25

package client_test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// waitScript records the wait of each request; the first answers 503
// (the owner's partitions moved), the next the item.
type waitScript struct {
	script
	waits []string
}

func (s *waitScript) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.waits = append(s.waits, r.URL.Query().Get(contract.WaitParam))
	s.mu.Unlock()
	if r.URL.Query().Get(contract.WaitParam) != "" {
		time.Sleep(2 * time.Second) // the server waited this long
	}
	return s.script.RoundTrip(r)
}

// TestWaitRetriedWithWhatIsLeft: a QPop with Wait whose first attempt is
// answered 503 after 2 s is retried with what is left of its wait, and
// an acquire with Wait carries a requestId (so its retry is safe).
func TestWaitRetriedWithWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &waitScript{script: script{statuses: []int{http.StatusServiceUnavailable}, retryAfter: "1"}}
		c := client.New("http://eskv.test", "tok", client.WithHTTPClient(&http.Client{Transport: s}))
		_, _ = c.QPop(context.Background(), client.QPopRequest{Key: "tenant/a/project/b/q", Wait: 10 * time.Second})
		if len(s.waits) != 2 || s.waits[0] != "10000ms" {
			t.Fatalf("waits asked %v, want 10000ms then what is left", s.waits)
		}
		left, err := contract.ParseWait(s.waits[1])
		if err != nil || left <= 0 || left > 7*time.Second {
			t.Fatalf("retry's wait %q (%v), want 0 < wait <= 7s (10s less 2s waited, 1s Retry-After)", s.waits[1], err)
		}
	})
	t.Run("ErrOverMax", func(t *testing.T) {
		c := client.New("http://eskv.test", "tok")
		if _, err := c.LPopWait(context.Background(), "tenant/a/project/b/l", 31*time.Second); contract.ErrorCode(err) != contract.EInvalid {
			t.Fatalf("LPopWait 31s: %v, want invalid", err)
		}
	})
}
