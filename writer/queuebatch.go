package writer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// overlayItem is a queue item's state after its latest unprojected
// change, appended at offset.
type overlayItem struct {
	el     contract.Element
	offset int64
}

// withItem records e's change of a queue item in the overlay entry o of
// its key (after next). The map is changed in place, by the partition's
// goroutine under the write lock, as withElement does; trim replaces it
// (pruneItems), never changes it, so a batch deciding on the map it read
// sees it whole.
func (o overlayEntry) withItem(e *contract.Event, offset int64) overlayEntry {
	if e.Element == nil || !e.Op.IsQueueWrite() {
		return o
	}
	if o.items == nil {
		o.items = make(map[string]overlayItem)
	}
	o.items[e.Element.Member] = overlayItem{el: *e.Element, offset: offset}
	return o
}

// pruneItems is items without those whose latest change the projection
// holds (offset below next), and whether there were any.
func pruneItems(items map[string]overlayItem, next int64) (map[string]overlayItem, bool) {
	keep := 0
	for _, it := range items {
		if it.offset >= next {
			keep++
		}
	}
	if keep == len(items) {
		return items, false
	}
	out := make(map[string]overlayItem, keep)
	for m, it := range items {
		if it.offset >= next {
			out[m] = it
		}
	}
	return out, true
}

// queueView is what a batch knows of the queue items it decides on, most
// recent first: the items it decided itself, the overlay's (the queues'
// unprojected item changes), and what the projection answered (items by
// member, the first ready rows of each popped queue but the overlay's
// members, the newest item of each dedupId asked). Several pops of one
// queue in a batch each take a different item: a decided item shadows
// its row.
type queueView struct {
	batch   map[decide.ElementRef]contract.Element
	overlay map[string]map[string]overlayItem
	probed  map[decide.ElementRef]contract.Element
	heads   map[string][]contract.Element
	// complete[q] is the since of the last heads probe of q that found
	// fewer rows than it asked for: its rows are all of q's ready rows
	// the overlay does not know.
	complete map[string]int64
	dedups   map[string]contract.Element // queue NUL dedupId -> newest row
	pops     map[string]int              // pops of each queue in the batch
}

func newQueueView() *queueView {
	return &queueView{
		batch:    make(map[decide.ElementRef]contract.Element),
		overlay:  make(map[string]map[string]overlayItem),
		probed:   make(map[decide.ElementRef]contract.Element),
		heads:    make(map[string][]contract.Element),
		complete: make(map[string]int64),
		dedups:   make(map[string]contract.Element),
		pops:     make(map[string]int),
	}
}

// item is the state of the queue item ref as the batch knows it (nil: no
// row).
func (v *queueView) item(ref decide.ElementRef) *contract.Element {
	if el, ok := v.batch[ref]; ok {
		return stateOrNil(el)
	}
	if it, ok := v.overlay[ref.Collection][ref.Member]; ok {
		return stateOrNil(it.el)
	}
	if el, ok := v.probed[ref]; ok {
		return &el
	}
	return nil
}

func stateOrNil(el contract.Element) *contract.Element {
	if el.State == "" {
		return nil
	}
	return &el
}

// known reports whether the batch or the overlay knows ref better than
// the projection.
func (v *queueView) known(ref decide.ElementRef) bool {
	if _, ok := v.batch[ref]; ok {
		return true
	}
	_, ok := v.overlay[ref.Collection][ref.Member]
	return ok
}

// newer visits the items of queue q the batch or the overlay knows.
func (v *queueView) newer(q string, visit func(contract.Element)) {
	for ref, el := range v.batch {
		if ref.Collection == q {
			visit(el)
		}
	}
	for m, it := range v.overlay[q] {
		if _, shadowed := v.batch[decide.ElementRef{Collection: q, Member: m}]; !shadowed {
			visit(it.el)
		}
	}
}

// firstReady is the first ready item of queue q's incarnation since
// among the batch's and the overlay's items and the probed heads, but
// items whose own TTL passed at now (never served; the sweeper removes
// them, so skipping them costs at most one sweep interval's expiries);
// probe is false when the heads may hold more than the projection
// answered.
func (v *queueView) firstReady(q string, since int64, now time.Time) (best *contract.Element, probe bool) {
	consider := func(el contract.Element) {
		if el.State == decide.ItemReady && decide.InIncarnation(el.Member, since) && !decide.ItemExpired(&el, now) && (best == nil || el.Member < best.Member) {
			best = &el
		}
	}
	v.newer(q, consider)
	for _, el := range v.heads[q] {
		if decide.InIncarnation(el.Member, since) && !decide.ItemExpired(&el, now) && !v.known(decide.ElementRef{Collection: q, Member: el.Member}) {
			consider(el)
			return best, false
		}
	}
	c, done := v.complete[q]
	return best, !done || c != since
}

