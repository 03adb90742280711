package projection

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestRunTasks: a task starts once those it waits for are done, the
// first ready one first, restoreParallel at a time (a task that waits
// does not hold a connection up); after a failure no task starts and the
// error is returned.
func TestRunTasks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var log []string
	step := func(name string, d time.Duration, err error) func(context.Context) error {
		return func(context.Context) error {
			mu.Lock()
			log = append(log, "start "+name)
			mu.Unlock()
			time.Sleep(d)
			mu.Lock()
			log = append(log, "end "+name)
			mu.Unlock()
			return err
		}
	}
	// derive is long; fields waits for it; the others fill the second
	// connection meanwhile, and analyze waits for both of them.
	tasks := []task{
		{run: step("derive", 60*time.Millisecond, nil)},
		{run: step("fields", 10*time.Millisecond, nil), after: []int{0}},
		{run: step("a", 10*time.Millisecond, nil)},
		{run: step("b", 10*time.Millisecond, nil)},
		{run: step("analyze", 10*time.Millisecond, nil), after: []int{2, 3}},
	}
	if err := runTasks(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	at := func(s string) int { return slices.Index(log, s) }
	if len(log) != 10 || at("start fields") < at("end derive") || at("start analyze") < max(at("end a"), at("end b")) ||
		at("start a") > at("end derive") || at("start analyze") > at("end derive") {
		t.Errorf("log %q: want fields after derive, analyze after a and b, both of those while derive runs", log)
	}

	log = nil
	boom := errors.New("boom")
	tasks = []task{
		{run: step("derive", 20*time.Millisecond, boom)},
		{run: step("fields", 0, nil), after: []int{0}},
		{run: step("a", 50*time.Millisecond, nil)},
		{run: step("b", 0, nil)},
	}
	if err := runTasks(context.Background(), tasks); !errors.Is(err, boom) {
		t.Errorf("runTasks with a failing task: %v, want boom", err)
	}
	if slices.Contains(log, "start fields") || slices.Contains(log, "start b") {
		t.Errorf("log %q: want nothing started after the failure", log)
	}
}
