package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// Defaults of AlertConfig.
const (
	DefaultAlertWindow      = 5 * time.Minute
	DefaultAlertThreshold   = 0.10
	DefaultAlertMinAttempts = 10
	DefaultAlertInterval    = 30 * time.Second
)

// AlertConfig configures conflict-rate alerts. A (tenant, project,
// purpose) fires when, in every complete minute of the Window that ends at
// the last minute boundary, it had writes and its conflict rate was above
// Threshold, with at least MinAttempts attempts (applied writes plus
// conflicts) over the Window. It resolves at the first evaluation where
// that no longer holds.
type AlertConfig struct {
	// Window is whole minutes (rounded up); zero disables alerts.
	Window      time.Duration
	Threshold   float64
	MinAttempts uint64
	// Interval is the time between evaluations.
	Interval time.Duration
	// Instance names this auditor in the alerts table.
	Instance string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c *AlertConfig) fill() error {
	if c.Window == 0 {
		return nil
	}
	if c.Window < 0 {
		return errors.New("alert window must not be negative")
	}
	c.Window = (c.Window + time.Minute - 1).Truncate(time.Minute)
	if c.Threshold <= 0 || c.Threshold >= 1 {
		return fmt.Errorf("alert threshold must be between 0 and 1, got %v", c.Threshold)
	}
	if c.Interval <= 0 {
		c.Interval = DefaultAlertInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// RateGroup is a tenant, project and purpose: the unit of conflict rates.
type RateGroup struct {
	Tenant, Project, Purpose string
}

// Alert is one row of audit_alerts.
type Alert struct {
	At        time.Time     `json:"at"`
	Group     RateGroup     `json:"group"`
	State     string        `json:"state"` // firing | resolved
	Rate      float64       `json:"rate"`
	Conflicts uint64        `json:"conflicts"`
	Applied   uint64        `json:"applied"`
	Window    time.Duration `json:"-"`
	// WindowSeconds is Window in seconds, as stored.
	WindowSeconds uint32  `json:"windowSeconds"`
	Threshold     float64 `json:"threshold"`
	Auditor       string  `json:"auditor"`
}

type alerter struct {
	cfg    AlertConfig
	store  *Store
	log    *slog.Logger
	m      *metrics
	firing map[RateGroup]bool
	loaded bool
	gauges map[RateGroup]bool
}

func newAlerter(cfg AlertConfig, store *Store, log *slog.Logger, m *metrics) *alerter {
	return &alerter{cfg: cfg, store: store, log: log, m: m, firing: map[RateGroup]bool{}, gauges: map[RateGroup]bool{}}
}

func (al *alerter) run(ctx context.Context) {
	t := time.NewTicker(al.cfg.Interval)
	defer t.Stop()
	for {
		if err := al.evaluate(ctx); err != nil && ctx.Err() == nil {
			al.log.Warn("evaluating conflict-rate alerts failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// evaluate computes the window's per-minute rates, raises and resolves
// alerts, and sets the gauges.
func (al *alerter) evaluate(ctx context.Context) error {
	if !al.loaded {
		firing, err := al.store.FiringAlerts(ctx)
		if err != nil {
			return err
		}
		for _, g := range firing {
			al.firing[g] = true
		}
		al.loaded = true
	}
	now := al.cfg.Now().UTC()
	end := now.Truncate(time.Minute)
	rates, err := al.store.ConflictRates(ctx, RateQuery{From: end.Add(-al.cfg.Window), To: end, Bucket: Minute})
	if err != nil {
		return err
	}
	groups := al.windows(rates)
	inserts := al.transitions(groups, now)
	// Gauges of groups gone quiet are removed, not left at their last value.
	for g := range al.gauges {
		if _, ok := groups[g]; !ok {
			al.m.conflictRate.DeleteLabelValues(g.Tenant, g.Project, g.Purpose)
			delete(al.gauges, g)
		}
	}
	if err := al.store.InsertAlerts(ctx, inserts); err != nil {
		return err // the states stay as they were: the next evaluation retries
	}
	for _, a := range inserts {
		if a.State == "firing" {
			al.m.alertsFired.Inc()
			al.firing[a.Group] = true
			al.m.alert.WithLabelValues(a.Group.Tenant, a.Group.Project, a.Group.Purpose).Set(1)
		} else {
			delete(al.firing, a.Group)
			al.m.alert.DeleteLabelValues(a.Group.Tenant, a.Group.Project, a.Group.Purpose)
		}
	}
	for g := range al.firing {
		al.m.alert.WithLabelValues(g.Tenant, g.Project, g.Purpose).Set(1)
	}
	return nil
}

// window is a group's traffic in the alert window.
type window struct {
	applied, conflicts uint64
	hot                int // minutes above the threshold
}

// windows sums the per-minute rates by group.
func (al *alerter) windows(rates []Rate) map[RateGroup]*window {
	groups := map[RateGroup]*window{}
	for _, r := range rates {
		g := RateGroup{r.Tenant, r.Project, r.Purpose}
		w := groups[g]
		if w == nil {
			w = &window{}
			groups[g] = w
		}
		w.applied += r.Applied
		w.conflicts += r.Conflicts
		if r.Applied+r.Conflicts > 0 && r.Rate > al.cfg.Threshold {
			w.hot++
		}
	}
	return groups
}

// transitions sets each group's rate gauge and returns the alerts that
// fire or resolve at now: a group fires when every minute of the window
// was above the threshold, with enough attempts.
func (al *alerter) transitions(groups map[RateGroup]*window, now time.Time) []Alert {
	minutes := int(al.cfg.Window / time.Minute)
	var inserts []Alert
	for g, w := range groups {
		rate := float64(w.conflicts) / float64(w.applied+w.conflicts)
		al.m.conflictRate.WithLabelValues(g.Tenant, g.Project, g.Purpose).Set(rate)
		al.gauges[g] = true
		hot := w.hot == minutes && w.applied+w.conflicts >= al.cfg.MinAttempts
		a := Alert{At: now, Group: g, Rate: rate, Conflicts: w.conflicts, Applied: w.applied,
			Window: al.cfg.Window, Threshold: al.cfg.Threshold, Auditor: al.cfg.Instance}
		switch {
		case hot && !al.firing[g]:
			a.State = "firing"
			inserts = append(inserts, a)
			al.log.Warn("conflict rate above the threshold in every minute of the window",
				"tenant", g.Tenant, "project", g.Project, "purpose", g.Purpose, "rate", rate,
				"conflicts", w.conflicts, "applied", w.applied, "window", al.cfg.Window, "threshold", al.cfg.Threshold)
		case !hot && al.firing[g]:
			a.State = "resolved"
			inserts = append(inserts, a)
			al.log.Info("conflict-rate alert resolved", "tenant", g.Tenant, "project", g.Project, "purpose", g.Purpose, "rate", rate)
		}
	}
	// Firing groups without any traffic in the window resolve too.
	for _, g := range slices.Collect(maps.Keys(al.firing)) {
		if _, ok := groups[g]; !ok && al.firing[g] {
			inserts = append(inserts, Alert{At: now, Group: g, State: "resolved", Window: al.cfg.Window,
				Threshold: al.cfg.Threshold, Auditor: al.cfg.Instance})
			al.log.Info("conflict-rate alert resolved (no traffic in the window)", "tenant", g.Tenant, "project", g.Project, "purpose", g.Purpose)
		}
	}
	return inserts
}

// InsertAlerts appends alert rows to audit_alerts.
func (s *Store) InsertAlerts(ctx context.Context, alerts []Alert) error {
	if len(alerts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO audit_alerts (at, tenant, project, purpose, state, rate, conflicts, applied, window_seconds, threshold, auditor)")
	if err != nil {
		return unavailable("prepare insert into audit_alerts", err)
	}
	defer b.Abort()
	for _, a := range alerts {
		if err := b.Append(a.At.UTC().Truncate(time.Second), a.Group.Tenant, a.Group.Project, a.Group.Purpose, a.State,
			a.Rate, a.Conflicts, a.Applied, uint32(a.Window/time.Second), a.Threshold, a.Auditor); err != nil {
			return fmt.Errorf("insert into audit_alerts: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return unavailable("insert into audit_alerts", err)
	}
	return nil
}

// FiringAlerts returns the groups whose latest alert row is "firing".
func (s *Store) FiringAlerts(ctx context.Context) ([]RateGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, `SELECT tenant, project, purpose, argMax(state, at) AS last
FROM audit_alerts GROUP BY tenant, project, purpose HAVING last = 'firing'`)
	if err != nil {
		return nil, unavailable("firing alerts", err)
	}
	defer rows.Close()
	var out []RateGroup
	for rows.Next() {
		var g RateGroup
		var state string
		if err := rows.Scan(&g.Tenant, &g.Project, &g.Purpose, &state); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// Alerts returns the alert rows with at >= since, oldest first.
func (s *Store) Alerts(ctx context.Context, since time.Time) ([]Alert, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, `SELECT at, tenant, project, purpose, state, rate, conflicts, applied, window_seconds, threshold, auditor
FROM audit_alerts FINAL WHERE at >= toDateTime(?) ORDER BY at, tenant, project, purpose, state`, since.Unix())
	if err != nil {
		return nil, unavailable("alerts", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		var a Alert
		var win uint32
		if err := rows.Scan(&a.At, &a.Group.Tenant, &a.Group.Project, &a.Group.Purpose, &a.State, &a.Rate,
			&a.Conflicts, &a.Applied, &win, &a.Threshold, &a.Auditor); err != nil {
			return nil, err
		}
		a.At = a.At.UTC()
		a.Window, a.WindowSeconds = time.Duration(win)*time.Second, win
		out = append(out, a)
	}
	return out, rows.Err()
}
