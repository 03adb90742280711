package projection

import (
	"bytes"
	"cmp"
	"slices"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
)

// applyScratch is what an Apply builds its statements in: the order of
// the batch's events, the columns of its rows and the pgx.Batch. A
// projector applies batch after batch of about the same shape, and
// building these anew for each one cost an allocation per column and
// per row, and their growth (BenchmarkApplyBatchBuild, 2026-11-24), so
// Store keeps them in a sync.Pool and each Apply takes one, fills it and
// gives it back emptied (release): its room stays, nothing it held does.
type applyScratch struct {
	// hist indexes the batch's events (not markers) by key, version and
	// position in the batch; latest is each key's latest event among
	// them, in key order.
	hist, latest []int
	next         []partitionNext
	parts        []int32
	offs         []int64
	ent          entryColumns
	h            historyColumns
	b            pgx.Batch
	// arrays: the columns go to pgx as pgarrays.go's arrays, from slab
	// (Store.arrays).
	arrays bool
	// noFields: kv_fields is not written (Store.deferFields).
	noFields bool
	// scopes are the batch's scopes, effective the fields declared in
	// each before the batch and in it (none: absent), decl the batch's
	// declarations (fieldindexes.go).
	scopes    []string
	effective map[string][]string
	decl      []declArgs
	slab      arraySlab
	// copyEnt and copyHist are Store.Load's COPY data (load.go); their
	// room stays, as the columns' does.
	copyEnt, copyHist bytes.Buffer
}

// text, nullText, int8, time and nullTime return a column as build
// passes it to pgx: as its array of pgarrays.go when sc.arrays, else as
// it is.
func (sc *applyScratch) text(v []string) any {
	if sc.arrays {
		return slabbed(&sc.slab.text, textArray{s: v})
	}
	return v
}

func (sc *applyScratch) nullText(v []*string) any {
	if sc.arrays {
		return slabbed(&sc.slab.nullText, nullTextArray{s: v})
	}
	return v
}

func (sc *applyScratch) int8(v []int64) any {
	if sc.arrays {
		return slabbed(&sc.slab.int8, int8Array{s: v})
	}
	return v
}

func (sc *applyScratch) time(v []time.Time) any {
	if sc.arrays {
		return slabbed(&sc.slab.time, timeArray{s: v})
	}
	return v
}

func (sc *applyScratch) nullTime(v []*time.Time) any {
	if sc.arrays {
		return slabbed(&sc.slab.nullTime, nullTimeArray{s: v})
	}
	return v
}

// partitionNext is a partition of a batch and the offset after its last
// record there.
type partitionNext struct {
	partition int32
	next      int64
}

// order fills hist and latest for batch. latest is the first of a key's
// events of its highest version, as one INSERT .. ON CONFLICT may update
// a row only once. Events of the same key and version (a replay within
// the batch) keep their order in the batch.
func (sc *applyScratch) order(batch []Applied) {
	sc.hist = sc.hist[:0]
	for i := range batch {
		if !batch[i].Marker {
			sc.hist = append(sc.hist, i)
		}
	}
	slices.SortFunc(sc.hist, func(a, b int) int {
		ea, eb := &batch[a].Event, &batch[b].Event
		return cmp.Or(cmp.Compare(ea.Key, eb.Key), cmp.Compare(ea.Version, eb.Version), cmp.Compare(a, b))
	})
	sc.latest = sc.latest[:0]
	for n, i := range sc.hist {
		e := &batch[i].Event
		if n+1 < len(sc.hist) && batch[sc.hist[n+1]].Event.Key == e.Key {
			continue // not the key's last
		}
		j := n
		for j > 0 && batch[sc.hist[j-1]].Event.Key == e.Key && batch[sc.hist[j-1]].Event.Version == e.Version {
			j--
		}
		sc.latest = append(sc.latest, sc.hist[j])
	}
}

// partitions returns the batch's partitions in order and, for each, the
// offset after its last record: where projector_offsets moves to.
func (sc *applyScratch) partitions(batch []Applied) (parts []int32, offs []int64) {
	sc.next = sc.next[:0]
	for i := range batch {
		a := &batch[i]
		n := a.Offset + 1
		k := 0
		for k < len(sc.next) && sc.next[k].partition != a.Partition {
			k++
		}
		switch {
		case k == len(sc.next) && n > 0:
			sc.next = append(sc.next, partitionNext{a.Partition, n})
		case k < len(sc.next) && n > sc.next[k].next:
			sc.next[k].next = n
		}
	}
	slices.SortFunc(sc.next, func(a, b partitionNext) int { return cmp.Compare(a.partition, b.partition) })
	sc.parts, sc.offs = reuse(sc.parts, len(sc.next)), reuse(sc.offs, len(sc.next))
	for _, pn := range sc.next {
		sc.parts = append(sc.parts, pn.partition)
		sc.offs = append(sc.offs, pn.next)
	}
	return sc.parts, sc.offs
}

// batch returns sc's pgx.Batch, emptied.
func (sc *applyScratch) batch() *pgx.Batch {
	clear(sc.b.QueuedQueries)
	sc.b.QueuedQueries = sc.b.QueuedQueries[:0]
	return &sc.b
}

// release drops what sc refers to of the batch it was built for (its
// values, the records' bytes), keeping its room for the next.
func (sc *applyScratch) release() {
	clear(sc.effective)
	clear(sc.decl)
	sc.decl = sc.decl[:0]
	sc.ent.reset(0)
	sc.h.reset(0)
	sc.slab.reset()
	clear(sc.b.QueuedQueries)
	sc.b.QueuedQueries = sc.b.QueuedQueries[:0]
}

// reuse returns s emptied, with room for n elements: s's own when it has
// it. Its elements are zeroed first, so that it keeps nothing alive. A
// nil s gives an empty slice that is not nil: pgx sends a nil slice as a
// NULL array.
func reuse[T any](s []T, n int) []T {
	clear(s)
	if s == nil || cap(s) < n {
		return make([]T, 0, max(n, cap(s)))
	}
	return s[:0]
}

// reset empties c, keeping its room. Unlike the other columns, fields'
// start nil (args).
func (c *fieldColumns) reset() {
	c.key = reuse(c.key, 0)
	c.field = reuse(c.field, 0)
	c.typ = reuse(c.typ, 0)
	c.num = reuse(c.num, 0)
	c.str = reuse(c.str, 0)
	c.vals = reuse(c.vals, 0)
}

// args returns c as writeFields' parameters: nil slices (NULL arrays)
// when it has no rows, as c held before it was reused.
func (c *fieldColumns) args() fieldColumns {
	if len(c.key) == 0 {
		return fieldColumns{}
	}
	return *c
}

// bytesText returns b as a string without copying it. Apply reads the
// bytes of its batch (Applied.Raw, Event.After) in place: the strings
// live in the columns of one Apply, which its caller does not change
// while it runs (a record's value, the event decoded from it), and
// release drops them.
func bytesText(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
