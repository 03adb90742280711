package filewatch_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/internal/filewatch"
)

// TestRun: a signal reloads at once; a poll reloads only when the
// contents changed; Run returns when its context ends.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		signals := make(chan os.Signal, 1)
		var changed atomic.Bool
		var mu sync.Mutex
		var got []string
		reloads := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(got) }
		done := make(chan error)
		go func() {
			done <- filewatch.Run(ctx, time.Second, signals, changed.Load, func(why string) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, why)
				changed.Store(false)
			})
		}()
		time.Sleep(2500 * time.Millisecond) // two polls, nothing changed
		synctest.Wait()
		if r := reloads(); len(r) != 0 {
			t.Fatalf("reloads without a change: %v", r)
		}
		signals <- syscall.SIGHUP
		synctest.Wait()
		changed.Store(true)
		time.Sleep(time.Second)
		synctest.Wait()
		if want := []string{"signal", "changed"}; !slices.Equal(reloads(), want) {
			t.Fatalf("reloads %v, want %v", reloads(), want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
