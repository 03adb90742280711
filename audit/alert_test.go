package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
)

// traffic returns, for one tenant and each minute start, applied writes
// and conflicts (one key per write) of purpose lock.
func traffic(tenant string, minutes []time.Time, applied, conflicts []int) history {
	var h history
	n := 0
	for i, m := range minutes {
		ts := m.Add(10 * time.Second)
		for range applied[i] {
			key := fmt.Sprintf("tenant/%s/project/p/k%d", tenant, n)
			n++
			h.events = append(h.events, contract.Event{
				SchemaVersion: 1, Key: key, Scope: "tenant/" + tenant + "/project/p", Version: 1,
				Kind: contract.KindPut, Op: contract.OpCreate, Before: json.RawMessage("null"), After: json.RawMessage(`{"held":true}`),
				Semantics: contract.Semantics{Purpose: "lock"}, Principal: "w", TS: ts, CreatedAt: ts,
			})
		}
		for j := range conflicts[i] {
			h.conflicts = append(h.conflicts, decide.Conflict{
				SchemaVersion: 1, ID: fmt.Sprintf("%s-%d-%d", tenant, i, j), Key: fmt.Sprintf("tenant/%s/project/p/k0", tenant),
				Scope: "tenant/" + tenant + "/project/p", Op: contract.OpCreate, ExpectedVersion: 0, CurrentVersion: 1,
				Attempted: json.RawMessage(`{"held":true}`), Current: json.RawMessage(`{"held":true}`),
				Semantics: contract.Semantics{Purpose: "lock"}, Principal: "w2", TS: ts, Reason: "version_mismatch",
			})
		}
	}
	return h
}

// denied returns n denied writes (reason forbidden, no value) of one key
// of tenant at each minute start.
func denied(tenant string, minutes []time.Time, n int) []decide.Conflict {
	var out []decide.Conflict
	for i, m := range minutes {
		for j := range n {
			out = append(out, decide.Conflict{
				SchemaVersion: 1, ID: fmt.Sprintf("%s-denied-%d-%d", tenant, i, j), Key: fmt.Sprintf("tenant/%s/project/p/denied", tenant),
				Scope: "tenant/" + tenant + "/project/p", Op: contract.OpPut, ExpectedVersion: -1,
				Attempted: json.RawMessage("null"), Current: json.RawMessage("null"),
				Semantics: contract.Semantics{Purpose: "lock"}, Principal: "intruder", TS: m.Add(20 * time.Second), Reason: decide.ReasonForbidden,
			})
		}
	}
	return out
}

