package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Outcomes of a periodic verification: the outcome label of
// eskv_auditor_verify_runs_total and Verification.Outcome.
const (
	VerifyOK          = "ok"
	VerifyDiscrepancy = "discrepancy"
	VerifyError       = "error"
)

// Verification is the result of one periodic verification, as GET
// /verification of the auditor's health server answers it: when it ran,
// how long it took, its outcome, what it covered, and for an error or a
// discrepancy a short reason (the problem and the key, never a value, a
// hash or a driver's error).
type Verification struct {
	Outcome         string    `json:"outcome"`
	StartedAt       time.Time `json:"startedAt"`
	FinishedAt      time.Time `json:"finishedAt"`
	DurationSeconds float64   `json:"durationSeconds"`
	Reason          string    `json:"reason,omitempty"`
	// What the run checked (zero after an error).
	Rows          int              `json:"rows"`
	Events        int              `json:"events"`
	Keys          int              `json:"keys"`
	Pending       int              `json:"pending"`
	Conflicts     int              `json:"conflicts"`
	Discrepancies int              `json:"discrepancies"`
	Partitions    []PartitionRange `json:"partitions,omitempty"`
}

// VerificationStatus is GET /verification: the verification interval
// (0: periodic verification is off), when this auditor started, and its
// last periodic verification (absent before the first completes).
type VerificationStatus struct {
	IntervalSeconds float64       `json:"intervalSeconds"`
	Since           time.Time     `json:"since"`
	Last            *Verification `json:"last,omitempty"`
}

// Verification returns the interval and the last periodic verification.
func (a *Auditor) Verification() VerificationStatus {
	a.verifyMu.Lock()
	defer a.verifyMu.Unlock()
	st := VerificationStatus{IntervalSeconds: a.cfg.VerifyInterval.Seconds(), Since: a.started}
	if a.lastVerify != nil {
		v := *a.lastVerify
		st.Last = &v
	}
	return st
}

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
	if ctx.Err() != nil {
		return
	}
	v := verificationOf(rep, err, start, time.Now())
	a.m.verifyRuns.WithLabelValues(v.Outcome).Inc()
	switch v.Outcome {
	case VerifyError:
		a.log.Warn("periodic verification could not run", "err", err)
	case VerifyDiscrepancy:
		first := rep.Discrepancies[0]
		// The key and the problem only: a discrepancy's detail names
		// hashes, which stay out of the log like values.
		a.log.Error("periodic verification found discrepancies in the audit trail (run auditor verify for the report)",
			"discrepancies", len(rep.Discrepancies), "first_key", first.Key, "first_version", first.Version, "first_problem", first.Problem)
	default:
		a.log.Info("periodic verification passed", "rows", rep.Rows, "keys", rep.Keys, "pending", rep.Pending, "took", time.Since(start))
	}
	a.verifyMu.Lock()
	a.lastVerify = &v
	a.verifyMu.Unlock()
	if err != nil {
		return
	}
	a.m.verifyDiscrepancies.Set(float64(len(rep.Discrepancies)))
	a.m.verifyLast.SetToCurrentTime()
}

// verificationOf is the record of a run that started at start and ended
// at end with rep or err.
func verificationOf(rep *VerifyReport, err error, start, end time.Time) Verification {
	v := Verification{Outcome: VerifyOK, StartedAt: start.UTC(), FinishedAt: end.UTC(), DurationSeconds: end.Sub(start).Seconds()}
	if err != nil {
		v.Outcome, v.Reason = VerifyError, errorReason(err)
		return v
	}
	v.Rows, v.Events, v.Keys, v.Pending, v.Conflicts = rep.Rows, rep.Events, rep.Keys, rep.Pending, rep.Conflicts
	v.Discrepancies, v.Partitions = len(rep.Discrepancies), rep.Partitions
	if n := len(rep.Discrepancies); n > 0 {
		first := rep.Discrepancies[0]
		v.Outcome = VerifyDiscrepancy
		v.Reason = fmt.Sprintf("%d discrepancies; the first: %s at version %d of key %s", n, first.Problem, first.Version, first.Key)
		if first.ConflictID != "" {
			v.Reason = fmt.Sprintf("%d discrepancies; the first: %s of a conflict record of key %s", n, first.Problem, first.Key)
		}
	}
	return v
}

// errorReason is what a verification's error says on GET /verification:
// the step that failed (Verify's errors start "verify: <step>: "), never
// the driver's text after it, which may name hosts and users.
func errorReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "could not run: timed out (the auditor's log has the error)"
	}
	step := "reading the trail or the log"
	if rest, ok := strings.CutPrefix(err.Error(), "verify: "); ok {
		if s, _, ok := strings.Cut(rest, ": "); ok {
			step = s
		}
	}
	return "could not run: " + step + " failed (the auditor's log has the error)"
}
