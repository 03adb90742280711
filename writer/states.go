package writer

import (
	"context"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// statesTries is how often States reads again when the projection it
// read was ahead of the overlay it read (a commit between the two): the
// window is the moment between a batch's Kafka commit and its events
// entering the overlay, so a second read almost always suffices.
const statesTries = 5

// States is State of several keys of one partition (a batch get's keys
// of that partition), read as one: the ownership is confirmed once, so
// that each key's state holds every write acknowledged before the call,
// as State's does, then the keys the overlay and the state cache do not
// hold are read from the projection in one snapshot. The states are in
// the order of keys, and all of them are as of the position returned
// (StateAt's, for all the keys at once): every event of the partition
// at an offset up to it, none after. Keys of more than one partition are
// refused (internal): the caller groups them.
func (w *Writer) States(ctx context.Context, keys []contract.Key) ([]keystate.State, contract.Cursor, error) {
	if len(keys) == 0 {
		return nil, contract.Cursor{}, nil
	}
	id, p := w.partition(keys[0])
	at := contract.Cursor{Partition: id}
	for _, k := range keys[1:] {
		if other := w.Partition(k); other != id {
			return nil, at, contract.Errorf(contract.EInternal, "States: keys of partitions %d and %d", id, other)
		}
	}
	if p == nil {
		return nil, at, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return nil, at, err
	}
	for range statesTries {
		out, pos, exact, err := w.statesOnce(ctx, p, keys)
		if err != nil || exact {
			at.Offset = pos
			return out, at, err
		}
		time.Sleep(time.Millisecond) // let the committed batch enter the overlay
	}
	return nil, at, errUnavailable(id, "writes kept moving the partition during the read")
}

// statesOnce reads keys' states as one: those the overlay or the state
// cache holds under one hold of the partition's lock (so as of its end),
// the rest from one snapshot of the projection with the position it
// reflects. Not exact when that position is past the end the overlay was
// read at while some state came from the overlay: an event committed
// between the two may be missing from it.
func (w *Writer) statesOnce(ctx context.Context, p *partition, keys []contract.Key) (out []keystate.State, pos int64, exact bool, err error) {
	out, look, missing, at, ready := p.lookupAll(keys)
	if !ready {
		return nil, 0, false, errUnavailable(p.id, "catching up or moving between writers")
	}
	pos = look.end - 1
	if len(missing) == 0 {
		return out, pos, true, nil
	}
	found, projected, err := w.proj.LookupAt(ctx, w.cfg.Topics.Changes, p.id, missing)
	if err != nil {
		return nil, 0, false, err
	}
	if projected > pos && len(missing) < len(keys) {
		return nil, 0, false, nil
	}
	for j, k := range missing {
		s := found.States[k] // every asked key is there, never written ones zero
		out[at[j]] = s
		if projected < look.end {
			// As in StateAt: nothing the projection holds is past what
			// this owner knows, so the state may be cached.
			p.cacheGet(k, s, look.changes)
		}
	}
	return out, max(pos, projected), true, nil
}

// lookupAll is lookupAt of every key under one hold of the lock: the
// states the overlay or the state cache holds (in the order of keys),
// the partition's change count and end then, and the keys to read from
// the projection (missing[j] is keys[at[j]]).
func (p *partition) lookupAll(keys []contract.Key) (out []keystate.State, l looked, missing []string, at []int, ready bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	l = looked{changes: p.changes, end: p.end}
	if !p.ready {
		return nil, l, nil, nil, false
	}
	out = make([]keystate.State, len(keys))
	for i, k := range keys {
		key := k.String()
		if e, ok := p.overlay[key]; ok {
			out[i] = e.state
			continue
		}
		if s, ok := p.cache.Get(key); ok {
			out[i] = s
			continue
		}
		missing, at = append(missing, key), append(at, i)
	}
	return out, l, missing, at, true
}

// Partition is the partition of key's scope.
func (w *Writer) Partition(key contract.Key) int32 {
	return changelog.Partition(key.Scope(), w.cfg.Topics.Partitions)
}
