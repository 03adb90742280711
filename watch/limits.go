package watch

import (
	"context"
	"fmt"
	"time"

	"github.com/eskv/eskv/contract"
)

// The settings the refusals name (contract.Error.Field of
// too_many_requests) and label eskv_writer_watches_refused_total with.
const (
	limitWatches             = "ESKV_MAX_WATCHES"
	limitWatchesPerPrincipal = "ESKV_MAX_WATCHES_PER_PRINCIPAL"
	limitMemory              = "ESKV_WATCH_MEMORY_BYTES"
)

// minBufferBytes is the smallest Config.BufferBytes.
const minBufferBytes = 16 << 10

// catchUpWait is how long a watch from the past waits for catch-up
// memory before it is refused too_many_requests: long enough for the
// catch-ups of a reconnection storm (each reads up to the tailer's
// position and lets go), short enough that a client is answered before
// its own timeouts.
const catchUpWait = time.Second

// catchUpShare: a principal may hold one in catchUpShare of the
// catch-up slots (at least one).
const catchUpShare = 4

// catchUpBytes is the catch-up memory one catch-up holds: its buffer,
// and a fetch (fetchBytes of records, the records decoded, and the event
// being pushed), with room to spare.
func (c Config) catchUpBytes() int64 { return 2 * c.BufferBytes }

// fetchBytes is what a catch-up fetch asks the broker for (a broker
// returns at least one record batch, however large).
func (c Config) fetchBytes() int32 { return int32(min(c.BufferBytes/4, 16<<20)) }

// share is what one principal holds of the hub's slots.
type share struct {
	watches, catchUps int
}

// principalCatchUps is how many catch-ups one principal may hold.
func (h *Hub) principalCatchUps() int { return max(1, cap(h.catchUps)/catchUpShare) }

// admit takes a watch slot of principal (none of a share when empty).
func (h *Hub) admit(principal string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &contract.Error{Code: contract.EUnavailable, Message: "the writer is stopping", RetryAfterSeconds: 1}
	}
	sh := h.shares[principal]
	if principal != "" && sh != nil && sh.watches >= h.cfg.MaxWatchesPerPrincipal {
		h.metrics.refused.WithLabelValues(limitWatchesPerPrincipal).Inc()
		return &contract.Error{Code: contract.ETooManyRequests, Field: limitWatchesPerPrincipal, RetryAfterSeconds: 5,
			Message: fmt.Sprintf("this principal holds %d watches on this writer, its share (ESKV_MAX_WATCHES_PER_PRINCIPAL); close one, or retry later", sh.watches)}
	}
	if h.watches >= h.cfg.MaxWatches {
		h.metrics.refused.WithLabelValues(limitWatches).Inc()
		return &contract.Error{Code: contract.ETooManyWatches, RetryAfterSeconds: 1,
			Message: fmt.Sprintf("this writer serves %d watches, its limit (ESKV_MAX_WATCHES); retry later or on another writer", h.cfg.MaxWatches)}
	}
	h.watches++
	h.starting++
	h.metrics.watches.Set(float64(h.watches))
	h.shareOf(principal).watches++
	return nil
}

// started ends an admitted watch's start: it is served (Watches) when
// ok, else its slot is given back, in one step.
func (h *Hub) started(principal string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.starting--
	if !ok {
		h.leaveLocked(principal)
	}
}

// leave gives a watch slot of principal back.
func (h *Hub) leave(principal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leaveLocked(principal)
}

// leaveLocked is leave with h.mu held.
func (h *Hub) leaveLocked(principal string) {
	h.watches--
	h.metrics.watches.Set(float64(h.watches))
	h.shareOf(principal).watches--
	h.forgetShare(principal)
}

// reserve takes catch-up memory for a watch of principal from the past,
// waiting up to catchUpWait for it, or answers too_many_requests: the
// principal holds its share of it, or none came free.
func (h *Hub) reserve(ctx context.Context, principal string) error {
	h.mu.Lock()
	if sh := h.shares[principal]; principal != "" && sh != nil && sh.catchUps >= h.principalCatchUps() {
		h.mu.Unlock()
		h.metrics.refused.WithLabelValues(limitMemory).Inc()
		return &contract.Error{Code: contract.ETooManyRequests, Field: limitMemory, RetryAfterSeconds: 1,
			Message: fmt.Sprintf("this principal's watches catching up on this writer hold their share of its catch-up memory (ESKV_WATCH_MEMORY_BYTES, a 1/%d share); retry once one caught up, or watch from now", catchUpShare)}
	}
	h.shareOf(principal).catchUps++
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	if err := h.takeCatchUp(ctx, nil); err != nil {
		h.unshare(principal)
		h.metrics.refused.WithLabelValues(limitMemory).Inc()
		return &contract.Error{Code: contract.ETooManyRequests, Field: limitMemory, RetryAfterSeconds: 1,
			Message: "this writer's catch-up memory (ESKV_WATCH_MEMORY_BYTES) is held by other watches catching up; retry shortly, or watch from now"}
	}
	return nil
}

// reserveWait takes catch-up memory for a watch of principal that
// already streams (a watch from now whose tailer moved on), waiting as
// long as ctx lets it, or until quit is closed (errEnded); the
// principal's share is counted, not checked.
func (h *Hub) reserveWait(ctx context.Context, principal string, quit <-chan struct{}) error {
	h.mu.Lock()
	h.shareOf(principal).catchUps++
	h.mu.Unlock()
	if err := h.takeCatchUp(ctx, quit); err != nil {
		h.unshare(principal)
		return err
	}
	return nil
}

// takeCatchUp takes a catch-up slot, waiting until ctx ends or quit is
// closed.
func (h *Hub) takeCatchUp(ctx context.Context, quit <-chan struct{}) error {
	select {
	case h.catchUps <- struct{}{}:
		h.metrics.catchUps.Inc()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-quit:
		return errEnded
	}
}

// unreserve gives a catch-up's memory back.
func (h *Hub) unreserve(principal string) {
	<-h.catchUps
	h.metrics.catchUps.Dec()
	h.unshare(principal)
}

// unshare drops a catch-up from principal's share.
func (h *Hub) unshare(principal string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shareOf(principal).catchUps--
	h.forgetShare(principal)
}

// shareOf returns principal's share, made when missing; h.mu is held.
func (h *Hub) shareOf(principal string) *share {
	sh := h.shares[principal]
	if sh == nil {
		sh = &share{}
		h.shares[principal] = sh
	}
	return sh
}

// forgetShare drops principal's share once it holds nothing, so that
// the map holds only principals with slots; h.mu is held.
func (h *Hub) forgetShare(principal string) {
	if sh := h.shares[principal]; sh != nil && sh.watches == 0 && sh.catchUps == 0 {
		delete(h.shares, principal)
	}
}
