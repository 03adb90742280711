package writer

import "github.com/eskv/eskv/contract"

// The state cache keeps, per partition, the states of keys that the
// overlay no longer holds, so that a GET or a write's decision on a key
// the projector already applied does not read Postgres again.
//
// Why a cached state is the key's state. While a writer owns partition N
// (fenced as fence.go says, and confirm finds no other writer's commit
// past end), the key's state changes only through events this owner
// appends: kv_entries is written only by the projector, which folds
// kv.changes, and only the partition's owner appends to partition N; the
// TTL sweeper's expiries and requeues are events decided in the
// partition's own queue too. So the state after the last event this owner
// knows of a key is the key's state, whether it came from the overlay or
// from a read of the projection made when the overlay held no event of
// the key the projection lacked:
//
//   - trim moves an overlay entry's state here when the projector applied
//     its event: it is the state after the key's last event;
//   - states (the partition goroutine) reads the projection for the keys
//     neither the overlay nor the cache holds. The overlay then holds no
//     event of the key the projection lacks, and until the batch commits
//     none is added (only this goroutine appends), so what it read is the
//     state after the key's last event. A key never written reads as the
//     zero State, cached as well: it is what a create is decided on;
//   - a GET reads the projection for a key neither holds. It runs beside
//     the partition goroutine, so it may read version v while v+1 is
//     being committed, or after v+1 was committed, trimmed here and
//     evicted: its read is cached only when the partition's change count
//     (events added to the overlay, ownership starts and ends) did not
//     move during it (cacheGet says why that suffices).
//
// Order. The overlay is read first: an event appended after a state was
// cached shadows it, and when trim drops that entry its state replaces
// the cached one. put keeps the higher version anyway, so that no path
// can put an older state over a newer one.
//
// Expiry needs nothing: a State carries its entry's expiresAt (a set's,
// list's or queue's metadata key too), and every reader asks
// State.Visible or decides on the expiry, as it does with the row the
// projection would answer, which is the same until the sweeper's expire
// event (an event like any other) changes both.
//
// Lifetime. The cache belongs to one ownership: setReady empties it when
// the partition stops being ready (an error, confirm finding another
// writer's commit, the end of the ownership) and when a new ownership
// starts, because another owner may have written meanwhile. A revoked
// partition is dropped whole; a new assignment builds a new one.
//
// Bound. Each partition's cache holds at most StateCacheBytes divided
// by the topic's partitions (stateSize bytes per state); past it, put
// evicts states at random (the first ones map iteration offers, which
// starts at a random place). It is guarded by the partition's mu: put and
// reset with the write lock, get with the read lock (its counters are
// atomic).
type stateCache struct {
	budget  int64 // 0: disabled
	bytes   int64
	entries map[string]cachedState
	m       *metrics
}

type cachedState struct {
	state contract.State
	size  int64
}

// stateOverhead is about what a cached state costs besides its strings:
// the map slot, the State and its Entry, the string and slice headers.
const stateOverhead = 240

// stateSize is about the memory a cached state of key takes.
func stateSize(key string, s *contract.State) int64 {
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

func newStateCache(budget int64, m *metrics) *stateCache {
	return &stateCache{budget: max(budget, 0), entries: make(map[string]cachedState), m: m}
}

// get returns the cached state of key, counting a hit or a miss.
func (c *stateCache) get(key string) (contract.State, bool) {
	if c.budget == 0 {
		return contract.State{}, false
	}
	e, ok := c.entries[key]
	if ok {
		c.m.stateCacheHits.Inc()
	} else {
		c.m.stateCacheMisses.Inc()
	}
	return e.state, ok
}

// put caches s as key's state unless a newer one is cached, and evicts
// other states until the cache fits its budget. A state larger than the
// whole budget is not kept (nor the older one).
func (c *stateCache) put(key string, s contract.State) {
	if c.budget == 0 {
		return
	}
	old, had := c.entries[key]
	if had && old.state.Version > s.Version {
		return
	}
	size := stateSize(key, &s)
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
		c.m.stateCacheEvictions.Inc()
	}
}

// reset empties the cache: a new ownership starts without it.
func (c *stateCache) reset() {
	if len(c.entries) == 0 {
		return
	}
	c.add(-c.bytes)
	c.entries = make(map[string]cachedState)
}

func (c *stateCache) add(n int64) {
	c.bytes += n
	c.m.stateCacheBytes.Add(float64(n))
}
