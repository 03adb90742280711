package writer

import (
	"context"

	"github.com/eskv/eskv/contract"
)

// States is State of several keys of one partition (a batch get's keys
// of that partition), read as one: the ownership is confirmed once, so
// that each key's state holds every write acknowledged before the call,
// as State's does, then the keys the overlay and the state cache do not
// hold are read from the projection in one query. The states are in the
// order of keys. Keys of more than one partition are refused (internal):
// the caller groups them.
func (w *Writer) States(ctx context.Context, keys []contract.Key) ([]contract.State, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	id, p := w.partition(keys[0])
	for _, k := range keys[1:] {
		if other := w.Partition(k); other != id {
			return nil, contract.Errorf(contract.EInternal, "States: keys of partitions %d and %d", id, other)
		}
	}
	if p == nil {
		return nil, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return nil, err
	}
	out := make([]contract.State, len(keys))
	changes := make([]uint64, len(keys))
	var missing []string
	var at []int // missing[j] is keys[at[j]]
	for i, k := range keys {
		s, ok, ready, ch := p.lookupAt(k.String())
		if !ready {
			return nil, errUnavailable(id, "catching up or moving between writers")
		}
		out[i], changes[i] = s, ch.changes
		if !ok {
			missing, at = append(missing, k.String()), append(at, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	found, err := w.proj.Lookup(ctx, missing, nil, nil)
	if err != nil {
		return nil, err
	}
	for j, k := range missing {
		s := found.States[k] // every asked key is there, never written ones zero
		out[at[j]] = s
		p.cacheGet(k, s, changes[at[j]])
	}
	return out, nil
}

// Partition is the partition of key's scope.
func (w *Writer) Partition(key contract.Key) int32 {
	return contract.Partition(key.Scope(), w.cfg.Topics.Partitions)
}
