package audit

import (
	"context"
	"time"
)

// Outcomes of a periodic verification: the outcome label of
// eskv_auditor_verify_runs_total.
const (
	verifyOK          = "ok"
	verifyDiscrepancy = "discrepancy"
	verifyError       = "error"
)

// verifyLoop runs Verify over the whole trail every
// Config.VerifyInterval until ctx ends, so a trail altered in ClickHouse
// (or rows the auditor lost) shows in the metrics and can page someone,
// not only when an operator runs auditor verify. Events the group has
// not committed yet count as pending, never as discrepancies.
func (a *Auditor) verifyLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.VerifyInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.verifyOnce(ctx)
	}
}

// verifyOnce runs one verification and records its outcome.
func (a *Auditor) verifyOnce(ctx context.Context) {
	conn := a.cfg.Kafka
	conn.Metrics = nil // a client per run: its metrics would come and go
	start := time.Now()
	rep, err := Verify(ctx, a.store, a.keys, VerifyConfig{Brokers: a.cfg.Brokers, Kafka: conn, Topics: a.cfg.Topics, Group: a.cfg.Group})
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		a.m.verifyRuns.WithLabelValues(verifyError).Inc()
		a.log.Warn("periodic verification could not run", "err", err)
		return
	case len(rep.Discrepancies) > 0:
		a.m.verifyRuns.WithLabelValues(verifyDiscrepancy).Inc()
		first := rep.Discrepancies[0]
		// The key and the problem only: a discrepancy's detail names
		// hashes, which stay out of the log like values.
		a.log.Error("periodic verification found discrepancies in the audit trail (run auditor verify for the report)",
			"discrepancies", len(rep.Discrepancies), "first_key", first.Key, "first_version", first.Version, "first_problem", first.Problem)
	default:
		a.m.verifyRuns.WithLabelValues(verifyOK).Inc()
		a.log.Info("periodic verification passed", "rows", rep.Rows, "keys", rep.Keys, "pending", rep.Pending, "took", time.Since(start))
	}
	a.m.verifyDiscrepancies.Set(float64(len(rep.Discrepancies)))
	a.m.verifyLast.SetToCurrentTime()
}
