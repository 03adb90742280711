package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestStallLogWithin(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	l := &stallLog{stalls: [][2]time.Time{{at(100), at(400)}, {at(1000), at(3000)}}}
	for _, tc := range []struct {
		from, to int
		want     time.Duration
	}{
		{0, 50, 0},
		{0, 5000, 2300 * time.Millisecond},
		{200, 1500, 700 * time.Millisecond},
		{2500, 2600, 100 * time.Millisecond},
		{3000, 4000, 0},
	} {
		if got := l.within(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("within(%d ms, %d ms) = %s, want %s", tc.from, tc.to, got, tc.want)
		}
	}
	// A stall the watching goroutine has not woken from yet counts too.
	l.last = at(3000)
	if got, want := l.within(at(3500), at(5000)), 1500*time.Millisecond; got != want {
		t.Errorf("within an ongoing stall = %s, want %s", got, want)
	}
	if got := (*stallLog)(nil).within(at(0), at(5000)); got != 0 {
		t.Errorf("a nil log's within = %s, want 0", got)
	}
}

// TestEvilWriteStarved: a write of evil's that got no answer while the
// attacking process stalled a second or more is reported apart and does
// not fail the phase; one without such a stall fails it.
func TestEvilWriteStarved(t *testing.T) {
	newHostile := func(l *stallLog) *hostile {
		return &hostile{stalls: l, evilCode: map[string]int{}, evilErr: map[string]string{}, counts: map[string]int{}}
	}
	start := time.Now().Add(-3 * time.Second)
	starved := newHostile(&stallLog{stalls: [][2]time.Time{{start.Add(time.Second), start.Add(2500 * time.Millisecond)}}})
	starved.evilWrite("concurrent 60 KiB PUT", start, 0, "", io.EOF)
	starved.evilWrite("concurrent 60 KiB PUT", start, 200, "", nil)
	if starved.evilCode[noAnswerStarved] != 1 || starved.evilCode["200"] != 1 {
		t.Fatalf("answers %v, want one starved and one 200", starved.evilCode)
	}
	if !strings.Contains(starved.evilErr[noAnswerStarved], "stalled 1.5s") {
		t.Errorf("the starved failure %q does not say how long the process stalled", starved.evilErr[noAnswerStarved])
	}
	var out strings.Builder
	starved.gets, starved.puts = []time.Duration{time.Millisecond}, []time.Duration{time.Millisecond}
	if err := starved.report(&out); err != nil {
		t.Errorf("report with only a starved failure: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "not counted against the writer: 1 ") {
		t.Errorf("report does not show the starved failure:\n%s", out.String())
	}

	quiet := newHostile(&stallLog{})
	quiet.evilWrite("concurrent 60 KiB PUT", start, 0, "", io.EOF)
	quiet.gets, quiet.puts = []time.Duration{time.Millisecond}, []time.Duration{time.Millisecond}
	out.Reset()
	if err := quiet.report(&out); !errors.Is(err, errChecksFailed) || !strings.Contains(out.String(), `"no answer (connection failed)" 1 times`) {
		t.Errorf("report with an unanswered write and no stall: %v\n%s", err, out.String())
	}
}
