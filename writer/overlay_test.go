package writer

import (
	"strings"
	"testing"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// TestSubmitRefusesWhenOverlayFull: with the projector down the overlay
// holds every new change; at MaxOverlay keys writes answer 503 (reads
// are unaffected) and resume once the projector caught up.
func TestSubmitRefusesWhenOverlayFull(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{
		Topics:     changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1},
		MaxOverlay: 2,
	})
	p := newPartition(w, 0)
	p.setReady(true, 1, map[string]overlayEntry{"a": {offset: 10}})
	submit := func() error { return p.submit(&call{cmd: &decide.KV{}, done: make(chan answer, 1)}) }

	if err := submit(); err != nil {
		t.Fatalf("overlay below the limit: %v", err)
	}
	p.mu.Lock()
	p.overlay["b"] = overlayEntry{offset: 11}
	p.mu.Unlock()
	err := submit()
	if contract.ErrorCode(err) != contract.EUnavailable || !strings.Contains(err.Error(), "projector") {
		t.Fatalf("overlay at the limit: %v", err)
	}
	if _, ok, ready := p.lookup("a"); !ok || !ready {
		t.Fatal("reads must go on while writes wait for the projector")
	}
	p.trim(11) // the projector applied offset 10
	if err := submit(); err != nil {
		t.Fatalf("after the projector caught up: %v", err)
	}
}
