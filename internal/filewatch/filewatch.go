// Package filewatch reloads what a service reads from files (its tokens,
// its TLS certificate and key) when their contents change or a signal
// (SIGHUP) asks.
package filewatch

import (
	"context"
	"os"
	"time"
)

// Run calls reload("signal") on each value of signals and, every poll,
// reload("changed") when changed reports that the files' contents differ
// from those last loaded (or last refused: a content that failed to load
// is not tried again until it changes or a signal asks), until ctx ends.
// changed and reload run on Run's goroutine only.
func Run(ctx context.Context, poll time.Duration, signals <-chan os.Signal, changed func() bool, reload func(why string)) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-signals:
			reload("signal")
		case <-t.C:
			if changed() {
				reload("changed")
			}
		}
	}
}
