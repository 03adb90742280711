// Package statecache is the writer's cache of key states: per partition,
// the states of keys the projector already applied, so that a GET or a
// write's decision on such a key does not read Postgres again. It only
// keeps what it is given, bounded in bytes; when a state may be put, and
// why it is then the key's state, is its owner's argument (package
// writer, statecache.go).
//
// Order. Put keeps the higher version, so that no path can put an older
// state over a newer one.
//
// Expiry needs nothing: a State carries its entry's expiresAt (a set's,
// list's or queue's metadata key too), and every reader asks
// State.Visible or decides on the expiry, as it does with the row the
// projection would answer.
//
// Bound. A cache holds at most its budget of bytes (Size bytes per
// state); past it, Put evicts states at random (the first ones map
// iteration offers, which starts at a random place). A Cache is not safe
// for concurrent use: its owner guards it (Put and Reset under a write
// lock, Get under a read lock: its counters are atomic).
package statecache

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/projection/keystate"
)

// Cache is one partition's cache of states by key.
type Cache struct {
	budget  int64 // 0: disabled
	bytes   int64
	entries map[string]cachedState
	m       *Metrics
}

type cachedState struct {
	state keystate.State
	size  int64
}

// stateOverhead is about what a cached state costs besides its strings:
// the map slot, the State and its Entry, the string and slice headers.
const stateOverhead = 240

// Size is about the memory a cached state of key takes: what it counts
// against the budget.
func Size(key string, s *keystate.State) int64 {
	e := &s.Entry
	n := len(key) + len(e.Key) + len(e.Value) + len(e.LastWriter) + len(e.RequestID) + len(e.SpecRef) +
		len(s.RequestDigest) + len(e.Semantics.Purpose) + len(e.Semantics.Producer)
	for _, h := range e.Semantics.ConsumerHints {
		n += len(h) + 16
	}
	if e.ExpiresAt != nil {
		n += 24
	}
	return int64(n) + stateOverhead
}

// New returns an empty cache of at most budget bytes (0 or less:
// disabled, it keeps nothing) counting into m.
func New(budget int64, m *Metrics) *Cache {
	return &Cache{budget: max(budget, 0), entries: make(map[string]cachedState), m: m}
}

// Get returns the cached state of key, counting a hit or a miss.
func (c *Cache) Get(key string) (keystate.State, bool) {
	if c.budget == 0 {
		return keystate.State{}, false
	}
	e, ok := c.entries[key]
	if ok {
		c.m.Hits.Inc()
	} else {
		c.m.Misses.Inc()
	}
	return e.state, ok
}

// Put caches s as key's state unless a newer one is cached, and evicts
// other states until the cache fits its budget. A state larger than the
// whole budget is not kept (nor the older one).
func (c *Cache) Put(key string, s keystate.State) {
	if c.budget == 0 {
		return
	}
	old, had := c.entries[key]
	if had && old.state.Version > s.Version {
		return
	}
	size := Size(key, &s)
	if size > c.budget {
		if had {
			delete(c.entries, key)
			c.add(-old.size)
		}
		return
	}
	c.entries[key] = cachedState{state: s, size: size}
	c.add(size - old.size)
	for k, e := range c.entries {
		if c.bytes <= c.budget {
			break
		}
		if k == key {
			continue
		}
		delete(c.entries, k)
		c.add(-e.size)
		c.m.Evictions.Inc()
	}
}

// Reset empties the cache: a new ownership starts without it.
func (c *Cache) Reset() {
	if len(c.entries) == 0 {
		return
	}
	c.add(-c.bytes)
	c.entries = make(map[string]cachedState)
}

func (c *Cache) add(n int64) {
	c.bytes += n
	c.m.Bytes.Add(float64(n))
}

// Metrics are the caches' of one writer, shared by its partitions'.
type Metrics struct {
	Hits      prometheus.Counter
	Misses    prometheus.Counter
	Evictions prometheus.Counter
	Bytes     prometheus.Gauge
}

// NewMetrics returns the caches' metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		Hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_state_cache_hits_total", Help: "Reads of a key's state (GET, or a write's decision) the overlay did not hold and the state cache answered, without Postgres.",
		}),
		Misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_state_cache_misses_total", Help: "Reads of a key's state neither the overlay nor the state cache held: read from Postgres.",
		}),
		Evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_state_cache_evictions_total", Help: "States evicted from the state cache to keep it within ESKV_STATE_CACHE_BYTES.",
		}),
		Bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_state_cache_bytes", Help: "About the memory the state cache holds, over the partitions this writer owns (at most ESKV_STATE_CACHE_BYTES).",
		}),
	}
}

// Collectors lists the metrics, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Hits, m.Misses, m.Evictions, m.Bytes}
}
