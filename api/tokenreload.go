package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/eskv/eskv/internal/filewatch"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTokensPoll is how often a TokenReloader reads the tokens file to
// see whether it changed.
const DefaultTokensPoll = 5 * time.Second

// TokenReloader keeps a Tokens table in step with a tokens file: it
// re-reads the file on demand (SIGHUP) and when its content changes, and
// replaces the table atomically. A file that does not load (unreadable,
// not JSON, an entry NewTokens refuses) changes nothing: the tokens
// loaded last stay in force, the reason is logged and
// eskv_tokens_reload_failures_total counts it.
//
// Changes are found by reading the file and comparing its SHA-256 every
// poll interval rather than by inotify: the file is small, a Kubernetes
// Secret volume replaces it through a symlink swap that watches on the
// file itself miss, and a poll needs no extra dependency. The cost is a
// delay of up to one interval; SIGHUP reloads at once.
type TokenReloader struct {
	path   string
	extra  []TokenConfig
	tokens *Tokens
	log    *slog.Logger
	sum    [32]byte // of the content loaded last

	lastLoad prometheus.Gauge
	loaded   prometheus.Gauge
	failures prometheus.Counter
}

// NewTokenReloader loads path (plus extra, tokens that are not in the
// file such as the dev token) into a Tokens table, and registers its
// metrics on reg (when not nil). A file that does not load is an error:
// the service must not start without its tokens.
func NewTokenReloader(path string, extra []TokenConfig, reg prometheus.Registerer, log *slog.Logger) (*TokenReloader, error) {
	r := &TokenReloader{path: path, extra: extra, log: log,
		lastLoad: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_tokens_last_load_timestamp_seconds", Help: "When the tokens file was last loaded successfully (Unix time).",
		}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_tokens_loaded", Help: "Bearer tokens in force (the tokens file's and the dev token).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_tokens_reload_failures_total", Help: "Reloads of the tokens file that failed; the tokens loaded before stay in force (the log says why).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{r.lastLoad, r.loaded, r.failures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	t, sum, err := r.load()
	if err != nil {
		return nil, err
	}
	r.tokens, r.sum = t, sum
	r.loaded.Set(float64(t.Len()))
	r.lastLoad.SetToCurrentTime()
	return r, nil
}

// Tokens returns the table the reloader keeps up to date.
func (r *TokenReloader) Tokens() *Tokens { return r.tokens }

// load reads and checks the file; it returns the table and the content's
// SHA-256 (also when the content is refused; zero when unreadable).
func (r *TokenReloader) load() (*Tokens, [32]byte, error) {
	b, err := os.ReadFile(r.path)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("tokens file: %w", err)
	}
	sum := sha256.Sum256(b)
	cfgs, err := ParseTokens(b)
	if err != nil {
		return nil, sum, fmt.Errorf("tokens file %s: %w", r.path, err)
	}
	t, err := NewTokens(append(slices.Clip(cfgs), r.extra...))
	if err != nil {
		return nil, sum, fmt.Errorf("tokens file %s: %w", r.path, err)
	}
	return t, sum, nil
}

// contentSum is the SHA-256 of the file now, zero when unreadable: what
// load would return.
func (r *TokenReloader) contentSum() [32]byte {
	b, err := os.ReadFile(r.path)
	if err != nil {
		return [32]byte{}
	}
	return sha256.Sum256(b)
}

// Run reloads the file on each value of reload (SIGHUP) and, every poll
// (DefaultTokensPoll when 0), when its content changed, until ctx ends.
// A content that failed to load is not tried again until it changes or a
// signal asks. Reload is called from Run's goroutine only.
func (r *TokenReloader) Run(ctx context.Context, poll time.Duration, reload <-chan os.Signal) error {
	if poll <= 0 {
		poll = DefaultTokensPoll
	}
	changed := func() bool { return r.contentSum() != r.sum }
	return filewatch.Run(ctx, poll, reload, changed, func(why string) { r.Reload(why) })
}

// Reload loads the file and replaces the tokens, or keeps them and logs
// why not. why says what asked for it (signal, changed). It reports
// whether the new tokens are in force.
func (r *TokenReloader) Reload(why string) bool {
	t, sum, err := r.load()
	if err != nil {
		r.failures.Inc()
		// The error names the file and the entry at fault, never a token.
		r.log.Error("tokens file not reloaded: the tokens loaded before stay in force", "trigger", why, "err", err)
		r.sum = sum // a bad file is reported once, not at every poll
		return false
	}
	r.tokens.Replace(t)
	r.sum = sum
	r.loaded.Set(float64(t.Len()))
	r.lastLoad.SetToCurrentTime()
	r.log.Info("tokens file reloaded", "trigger", why, "path", r.path, "tokens", t.Len())
	return true
}
