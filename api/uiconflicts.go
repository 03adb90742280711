package api

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// conflictMinutes is how many minutes of conflicts the status page
// charts.
const conflictMinutes = 60

// maxConflictScopes bounds the projects whose conflicts are kept. When
// the table is full, projects without a conflict in the last hour are
// forgotten; if none is, a tenant's new project takes the place of one
// of the tenant holding the most projects, provided that tenant holds
// more than this one would: so every tenant may hold an equal share of
// the table (maxConflictScopes over the tenants with conflicts), more
// while others use less, and no tenant's conflicts keep another's
// projects out of the chart (issue 28: one tenant filled the table in
// 4.7 s and blinded every other tenant's chart).
const maxConflictScopes = 10_000

// conflictCounter counts, per project, the writes this writer answered
// 409 (version_conflict, lock_held, not_lock_holder, ...) per minute over
// the last hour, for the status page's chart. A forwarded write is
// counted by the writer that decided it (its owner), once.
type conflictCounter struct {
	mu     sync.Mutex
	max    int // maxConflictScopes
	scopes map[string]*conflictRing
	// tenants holds each tenant's projects in scopes; byCount the
	// tenants holding each number of them, and most the largest number
	// (0 when scopes is empty): the tenant to take a place from is
	// found at once.
	tenants map[string]map[string]struct{}
	byCount map[int]map[string]struct{}
	most    int
	// quietScan is the minute forgetQuiet last ran: a project only
	// becomes quiet when the minute changes, so one scan a minute finds
	// them all.
	quietScan int64
}

// conflictRing holds a project's counts of the last conflictMinutes
// minutes: counts[m % conflictMinutes] is minute m's when minutes[...]
// is m.
type conflictRing struct {
	minutes [conflictMinutes]int64
	counts  [conflictMinutes]int64
	last    int64
}

// ConflictMinute is one bar of the chart: the minute starting at Start
// and its conflicts.
type ConflictMinute struct {
	Start time.Time `json:"start"`
	Count int64     `json:"count"`
}

// ConflictRates is GET /ui/api/conflicts.
type ConflictRates struct {
	Scope   string           `json:"scope"`
	Minutes []ConflictMinute `json:"minutes"`
	Total   int64            `json:"total"`
	// Writers are the writers whose counts are added up, each marked
	// as answered or not.
	Writers []UIPeer `json:"writers,omitempty"`
}

func newConflictCounter() *conflictCounter {
	return &conflictCounter{max: maxConflictScopes, scopes: make(map[string]*conflictRing),
		tenants: make(map[string]map[string]struct{}), byCount: make(map[int]map[string]struct{}), quietScan: -1}
}

// tenantOf is the tenant of a scope, tenant/<tenant>/project/<project>.
func tenantOf(scope string) string {
	t, _, _ := strings.Cut(strings.TrimPrefix(scope, "tenant/"), "/")
	return t
}

// add counts one conflict of scope at now.
func (cc *conflictCounter) add(scope string, now time.Time) {
	m := now.Unix() / 60
	cc.mu.Lock()
	defer cc.mu.Unlock()
	r := cc.scopes[scope]
	if r == nil {
		if len(cc.scopes) >= cc.max && !cc.makeRoom(tenantOf(scope), m) {
			return
		}
		r = &conflictRing{}
		cc.put(scope, r)
	}
	i := m % conflictMinutes
	if r.minutes[i] != m {
		r.minutes[i], r.counts[i] = m, 0
	}
	r.counts[i]++
	r.last = m
}

// makeRoom frees a place in the full table for a project of tenant at
// minute m: a quiet project's, or else one of the tenant holding the most
// projects if it holds more than tenant would with one more. It reports
// whether it freed one.
func (cc *conflictCounter) makeRoom(tenant string, m int64) bool {
	if cc.forgetQuiet(m) {
		return true
	}
	if cc.most <= len(cc.tenants[tenant])+1 {
		return false // tenant holds its share: as many as any other, or one fewer
	}
	for largest := range cc.byCount[cc.most] {
		for scope := range cc.tenants[largest] {
			cc.remove(scope)
			return true
		}
	}
	return false
}

// put records a new project's ring.
func (cc *conflictCounter) put(scope string, r *conflictRing) {
	cc.scopes[scope] = r
	t := tenantOf(scope)
	ts := cc.tenants[t]
	if ts == nil {
		ts = make(map[string]struct{})
		cc.tenants[t] = ts
	}
	cc.recount(t, len(ts), len(ts)+1)
	ts[scope] = struct{}{}
}

