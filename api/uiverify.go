package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The auditor's periodic verification, as the health view shows it: the
// writer asks the auditor's GET /verification (Config.AuditorURL) within
// uiAuditorTimeout.

// uiAuditorTimeout bounds the auditor's answer: the health view never
// waits longer for it.
const uiAuditorTimeout = time.Second

// uiAuditorMaxBody bounds the auditor's answer read.
const uiAuditorMaxBody = 1 << 20

// uiVerifyStaleRuns is how many verification intervals may pass without
// a verification before audit_verification_stale fires.
const uiVerifyStaleRuns = 3

// What the writer knows of the auditor's verification (UIAudit.Verification).
const (
	// UIVerifyNotConfigured: no AuditorURL (ESKV_AUDITOR_URL).
	UIVerifyNotConfigured = "not_configured"
	// UIVerifyUnreachable: the auditor did not answer within 1 s, or
	// answered an error (UIAudit.VerificationError says which).
	UIVerifyUnreachable = "unreachable"
	// UIVerifyOff: the auditor runs no periodic verification
	// (ESKV_VERIFY_INTERVAL 0).
	UIVerifyOff = "off"
	// UIVerifyNotYet: none has completed since the auditor started.
	UIVerifyNotYet = "not_run_yet"
	// UIVerifyRecorded: UIAudit.LastVerification is the last one.
	UIVerifyRecorded = "recorded"
)

// UIVerification is the auditor's last periodic verification as its GET
// /verification answers it: when it ran and how long, its outcome (ok,
// discrepancy, error), what it covered and, for a discrepancy or an
// error, a short reason (never a value).
type UIVerification struct {
	Outcome         string                `json:"outcome"`
	StartedAt       time.Time             `json:"startedAt"`
	FinishedAt      time.Time             `json:"finishedAt"`
	DurationSeconds float64               `json:"durationSeconds"`
	Reason          string                `json:"reason,omitempty"`
	Rows            int64                 `json:"rows"`
	Events          int64                 `json:"events"`
	Keys            int64                 `json:"keys"`
	Pending         int64                 `json:"pending"`
	Conflicts       int64                 `json:"conflicts"`
	Discrepancies   int64                 `json:"discrepancies"`
	Partitions      []UIVerifiedPartition `json:"partitions,omitempty"`
}

// UIVerifiedPartition is what a verification covered of one partition
// of the changes topic: offsets From to To, the auditor's group having
// committed up to Committed (-1: nothing).
type UIVerifiedPartition struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Committed int64 `json:"committed"`
}

// auditorVerification is the auditor's GET /verification.
type auditorVerification struct {
	IntervalSeconds float64         `json:"intervalSeconds"`
	Since           time.Time       `json:"since"`
	Last            *UIVerification `json:"last"`
}

// uiVerify is what readCluster learnt of the verification.
type uiVerify struct {
	state string
	err   string
	got   auditorVerification
}

// checkAuditorURL refuses an AuditorURL that is no http(s) base URL.
func checkAuditorURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("api: AuditorURL %q: want the auditor's base URL, http(s)://host:port", s)
	}
	return nil
}

// readVerification asks the auditor for its last verification.
func (s *Server) readVerification(ctx context.Context) uiVerify {
	if s.cfg.AuditorURL == "" {
		return uiVerify{state: UIVerifyNotConfigured}
	}
	ctx, cancel := context.WithTimeout(ctx, uiAuditorTimeout)
	defer cancel()
	got, err := s.getVerification(ctx)
	switch {
	case err != nil:
		return uiVerify{state: UIVerifyUnreachable, err: err.Error()}
	case got.IntervalSeconds <= 0:
		return uiVerify{state: UIVerifyOff, got: got}
	case got.Last == nil:
		return uiVerify{state: UIVerifyNotYet, got: got}
	}
	return uiVerify{state: UIVerifyRecorded, got: got}
}

// getVerification fetches and checks the auditor's GET /verification;
// its errors are stable messages (no driver's text, which names hosts).
func (s *Server) getVerification(ctx context.Context) (auditorVerification, error) {
	var got auditorVerification
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.AuditorURL, "/")+"/verification", nil)
	if err != nil {
		return got, errors.New("the auditor URL makes no request")
	}
	if s.cfg.AuditorToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.AuditorToken)
	}
	resp, err := s.auditor.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return got, fmt.Errorf("no answer within %s", uiAuditorTimeout)
		}
		return got, errors.New("could not connect")
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return got, errors.New("answered 401: set ESKV_AUDITOR_TOKEN to the auditor's metrics token")
	case resp.StatusCode != http.StatusOK:
		return got, fmt.Errorf("answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, uiAuditorMaxBody)).Decode(&got); err != nil {
		return got, errors.New("answered no verification JSON")
	}
	if l := got.Last; l != nil && l.Outcome != "ok" && l.Outcome != "discrepancy" && l.Outcome != "error" {
		return got, fmt.Errorf("answered an unknown outcome %q", l.Outcome)
	}
	return got, nil
}

// interval is the auditor's verification interval.
func (v *uiVerify) interval() time.Duration {
	return time.Duration(v.got.IntervalSeconds * float64(time.Second))
}

// alerts are the alerts the verification raises at now:
// audit_verification_failed when the last outcome is discrepancy or
// error, audit_verification_stale when no verification completed in
// the last 3 intervals (counted from the auditor's start before the
// first).
func (v *uiVerify) alerts(now time.Time) []UIAlert {
	if v.state != UIVerifyRecorded && v.state != UIVerifyNotYet {
		return nil
	}
	var out []UIAlert
	last, since := v.got.Last, v.got.Since
	if last != nil {
		since = last.FinishedAt
		if last.Outcome != "ok" {
			out = append(out, UIAlert{Name: AlertAuditVerifyFailed, Message: fmt.Sprintf("the auditor's last verification (%s) ended %s: %s",
				last.FinishedAt.UTC().Format(time.RFC3339), last.Outcome, last.Reason)})
		}
	}
	if limit := uiVerifyStaleRuns * v.interval(); !since.IsZero() && now.Sub(since) > limit {
		what := "the last verification completed"
		if last == nil {
			what = "the auditor started, with no verification since,"
		}
		out = append(out, UIAlert{Name: AlertAuditVerifyStale, Message: fmt.Sprintf("%s %s ago, more than %d × the interval of %s",
			what, now.Sub(since).Round(time.Second), uiVerifyStaleRuns, v.interval())})
	}
	return out
}
