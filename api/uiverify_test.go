package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer"
)

// clusterWriter is a writer of two partitions, both its own, over
// brokers that answer: what the health view reads of a cluster.
type clusterWriter struct{ fakeWriter }

func (*clusterWriter) LogPositions(context.Context, string) writer.LogPositions {
	return writer.LogPositions{Ends: map[int32]int64{0: 4, 1: 2}, Projected: map[int32]int64{0: 4, 1: 2}, Audited: map[int32]int64{0: 4, 1: 2}}
}
func (*clusterWriter) Partitions() int32      { return 2 }
func (*clusterWriter) Owned() []int32         { return []int32{0, 1} }
func (*clusterWriter) BrokersAnswering() bool { return true }

// auditorToken is the metrics token of the test's auditors.
const auditorToken = "auditor-metrics-token-0123456789"

// fakeAuditor answers GET /verification with body (when the request
// bears auditorToken) after delay.
func fakeAuditor(t *testing.T, body string, delay time.Duration) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/verification" || r.Header.Get("Authorization") != "Bearer "+auditorToken {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// verifyHealth is GET /ui/api/health of a writer whose auditor is at
// auditorURL with token, and how long it took.
func verifyHealth(t *testing.T, store *projection.Store, auditorURL, tok string) (api.UIHealth, time.Duration) {
	t.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, UIKey: []byte("a status page key of 32 bytes at least"), AuditorURL: auditorURL, AuditorToken: tok},
		&clusterWriter{}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	ck := uiClient{t}.login(h)
	start := time.Now()
	rec := uiClient{t}.do(h, "GET", "/ui/api/health", ck)
	took := time.Since(start)
	var got api.UIHealth
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil {
		t.Fatalf("GET /ui/api/health: %d %s", rec.Code, rec.Body)
	}
	return got, took
}

func alertNames(as []api.UIAlert) string {
	var out []string
	for _, a := range as {
		out = append(out, a.Name+": "+a.Message)
	}
	return strings.Join(out, "\n")
}

// TestUIHealthVerification: the health view shows what the auditor's
// GET /verification answers: a last verification that ended in error
// (its reason, and alert audit_verification_failed); one that passed
// but long ago (audit_verification_stale, past 3 intervals); an auditor
// not configured, unreachable, refusing the token, or hanging (the view
// answers within about 1 s all the same), each said as such and raising
// no verification alert.
func TestUIHealthVerification(t *testing.T) {
	t.Parallel()
	store := projection.New(testenv.MustPostgres(t))
	now := time.Now().UTC()
	run := func(outcome, reason string, ago time.Duration) string {
		return fmt.Sprintf(`{"intervalSeconds":60,"since":%q,"last":{"outcome":%q,"startedAt":%q,"finishedAt":%q,"durationSeconds":0.2,"reason":%q,`+
			`"rows":15,"events":15,"keys":5,"pending":0,"conflicts":0,"discrepancies":0,"partitions":[{"partition":0,"from":0,"to":9,"committed":9}]}}`,
			now.Add(-time.Hour).Format(time.RFC3339Nano), outcome, now.Add(-ago).Format(time.RFC3339Nano), now.Add(-ago).Format(time.RFC3339Nano), reason)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	cases := []struct {
		name, url, token, state, errPart, alerts string
	}{
		{"Error", fakeAuditor(t, run("error", "could not run: read kv.changes/0 failed", 30*time.Second), 0), auditorToken, api.UIVerifyRecorded, "", api.AlertAuditVerifyFailed},
		{"Stale", fakeAuditor(t, run("ok", "", 10*time.Minute), 0), auditorToken, api.UIVerifyRecorded, "", api.AlertAuditVerifyStale},
		{"OK", fakeAuditor(t, run("ok", "", 30*time.Second), 0), auditorToken, api.UIVerifyRecorded, "", ""},
		{"NotConfigured", "", "", api.UIVerifyNotConfigured, "", ""},
		{"Unreachable", closed.URL, auditorToken, api.UIVerifyUnreachable, "could not connect", ""},
		{"WrongToken", fakeAuditor(t, run("ok", "", 0), 0), "wrong", api.UIVerifyUnreachable, "ESKV_AUDITOR_TOKEN", ""},
		{"Hanging", fakeAuditor(t, run("ok", "", 0), 10*time.Second), auditorToken, api.UIVerifyUnreachable, "no answer within 1s", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, took := verifyHealth(t, store, tc.url, tc.token)
			a := h.Audit
			if a.Verification != tc.state || !strings.Contains(a.VerificationError, tc.errPart) || (tc.errPart == "") != (a.VerificationError == "") {
				t.Fatalf("audit %+v, want verification %s (error with %q)", a, tc.state, tc.errPart)
			}
			var names []string
			for _, al := range h.Alerts {
				names = append(names, al.Name)
			}
			if strings.Join(names, ",") != tc.alerts {
				t.Fatalf("alerts:\n%s\nwant %q", alertNames(h.Alerts), tc.alerts)
			}
			if took > 1500*time.Millisecond {
				t.Fatalf("the health view took %s, want about 1 s at most", took)
			}
			if tc.state == api.UIVerifyRecorded && (a.LastVerification == nil || a.VerifyIntervalSeconds != 60 || a.LastVerification.Rows != 15 || len(a.LastVerification.Partitions) != 1) {
				t.Fatalf("last verification %+v, want the auditor's", a.LastVerification)
			}
			t.Logf("%s in %s; %s", a.Verification, took.Round(time.Millisecond), alertNames(h.Alerts))
		})
	}
}
