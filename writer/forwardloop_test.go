package writer

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// TestRouteOrigins: where a request this writer does not own goes, by
// who sent it (as api proved it) and by the ownership table. Only the
// table makes the writer not ready: its own forward coming back is
// refused alone, however many times, and the next client's request is
// forwarded as before (issue 28: a client's header naming the writer's
// own URL took it out of service).
func TestRouteOrigins(t *testing.T) {
	t.Parallel()
	const self, other = "http://10.0.0.1:8080", "http://10.0.0.2:8080"
	var logs bytes.Buffer
	w := offlineWriter(t, Config{InstanceID: "w0", AdvertiseURL: self})
	w.log = slog.New(slog.NewJSONHandler(&logs, nil))
	k, err := contract.ParseKey("tenant/acme/project/demo/k")
	if err != nil {
		t.Fatal(err)
	}
	p := changelog.Partition(k.Scope(), w.cfg.Topics.Partitions)
	setOwner := func(o projection.Owner) {
		o.Partition = p
		owners := map[int32]projection.Owner{p: o}
		w.owners.Store(&owners)
		w.clearLoops(owners)
	}
	route := func(from Origin) (string, string) {
		t.Helper()
		local, url, err := w.Route(k, from)
		if local {
			t.Fatal("routed here: the writer owns no partition")
		}
		return url, contract.ErrorCode(err)
	}
	setOwner(projection.Owner{ID: "w1", Addr: other, Epoch: 1})
	for _, tc := range []struct {
		name     string
		from     Origin
		url, err string
	}{
		{"OKClientForwarded", FromClient, other, ""},
		{"ErrPeersForwardNotForwardedAgain", FromPeer, "", contract.EUnavailable},
		{"ErrOwnForwardCameBack", FromSelf, "", contract.EForwardLoop},
		{"ErrOwnForwardCameBackAgain", FromSelf, "", contract.EForwardLoop},
		{"OKClientForwardedAfterwards", FromClient, other, ""},
	} {
		if url, code := route(tc.from); url != tc.url || code != tc.err {
			t.Fatalf("%s: routed to %q, error %q; want %q, %q", tc.name, url, code, tc.url, tc.err)
		}
		if loops := w.ForwardLoops(); len(loops) != 0 {
			t.Fatalf("%s: looping partitions %v; want none (no request makes the writer not ready)", tc.name, loops)
		}
	}
	if n := strings.Count(logs.String(), "a request this writer forwarded came back to it"); n != 1 {
		t.Errorf("%d log lines for two returned forwards within a minute; want 1:\n%s", n, logs.String())
	}

	// The table naming our own address for another writer is a loop:
	// not ready until the table changes.
	setOwner(projection.Owner{ID: "w1", Addr: self, Epoch: 2})
	if url, code := route(FromClient); url != "" || code != contract.EForwardLoop {
		t.Fatalf("owner row at our own URL: routed to %q, error %q; want forward_loop", url, code)
	}
	if loops := w.ForwardLoops(); !slices.Equal(loops, []int32{p}) {
		t.Fatalf("looping partitions %v; want [%d]", loops, p)
	}
	setOwner(projection.Owner{ID: "w1", Addr: other, Epoch: 3})
	if loops := w.ForwardLoops(); len(loops) != 0 {
		t.Fatalf("looping partitions %v after the owner row changed; want none", loops)
	}
	if url, code := route(FromClient); url != other || code != "" {
		t.Fatalf("after the loop cleared: routed to %q, error %q", url, code)
	}
}