// exclude lists the members of queue q the batch or the overlay knows:
// the projection's rows of them are not what the batch decides on.
func (v *queueView) exclude(q string) []string {
	var out []string
	v.newer(q, func(el contract.Element) { out = append(out, el.Member) })
	return out
}

// dedup is the newest item of queue q's incarnation since pushed with
// dedupId id, as the batch knows it (nil: none).
func (v *queueView) dedup(q string, since int64, id string) *contract.Element {
	var best *contract.Element
	consider := func(el contract.Element) {
		if el.DedupID == id && el.PushedAt != nil && decide.InIncarnation(el.Member, since) &&
			(best == nil || el.PushedAt.After(*best.PushedAt)) {
			best = &el
		}
	}
	v.newer(q, consider)
	if el, ok := v.dedups[q+changelog.RecordKeySep+id]; ok {
		consider(el)
	}
	return best
}

// askQueue adds to q what a batch's queue write r needs from the
// projection that the overlay (entry e, in: whether it holds r's queue)
// does not hold, and notes the overlay's items of the queue in v.
func (v *queueView) askQueue(q *projection.Query, r *decide.Queue, e overlayEntry, in bool, now time.Time) {
	key := r.Key.String()
	if in {
		v.overlay[key] = e.items
	}
	var since int64 // 0: the projection's
	if in {
		meta, err := decide.QueueMeta(e.state.Visible(now))
		if err != nil || e.state.Visible(now) == nil {
			return // no queue to read: the batch creates it, or refuses r
		}
		since = meta.Since
	}
	switch r.Op {
	case contract.OpQPush:
		if r.DedupID != "" {
			q.Dedups = append(q.Dedups, projection.DedupRef{Queue: key, Since: since, DedupID: r.DedupID})
		}
	case contract.OpQPop:
		v.pops[key]++
		if v.pops[key] == 1 {
			q.Heads = append(q.Heads, projection.HeadRef{Queue: key, Since: since, Exclude: slices.Collect(maps.Keys(e.items)), Now: now})
		}
	case contract.OpQAck, contract.OpQRequeue, contract.OpQExpire:
		ref, _ := decide.QueueItemRef(r)
		if _, ok := e.items[ref.Member]; !ok {
			q.Items = append(q.Items, projection.ElementRef(ref))
		}
	}
}

// found takes what the projection answered to q.
func (v *queueView) found(q projection.Query, f projection.Found, states map[string]keystate.State, now time.Time) {
	for i := range q.Heads {
		h := q.Heads[i]
		v.heads[h.Queue] = f.Heads[h.Queue]
		since := h.Since
		if since == 0 {
			st := states[h.Queue]
			meta, err := decide.QueueMeta(st.Visible(now))
			if err != nil {
				continue
			}
			since = meta.Since
		}
		if len(f.Heads[h.Queue]) < h.Limit {
			v.complete[h.Queue] = since
		}
	}
	for d, el := range f.Dedups {
		v.dedups[d.Queue+changelog.RecordKeySep+d.DedupID] = el
	}
	for ref, el := range f.Items {
		v.probed[decide.ElementRef(ref)] = el
	}
}

// queueInput is what the queue write r is decided on besides the queue's
// state cur (decide.DecideQueue): known to the batch, or probed now when a pop
// reaches past the heads the first round trip read.
func (p *partition) queueInput(ctx context.Context, cur keystate.State, r *decide.Queue, now time.Time, v *queueView) (decide.QueueInput, error) {
	visible := cur.Visible(now)
	meta, err := decide.QueueMeta(visible)
	if err != nil || visible == nil {
		return decide.QueueInput{}, nil
	}
	key := r.Key.String()
	var in decide.QueueInput
	switch r.Op {
	case contract.OpQPush:
		if r.DedupID != "" {
			in.Dup = v.dedup(key, meta.Since, r.DedupID)
		}
	case contract.OpQPop:
		if meta.Size-meta.InFlight <= 0 {
			return in, nil
		}
		head, probe := v.firstReady(key, meta.Since, now)
		if head == nil && probe {
			h := projection.HeadRef{Queue: key, Since: meta.Since, Exclude: v.exclude(key), Limit: max(1, v.pops[key]), Now: now}
			f, err := p.w.proj.Find(ctx, projection.Query{Heads: []projection.HeadRef{h}})
			if err != nil {
				return in, err
			}
			v.found(projection.Query{Heads: []projection.HeadRef{h}}, f, nil, now)
			head, _ = v.firstReady(key, meta.Since, now)
		}
		in.Head = head
		if r.Visibility > 0 {
			in.Nonce = newReceiptNonce()
		}
	case contract.OpQAck, contract.OpQRequeue, contract.OpQExpire:
		ref, _ := decide.QueueItemRef(r)
		in.Item = v.item(ref)
	}
	return in, nil
}

// newReceiptNonce is a receipt's random part: 128 bits from crypto/rand,
// in lowercase hex (contract.IsReceiptNonce).
func newReceiptNonce() string {
	var b [contract.ReceiptNonceLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b[:])
}
