package api

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
)

// conflictMinutes is how many minutes of conflicts the status page
// charts.
const conflictMinutes = 60

// maxConflictScopes bounds the projects whose conflicts are kept: beyond
// it, projects without a conflict in the last hour are forgotten, and a
// new project is not counted until one is.
const maxConflictScopes = 10_000

// conflictCounter counts, per project, the writes this writer answered
// 409 (version_conflict, lock_held, not_lock_holder, ...) per minute over
// the last hour, for the status page's chart. A forwarded write is
// counted by the writer that decided it (its owner), once.
type conflictCounter struct {
	mu     sync.Mutex
	scopes map[string]*conflictRing
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
}

func newConflictCounter() *conflictCounter {
	return &conflictCounter{scopes: make(map[string]*conflictRing)}
}

// add counts one conflict of scope at now.
func (cc *conflictCounter) add(scope string, now time.Time) {
	m := now.Unix() / 60
	cc.mu.Lock()
	defer cc.mu.Unlock()
	r := cc.scopes[scope]
	if r == nil {
		if len(cc.scopes) >= maxConflictScopes && !cc.forgetQuiet(m) {
			return
		}
		r = &conflictRing{}
		cc.scopes[scope] = r
	}
	i := m % conflictMinutes
	if r.minutes[i] != m {
		r.minutes[i], r.counts[i] = m, 0
	}
	r.counts[i]++
	r.last = m
}

// forgetQuiet drops the projects without a conflict in the last hour and
// reports whether any was dropped.
func (cc *conflictCounter) forgetQuiet(m int64) bool {
	n := len(cc.scopes)
	for s, r := range cc.scopes {
		if m-r.last >= conflictMinutes {
			delete(cc.scopes, s)
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
		if err == nil || c.Request().Method == http.MethodGet || statusOf[events.ErrorCode(err)] != http.StatusConflict {
			return err
		}
		raw, _, _ := strings.Cut(c.Param("*"), ":") // a key never holds ':'; a verb follows it
		if k, perr := events.ParseKey(raw); perr == nil {
			s.conflicts.add(k.Scope(), s.now())
		}
		return err
	}
}
