package changelog

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// Logger bridges franz-go's logs into log at WARN and above (or at debug
// when log is at debug): the client logs every transaction end at INFO,
// which would drown the service's own per-write lines.
func Logger(log *slog.Logger) kgo.Logger {
	min := slog.LevelWarn
	if log.Enabled(context.Background(), slog.LevelDebug) {
		min = slog.LevelDebug
	}
	return kslog.New(slog.New(minLevel{Handler: log.Handler(), min: min}).With("component", "kafka-client"))
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
