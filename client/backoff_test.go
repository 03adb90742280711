package client

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// drain returns the waits of b until it stops, at most n of them.
func drain(b *backoff, n int) []time.Duration {
	var ws []time.Duration
	for range n {
		w, stop := b.Next()
		if stop {
			break
		}
		ws = append(ws, w)
	}
	return ws
}

// unjittered is b with its ceilings as waits, to compare schedules.
func unjittered(b *backoff) *backoff {
	b.jitter = false
	return b
}

// TestBackoffSchedules: the schedules RetryPolicy derives, without
// jitter where the policy has none: doubling from the base, capped, the
// last wait being the cap, then stop.
func TestBackoffSchedules(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		b    *backoff
		want string
	}{
		{"ConflictDefault", DefaultRetryPolicy().conflict(), "[1s 2s 4s 8s 16s 32s]"},
		{"ConflictCustomCap", RetryPolicy{ConflictBase: 100 * ms, ConflictCap: time.Second}.conflict(), "[100ms 200ms 400ms 800ms 1s]"},
		{"ConflictCapBelowBase", RetryPolicy{ConflictBase: time.Second, ConflictCap: 300 * ms}.conflict(), "[300ms]"},
		{"OddCapReached", &backoff{next: 2, cap: 3, left: 4}, "[2ns 3ns 3ns 3ns]"},
		{"NoOverflow", &backoff{next: 1 << 61, cap: math.MaxInt64, left: 4}, fmt.Sprint([]time.Duration{1 << 61, 1 << 62, math.MaxInt64, math.MaxInt64})},
		{"UnboundedUntilAsked", &backoff{next: ms, cap: 4 * ms, left: -1}, "[1ms 2ms 4ms 4ms 4ms 4ms 4ms 4ms]"},
		{"NoWaitsLeft", &backoff{next: ms, cap: ms, left: 0}, "[]"},
		{"TransientZeroMinWait", RetryPolicy{Attempts: 4}.transient(), "[0s 0s 0s]"},
		{"TransientMaxBelowMin", unjittered(RetryPolicy{Attempts: 3, MinWait: time.Second, MaxWait: 100 * ms}.transient()), "[100ms 100ms]"},
		{"TransientDefault", unjittered(DefaultRetryPolicy().transient()), "[100ms 200ms 400ms 800ms]"},
		{"TransientOneAttempt", RetryPolicy{Attempts: 1, MinWait: ms, MaxWait: ms}.transient(), "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(drain(tc.b, 8)); got != tc.want {
				t.Fatalf("waits %s, want %s", got, tc.want)
			}
		})
	}
}

// TestBackoffJitter: jittered waits stay in the upper half of their
// unjittered ceiling, and they do vary.
func TestBackoffJitter(t *testing.T) {
	p := DefaultRetryPolicy()
	seen := map[time.Duration]bool{}
	for range 200 {
		ws := drain(p.transient(), 10)
		if len(ws) != DefaultAttempts-1 {
			t.Fatalf("%d waits, want %d", len(ws), DefaultAttempts-1)
		}
		for i, w := range ws {
			hi := min(DefaultMinWait<<i, DefaultMaxWait)
			if w < hi/2 || w > hi {
				t.Fatalf("wait %d: %v, want within [%v, %v]", i+1, w, hi/2, hi)
			}
			seen[w] = true
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct waits in 800: not jittered", len(seen))
	}
}