// remove forgets a project.
func (cc *conflictCounter) remove(scope string) {
	delete(cc.scopes, scope)
	t := tenantOf(scope)
	ts := cc.tenants[t]
	delete(ts, scope)
	cc.recount(t, len(ts)+1, len(ts))
	if len(ts) == 0 {
		delete(cc.tenants, t)
	}
}

// recount moves tenant from the tenants holding from projects to those
// holding to (from and to differ by one), keeping most.
func (cc *conflictCounter) recount(tenant string, from, to int) {
	if set := cc.byCount[from]; set != nil {
		delete(set, tenant)
		if len(set) == 0 {
			delete(cc.byCount, from)
		}
	}
	if to > 0 {
		set := cc.byCount[to]
		if set == nil {
			set = make(map[string]struct{})
			cc.byCount[to] = set
		}
		set[tenant] = struct{}{}
	}
	switch {
	case to > cc.most:
		cc.most = to
	case from == cc.most && cc.byCount[from] == nil:
		cc.most = to // counts move by one: the largest is now to
	}
}

// forgetQuiet drops the projects without a conflict in the last hour, at
// most once a minute, and reports whether any was dropped.
func (cc *conflictCounter) forgetQuiet(m int64) bool {
	if cc.quietScan == m {
		return false
	}
	cc.quietScan = m
	n := len(cc.scopes)
	for s, r := range cc.scopes {
		if m-r.last >= conflictMinutes {
			cc.remove(s)
		}
	}
	return len(cc.scopes) < n
}

// perMinute returns scope's counts of the last conflictMinutes minutes,
// oldest first, the current (partial) minute last.
func (cc *conflictCounter) perMinute(scope string, now time.Time) ConflictRates {
	m := now.Unix() / 60
	out := ConflictRates{Scope: scope, Minutes: make([]ConflictMinute, conflictMinutes)}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	r := cc.scopes[scope]
	for k := range conflictMinutes {
		mm := m - conflictMinutes + 1 + int64(k)
		out.Minutes[k].Start = time.Unix(mm*60, 0).UTC()
		if r != nil && r.minutes[mm%conflictMinutes] == mm {
			out.Minutes[k].Count = r.counts[mm%conflictMinutes]
			out.Total += out.Minutes[k].Count
		}
	}
	return out
}

// countConflicts counts the key routes' writes answered 409 by project
// (a read answered 409, such as :lock of a set, is no conflict). A
// transaction's conflicts are not counted (its keys may span a project's
// paths, and its answer names the key at fault only in its body).
func (s *Server) countConflicts(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Request().Method == http.MethodGet || statusOf[contract.ErrorCode(err)] != http.StatusConflict {
			return err
		}
		raw, _ := contract.SplitVerb(c.Param("*"))
		if k, perr := contract.ParseKey(raw); perr == nil {
			s.conflicts.add(k.Scope(), s.now())
		}
		return err
	}
}

// byMinute returns the counts of the last conflictMinutes minutes of
// each project keep accepts, by minute (unix seconds / 60), the minutes
// without a conflict left out: what a writer tells its peers
// (GET /ui/api/peer/conflicts) for them to add to theirs.
func (cc *conflictCounter) byMinute(keep func(scope string) bool, now time.Time) map[string]map[int64]int64 {
	m := now.Unix() / 60
	out := make(map[string]map[int64]int64)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for scope, r := range cc.scopes {
		if m-r.last >= conflictMinutes || !keep(scope) {
			continue
		}
		counts := make(map[int64]int64)
		for i, mm := range r.minutes {
			if mm > m-conflictMinutes && mm <= m && r.counts[i] > 0 {
				counts[mm] = r.counts[i]
			}
		}
		if len(counts) > 0 {
			out[scope] = counts
		}
	}
	return out
}

// ratesOf is the chart of scope from its counts by minute (byMinute's),
// the current minute at now last.
func ratesOf(scope string, counts map[int64]int64, now time.Time) ConflictRates {
	m := now.Unix() / 60
	out := ConflictRates{Scope: scope, Minutes: make([]ConflictMinute, conflictMinutes)}
	for k := range conflictMinutes {
		mm := m - conflictMinutes + 1 + int64(k)
		out.Minutes[k] = ConflictMinute{Start: time.Unix(mm*60, 0).UTC(), Count: counts[mm]}
		out.Total += counts[mm]
	}
	return out
}
