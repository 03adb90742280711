package writer

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
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

// Origin is who sent a request, as far as this writer can prove it: api
// verifies the request's forwarding proofs (api/forward.go) and Route
// decides with the result. Nothing a client writes makes a request
// anything but FromClient.
type Origin uint8

const (
	// FromClient is a client's request, or one whose forwarding nothing
	// proves (no proof, a bad one, or another writer's without a shared
	// peer secret).
	FromClient Origin = iota
	// FromPeer is a request another writer of the deployment forwarded,
	// proven with the peer secret they share.
	FromPeer
	// FromSelf is a request this writer forwarded that came back to it,
	// proven with its own key: the owner's advertise URL reaches this
	// writer, or (without a peer secret) another writer sent it back.
	FromSelf
)

// loops tracks the partitions whose requests would be forwarded back to
// this writer because the owner recorded in writer_owners answers at our
// own advertise URL although we do not own the partition. Each such
// partition is logged once when it starts looping and once when it stops,
// counted per refused request, and makes the writer not ready
// (ForwardLoops) until the ownership table names another owner for it.
//
// Only the ownership table puts a partition here: a request, whatever it
// carries, never does (issue 28: a client's Eskv-Forwarded-By naming the
// writer's own URL took it out of service). A request of ours that came
// back (FromSelf) is refused alone, counted, and logged at most once a
// minute per partition (cameBack), never a readiness matter.
type loops struct {
	mu       sync.Mutex
	parts    map[int32]projection.Owner // the owner row seen when the loop was found
	cameBack map[int32]time.Time        // when a partition's returned forward was last logged
}

// cameBackLogEvery is how often, at most, a partition's forwards coming
// back are logged.
const cameBackLogEvery = time.Minute

// errForwardLoop answers a request whose forward would loop.
func errForwardLoop(p int32) error {
	return &contract.Error{Code: contract.EForwardLoop, RetryAfterSeconds: 1, Message: fmt.Sprintf(
		"partition %d: forwarding would come back to this writer (misconfigured %s of a writer); another writer may answer, retry", p, AdvertiseSetting)}
}

// forwardLoop records that partition p loops with owner row o, and
// returns the error to answer.
func (w *Writer) forwardLoop(p int32, o projection.Owner) error {
	w.metrics.forwardLoops.Inc()
	w.loops.mu.Lock()
	defer w.loops.mu.Unlock()
	if _, known := w.loops.parts[p]; !known {
		w.loops.parts[p] = o
		w.metrics.loopingPartitions.Set(float64(len(w.loops.parts)))
		w.log.Error("forward loop: requests for this partition would be forwarded back to this writer; "+
			"answering 503 forward_loop and not ready until writer_owners names another owner. "+
			"Check every writer's "+AdvertiseSetting+": each must be an address only that writer answers at",
			"partition", p, "owner", o.ID, "ownerAddr", o.Addr, "self", w.cfg.AdvertiseURL)
	}
	return errForwardLoop(p)
}

// forwardCameBack answers a request this writer forwarded for partition
// p (owner row o, zero when none is recorded) that came back to it: counted, logged at most once a
// minute per partition, and refused; the partition and the writer's
// readiness are untouched.
func (w *Writer) forwardCameBack(p int32, o projection.Owner) error {
	w.metrics.forwardLoops.Inc()
	now := time.Now()
	w.loops.mu.Lock()
	last, logged := w.loops.cameBack[p]
	if !logged || now.Sub(last) >= cameBackLogEvery {
		w.loops.cameBack[p] = now
		logged = false
	}
	w.loops.mu.Unlock()
	if !logged {
		w.log.Warn("forward loop: a request this writer forwarded came back to it; answering it 503 forward_loop. "+
			"The owner's address reaches this writer, or (without "+PeerSecretSetting+") ownership is moving: "+
			"check every writer's "+AdvertiseSetting+" and that every writer has the same "+PeerSecretSetting,
			"partition", p, "owner", o.ID, "ownerAddr", o.Addr, "self", w.cfg.AdvertiseURL)
	}
	return errForwardLoop(p)
}

// PeerSecretSetting names the writers' shared forwarding secret in the
// logs about forwarding.
const PeerSecretSetting = "ESKV_PEER_SECRET"

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
// writer by the ownership table, in order; while any does, /readyz
// answers 503.
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
// writer answering at ownerURL. from is who sent it, as proven (Origin).
// A peer's forward is never forwarded again: if this writer cannot decide
// it, it answers partition_unavailable (ownership is moving). A request
// of ours that came back answers forward_loop. When this writer does not
// own the key's partition and knows no other owner, the error is
// partition_unavailable too (never a read from a projection that may
// lag). Without a peer secret no request is FromPeer, so one another
// writer forwarded may be forwarded again; if it then comes back to a
// writer that forwarded it, that writer recognizes its own proof
// (FromSelf): a request makes at most one round of the writers.
func (w *Writer) Route(key contract.Key, from Origin) (local bool, ownerURL string, err error) {
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
	case known && o.ID != w.cfg.InstanceID && self != "" && o.Addr == self:
		return false, "", w.forwardLoop(id, o)
	case from == FromSelf:
		return false, "", w.forwardCameBack(id, o)
	case from == FromPeer || !known || o.ID == w.cfg.InstanceID:
		return false, "", errUnavailable(id, "moving between writers")
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
