package brokerprobe

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestProbe: the brokers count as answering before the probe starts and
// while they answer, stop counting 1.5 s after their last answer, and
// count again from their next one.
func TestProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Probe
		if !b.Answering(time.Now()) {
			t.Fatal("not answering before the probe started")
		}
		var down atomic.Bool
		ping := func(context.Context) error {
			if down.Load() {
				return errors.New("no broker answers")
			}
			return nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.Run(ctx, ping, slog.New(slog.DiscardHandler))
		}()
		time.Sleep(5 * time.Second)
		if !b.Answering(time.Now()) {
			t.Fatal("not answering while the brokers answer")
		}
		down.Store(true)
		time.Sleep(time.Second)
		if !b.Answering(time.Now()) {
			t.Fatal("not answering within 1.5 s of the last answer")
		}
		time.Sleep(time.Second)
		if b.Answering(time.Now()) {
			t.Fatal("answering 2 s after the last answer")
		}
		down.Store(false)
		time.Sleep(time.Second)
		if !b.Answering(time.Now()) {
			t.Fatal("not answering after the brokers answered again")
		}
		cancel()
		<-done
	})
}