// TestConflictRateAlert: a rate above 10% in every minute of the window
// fires (gauge, WARN log, alerts row); 5% does not, nor 50% in only one
// minute of the window; the alert resolves when the window moves on.
// Denied writes (reason forbidden) are not conflicts: 30 a minute keep
// tenant cool at 5%, off the top conflicting keys, and stored without
// value hashes.
func TestConflictRateAlert(t *testing.T) {
	b := testenv.MustBroker(t, 4)
	s, ch := mustStore(t)
	now := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour).Add(30 * time.Second)
	m1, m2 := now.Truncate(time.Minute).Add(-2*time.Minute), now.Truncate(time.Minute).Add(-time.Minute)
	var h history
	for _, g := range []history{
		traffic("hot", []time.Time{m1, m2}, []int{8, 8}, []int{2, 2}),         // 20%, 20%
		traffic("cool", []time.Time{m1, m2}, []int{19, 19}, []int{1, 1}),      // 5%, 5%
		traffic("burst", []time.Time{m1, m2}, []int{10, 5}, []int{0, 5}),      // 0%, 50%
		traffic("older", []time.Time{m1.Add(-time.Hour)}, []int{1}, []int{9}), // outside the window
	} {
		h.events = append(h.events, g.events...)
		h.conflicts = append(h.conflicts, g.conflicts...)
	}
	h.conflicts = append(h.conflicts, denied("cool", []time.Time{m1, m2}, 30)...)
	produce(t, b, h, false)

	t.Run("ConflictRatesPerMinute", func(t *testing.T) {
		a := runAuditor(t, b, s, audit.Config{Group: "rates"}, nil, nil)
		waitCaughtUp(t, b, a)
		rates, err := s.ConflictRates(context.Background(), audit.RateQuery{From: m1, To: m2.Add(time.Minute), Bucket: audit.Minute, Tenant: "hot"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rates) != 2 || rates[0].Rate != 0.2 || rates[1].Rate != 0.2 || rates[0].Conflicts != 2 || rates[0].Applied != 8 || rates[0].Purpose != "lock" {
			t.Fatalf("rates %+v", rates)
		}
		hour, err := s.ConflictRates(context.Background(), audit.RateQuery{From: m1.Add(-2 * time.Hour), To: now.Add(time.Hour), Bucket: audit.Total})
		if err != nil {
			t.Fatal(err)
		}
		if len(hour) != 4 {
			t.Fatalf("total rates %+v", hour)
		}
		top, err := s.TopConflictingKeys(context.Background(), m1, now, "", 2)
		if err != nil || len(top) != 2 || top[0].Key != "tenant/burst/project/p/k0" || top[0].Conflicts != 5 || top[1].Conflicts != 4 {
			t.Fatalf("top keys %+v, %v", top, err)
		}
		checkDenials(t, ch)
	})

	var clock atomic.Int64
	clock.Store(now.UnixNano())
	reg := prometheus.NewRegistry()
	var logs testenv.Buffer
	a := runAuditor(t, b, s, audit.Config{Group: "alerts", Linger: 10 * time.Millisecond,
		Alerts: audit.AlertConfig{Window: 2 * time.Minute, Threshold: 0.10, MinAttempts: 10, Interval: 20 * time.Millisecond,
			Instance: "test", Now: func() time.Time { return time.Unix(0, clock.Load()) }}},
		slog.New(slog.NewJSONHandler(&logs, nil)), reg)
	waitCaughtUp(t, b, a)

	testenv.WaitForNil(t, 30*time.Second, "an alert for tenant hot", func() error {
		if gaugeValue(t, reg, "eskv_auditor_conflict_rate_alert", "hot") != 1 {
			return fmt.Errorf("no alert for tenant hot; logs:\n%s", logs.String())
		}
		return nil
	})
	alerts, err := s.Alerts(context.Background(), now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(alerts) != 1 || alerts[0].Group.Tenant != "hot" || alerts[0].State != "firing" || alerts[0].Rate != 0.2 || alerts[0].WindowSeconds != 120 {
		t.Fatalf("alerts %+v", alerts)
	}
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"conflict rate above the threshold in every minute of the window"`) ||
		!strings.Contains(logs.String(), `"tenant":"hot"`) {
		t.Fatalf("no WARN line for tenant hot:\n%s", logs.String())
	}
	if r := gaugeValue(t, reg, "eskv_auditor_conflict_rate", "cool"); r != 0.05 {
		t.Fatalf("rate gauge of tenant cool %v, want 0.05", r)
	}
	for _, tenant := range []string{"cool", "burst"} {
		if strings.Contains(logs.String(), `"tenant":"`+tenant+`"`) {
			t.Fatalf("tenant %s alerted:\n%s", tenant, logs.String())
		}
	}

	t.Run("Resolves", func(t *testing.T) {
		clock.Store(now.Add(10 * time.Minute).UnixNano())
		testenv.WaitForNil(t, 30*time.Second, "the alert to resolve", func() error {
			alerts, err := s.Alerts(context.Background(), now.Add(-time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if len(alerts) == 2 && alerts[1].State == "resolved" {
				return nil
			}
			return fmt.Errorf("alerts %+v", alerts)
		})
	})
}

// checkDenials: the 60 denied writes of tenant cool are stored without
// value hashes, listed by denied_writes and left out of the conflict-rate
// and top-keys views.
func checkDenials(t *testing.T, ch *testenv.ClickHouse) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []struct {
		sql  string
		want uint64
	}{
		{"SELECT count() FROM audit_conflicts FINAL WHERE reason = 'forbidden' AND principal = 'intruder' AND attempted_hash = '' AND current_hash = ''", 60},
		{"SELECT count() FROM denied_writes WHERE tenant = 'cool' AND principal = 'intruder' AND op = 'put'", 60},
		{"SELECT sum(conflicts) FROM conflict_rate_minute WHERE tenant = 'cool'", 2},
		{"SELECT sum(conflicts) FROM conflict_rate_hour WHERE tenant = 'cool'", 2},
		{"SELECT count() FROM top_conflicting_keys WHERE key = 'tenant/cool/project/p/denied'", 0},
	} {
		var n uint64
		if err := ch.Conn.QueryRow(ctx, q.sql).Scan(&n); err != nil || n != q.want {
			t.Errorf("%s: %d, want %d (%v)", q.sql, n, q.want, err)
		}
	}
}

// gaugeValue returns the value of a gauge vector's series for tenant, or
// -1 when there is none.
func gaugeValue(tb testing.TB, reg *prometheus.Registry, name, tenant string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == tenant {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
