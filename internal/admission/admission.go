// Package admission bounds what the clients of a server may hold of a
// resource it shares among them (listings in progress, request body
// bytes in memory, open connections): a Gate holds a global bound and,
// below it, a share per holder (a principal, or a remote address before
// authentication), so that no one holder can take the whole resource
// from the others. A refusal names the setting of the bound that was
// full and is counted in eskv_http_limited_total{limit}.
package admission

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Holder is who takes from a gate: a principal by name, or, before
// authentication, a remote address (Addr; its IP, without the port).
type Holder struct {
	Name string
	Addr bool
}

// Refused is a refusal: the amount asked for does not fit now under the
// bound named Setting (Never: it never could, being above the bound).
type Refused struct {
	Setting string
	Never   bool
}

func (r *Refused) Error() string {
	if r.Never {
		return "more than " + r.Setting + " allows"
	}
	return r.Setting + " is reached"
}

// Limit is a gate's bounds and the names of their settings: Total for
// every holder together, Each for one holder (at most Total: a larger
// Each is Total, and named as Total).
type Limit struct {
	Total, Each               int64
	TotalSetting, EachSetting string
}

// Gate bounds a resource as Limit says. Its zero value is not usable:
// New makes one.
type Gate struct {
	limit   Limit
	refused [2]prometheus.Counter // by total, by share
	mu      sync.Mutex
	used    int64
	by      map[Holder]int64
}

// New returns a gate of l whose refusals are counted in refusals (from
// Refusals; nil counts nothing).
func New(l Limit, refusals *prometheus.CounterVec) *Gate {
	if l.Each >= l.Total {
		l.Each, l.EachSetting = l.Total, l.TotalSetting // no share below the total
	}
	g := &Gate{limit: l, by: make(map[Holder]int64)}
	for i, s := range []string{l.TotalSetting, l.EachSetting} {
		if refusals != nil {
			g.refused[i] = refusals.WithLabelValues(Label(s))
		}
	}
	return g
}

// Limit returns the gate's bounds.
func (g *Gate) Limit() Limit { return g.limit }

// Take takes n for h, or refuses it (*Refused) when h's share or the
// total would go over its bound. A refusal takes nothing.
func (g *Gate) Take(h Holder, n int64) error {
	if n > g.limit.Each {
		return g.refuse(1, true)
	}
	g.mu.Lock()
	mine := g.by[h]
	switch {
	case mine+n > g.limit.Each:
		g.mu.Unlock()
		return g.refuse(1, false)
	case g.used+n > g.limit.Total:
		g.mu.Unlock()
		return g.refuse(0, false)
	}
	g.used += n
	g.by[h] = mine + n
	g.mu.Unlock()
	return nil
}

func (g *Gate) refuse(i int, never bool) error {
	if g.refused[i] != nil {
		g.refused[i].Inc()
	}
	s := g.limit.TotalSetting
	if i == 1 {
		s = g.limit.EachSetting
	}
	return &Refused{Setting: s, Never: never}
}

// Release gives back n that h took.
func (g *Gate) Release(h Holder, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= n
	if left := g.by[h] - n; left > 0 {
		g.by[h] = left
	} else {
		delete(g.by, h) // the map holds only holders holding something
	}
}

// Used returns the amount taken, by every holder together.
func (g *Gate) Used() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used
}

// Held returns the amount h holds.
func (g *Gate) Held(h Holder) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.by[h]
}

// Label is the limit label of a setting: its name in lower case without
// the ESKV_ prefix (ESKV_MAX_LISTS_PER_PRINCIPAL: max_lists_per_principal).
func Label(setting string) string {
	return strings.ToLower(strings.TrimPrefix(setting, "ESKV_"))
}

// Refusals returns the counter of refusals by limit,
// eskv_http_limited_total, registered with reg; when reg already holds
// it (the API and the HTTP server share one registry), the one it holds.
func Refusals(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "eskv_http_limited_total",
		Help: "Requests and connections refused because a bound was reached, by limit: the setting of a global bound (max_connections, max_concurrent_lists, max_body_bytes) or of one principal's or remote address's share below it (..._per_principal, ..._per_address).",
	}, []string{"limit"})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}
