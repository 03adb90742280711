package projector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/projection"
)

// History retention (ESKV_HISTORY_RETENTION). The projector owns
// kv_history's writes, so it also removes what the retention no longer
// keeps: every RetentionInterval, in bounded statements
// (projection.Store.PruneHistory), never a key's newest version. Every
// projector of the group runs it; removing a row twice is a no-op.

// DefaultRetentionInterval is Config.RetentionInterval's default.
const DefaultRetentionInterval = 5 * time.Minute

// pruneBatch bounds one statement of a retention run: short
// transactions, so the projector's batches never wait long behind one.
var pruneBatch = projection.PruneBatch{Keys: 500, Rows: 5000}

// ParseRetention parses ESKV_HISTORY_RETENTION: "" (keep everything) or
// comma-separated age=<duration> (versions whose ts is older go) and
// versions=<n> (a key keeps its newest n versions), for example
// "age=720h,versions=100".
func ParseRetention(s string) (projection.Retention, error) {
	var r projection.Retention
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || seen[name] {
			return r, fmt.Errorf("history retention %q: want age=<duration> and/or versions=<n>, each once", s)
		}
		seen[name] = true
		switch name {
		case "age":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return r, fmt.Errorf("history retention: age %q is not a positive duration (720h)", val)
			}
			r.MaxAge = d
		case "versions":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 {
				return r, fmt.Errorf("history retention: versions %q is not a positive integer", val)
			}
			r.MaxVersions = n
		default:
			return r, fmt.Errorf("history retention: unknown setting %q (age, versions)", name)
		}
	}
	return r, nil
}

// PruneHistory runs the history retention once at now: it removes the
// kv_history rows Config.Retention no longer keeps and counts them in
// eskv_projector_history_deleted_total. Run calls it every
// RetentionInterval; nothing happens when the retention keeps everything.
func (p *Projector) PruneHistory(ctx context.Context, now time.Time) (int64, error) {
	if !p.cfg.Retention.Enabled() {
		return 0, nil
	}
	start := time.Now()
	n, err := p.store.PruneHistory(ctx, p.cfg.Retention, now, pruneBatch)
	p.m.historyDeleted.Add(float64(n))
	if err != nil {
		return n, fmt.Errorf("projector: history retention: %w", err)
	}
	p.m.retentionRun.SetToCurrentTime()
	p.m.retentionDuration.Set(time.Since(start).Seconds())
	return n, nil
}

// retain runs the history retention every RetentionInterval until ctx
// ends. A failed run is logged and retried at the next tick: retention
// is housekeeping, it never stops the projector.
func (p *Projector) retain(ctx context.Context) {
	if !p.cfg.Retention.Enabled() {
		return
	}
	t := time.NewTicker(p.cfg.RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := p.PruneHistory(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			p.log.Warn("history retention run failed; retrying at the next interval", "deleted", n, "err", err)
		case n > 0:
			p.log.Info("history retention removed old versions", "deleted", n,
				"max_age", p.cfg.Retention.MaxAge, "max_versions", p.cfg.Retention.MaxVersions)
		}
	}
}
