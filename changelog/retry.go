package changelog

import (
	"context"
	"time"

	"github.com/sethvargo/go-retry"
)

// Retry is the one retry policy of the Kafka side and its sinks: waits
// grow exponentially from Base up to Cap, for at most Max in all (zero:
// until the context ends).
type Retry struct {
	Base, Cap, Max time.Duration
	// Retriable says which errors are tried again; nil means every one.
	// An error once the context ended never is.
	Retriable func(error) bool
	// OnRetry, when set, is called with the error and the wait before
	// each wait (to log or count it).
	OnRetry func(err error, wait time.Duration)
}

// Do calls f until it returns nil or an error that is not retried, Max
// has passed (then it returns f's last error) or ctx ends (then ctx's
// cause).
func (r Retry) Do(ctx context.Context, f func(context.Context) error) error {
	var last error
	b := retry.WithCappedDuration(r.Cap, retry.NewExponential(r.Base))
	if r.Max > 0 {
		b = retry.WithMaxDuration(r.Max, b)
	}
	if r.OnRetry != nil {
		next := b
		b = retry.BackoffFunc(func() (time.Duration, bool) {
			wait, stop := next.Next()
			if !stop {
				r.OnRetry(last, wait)
			}
			return wait, stop
		})
	}
	return retry.Do(ctx, b, func(ctx context.Context) error {
		err := f(ctx)
		if err == nil || ctx.Err() != nil || (r.Retriable != nil && !r.Retriable(err)) {
			return err
		}
		last = err
		return retry.RetryableError(err)
	})
}
