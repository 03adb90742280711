package writer

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

// AdvertiseSetting is the setting that names a writer's advertise URL; the
// errors about it name it, since that is what an operator fixes.
const AdvertiseSetting = "ESKV_ADVERTISE_URL"

// CheckAdvertiseURL refuses an advertise URL other writers could not
// reach this writer at: not an absolute http(s) URL, or with an
// unspecified host (empty, 0.0.0.0, ::). Such a URL recorded in
// writer_owners makes every other writer forward this writer's partitions
// to itself (the bug of issue 15), so the writer must not start with it.
func CheckAdvertiseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", AdvertiseSetting, raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s=%q: want an http:// or https:// URL other writers reach this writer at", AdvertiseSetting, raw)
	}
	if h := u.Hostname(); h == "" || isUnspecified(h) {
		return fmt.Errorf("%s=%q: the host %q is unspecified, so other writers would forward to themselves: "+
			"set it to an address they reach this writer at (on Kubernetes http://$(POD_IP):8080 from the downward API status.podIP)",
			AdvertiseSetting, raw, h)
	}
	return nil
}

func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// loops tracks the partitions whose requests would be forwarded back to
// this writer: the owner recorded in writer_owners answers at our own
// advertise URL although we do not own the partition, or a forwarded
// request came back to us. Each such partition is logged once when it
// starts looping and once when it stops, counted per refused request, and
// makes the writer not ready (ForwardLoops) until the ownership table
// names another owner for it.
type loops struct {
	mu    sync.Mutex
	parts map[int32]projection.Owner // the owner row seen when the loop was found
}

// errForwardLoop answers a request whose forward would loop.
func errForwardLoop(p int32) error {
	return &events.Error{Code: events.EForwardLoop, RetryAfterSeconds: 1, Message: fmt.Sprintf(
		"partition %d: forwarding would come back to this writer (misconfigured %s of a writer); another writer may answer, retry", p, AdvertiseSetting)}
}

// forwardLoop records that partition p loops with owner row o (the zero
// Owner when none is recorded), and returns the error to answer.
func (w *Writer) forwardLoop(p int32, o projection.Owner, forwardedBy string) error {
	w.metrics.forwardLoops.Inc()
	w.loops.mu.Lock()
	defer w.loops.mu.Unlock()
	if _, known := w.loops.parts[p]; !known {
		w.loops.parts[p] = o
		w.metrics.loopingPartitions.Set(float64(len(w.loops.parts)))
		w.log.Error("forward loop: requests for this partition would be forwarded back to this writer; "+
			"answering 503 forward_loop and not ready until writer_owners names another owner. "+
			"Check every writer's "+AdvertiseSetting+": each must be an address only that writer answers at",
			"partition", p, "owner", o.ID, "ownerAddr", o.Addr, "self", w.cfg.AdvertiseURL, "forwardedBy", forwardedBy)
	}
	return errForwardLoop(p)
}

// looping returns the error of a partition already known to loop with
// owner row o, or nil.
func (w *Writer) looping(p int32, o projection.Owner) error {
	w.loops.mu.Lock()
	defer w.loops.mu.Unlock()
	if seen, ok := w.loops.parts[p]; ok && sameOwner(seen, o) {
		return errForwardLoop(p)
	}
	return nil
}

// clearLoops forgets the loops whose partition now has another owner row,
// or is owned here: the ownership changed, so forwarding may work again.
func (w *Writer) clearLoops(owners map[int32]projection.Owner) {
	w.loops.mu.Lock()
	defer w.loops.mu.Unlock()
	for p, seen := range w.loops.parts {
		_, local := w.partitionByID(p)
		if o := owners[p]; local || !sameOwner(seen, o) {
			delete(w.loops.parts, p)
			w.log.Warn("forward loop cleared: the partition has another owner", "partition", p, "owner", o.ID, "ownerAddr", o.Addr)
		}
	}
	w.metrics.loopingPartitions.Set(float64(len(w.loops.parts)))
}

func sameOwner(a, b projection.Owner) bool {
	return a.ID == b.ID && a.Addr == b.Addr && a.Epoch == b.Epoch
}

// ForwardLoops returns the partitions whose forwarding loops back to this
// writer, in order; while any does, /readyz answers 503.
func (w *Writer) ForwardLoops() []int32 {
	w.loops.mu.Lock()
	defer w.loops.mu.Unlock()
	out := make([]int32, 0, len(w.loops.parts))
	for p := range w.loops.parts {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Route says where a request for key is decided: here (local), or by the
// writer answering at ownerURL. forwardedBy is the advertise URL of the
// writer that forwarded the request to us ("" from a client). A request
// is never forwarded twice: a forwarded one this writer cannot decide
// answers partition_unavailable (ownership is moving), or forward_loop
// when it was our own forward coming back. When this writer does not own
// the key's partition and knows no other owner, the error is
// partition_unavailable too (never a read from a projection that may lag).
func (w *Writer) Route(key events.Key, forwardedBy string) (local bool, ownerURL string, err error) {
	id, p := w.partition(key)
	if p != nil {
		return true, "", nil
	}
	var o projection.Owner
	known := false
	if owners := w.owners.Load(); owners != nil {
		o, known = (*owners)[id]
	}
	self := w.cfg.AdvertiseURL
	switch {
	case self != "" && forwardedBy == self:
		return false, "", w.forwardLoop(id, o, forwardedBy)
	case known && o.ID != w.cfg.InstanceID && self != "" && o.Addr == self:
		return false, "", w.forwardLoop(id, o, forwardedBy)
	case forwardedBy != "" || !known || o.ID == w.cfg.InstanceID:
		return false, "", errUnavailable(id, "moving between writers")
	}
	if err := w.looping(id, o); err != nil {
		w.metrics.forwardLoops.Inc()
		return false, "", err
	}
	return false, o.Addr, nil
}

// partitionByID returns the partition id if this writer owns it.
func (w *Writer) partitionByID(id int32) (*partition, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	p, ok := w.parts[id]
	return p, ok
}
