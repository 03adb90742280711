package writer

// The state cache (package statecache) keeps, per partition, the states
// of keys that the overlay no longer holds, so that a GET or a write's
// decision on a key the projector already applied does not read Postgres
// again. This is when the partition may put a state there.
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
// the cached one. Cache.Put keeps the higher version anyway, so that no path
// can put an older state over a newer one.
//
// Lifetime. The cache belongs to one ownership: setReady empties it when
// the partition stops being ready (an error, confirm finding another
// writer's commit, the end of the ownership) and when a new ownership
// starts, because another owner may have written meanwhile. A revoked
// partition is dropped whole; a new assignment builds a new one. Each
// partition's cache holds at most StateCacheBytes divided by the topic's
// partitions, and is guarded by the partition's mu.
