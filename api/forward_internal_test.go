package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/writer"
)

// TestForwardProofVerify: a proof proves its sender only with the key it
// was made with, for its method and request URI, within peerProofSkew;
// what a client can write (a URL, a copy of a proof for another request,
// an old one, junk, a flood of proofs) proves nothing.
func TestForwardProofVerify(t *testing.T) {
	secret := []byte("a peer secret of 32 bytes at least")
	mustForwarder := func(self string, secret []byte) *forwarder {
		f, err := newForwarder(self, secret, nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	w0, w1 := mustForwarder("http://w0:8080", secret), mustForwarder("http://w1:8080", secret)
	alone := mustForwarder("http://w0:8080", nil) // no peer secret
	stranger := mustForwarder("http://w1:8080", []byte("another secret, 32 bytes at least"))
	now := time.Unix(1_800_000_000, 0)
	const method, uri = "GET", "/v1/kv/tenant/acme/project/demo/k?x=1"
	peer := w1.proof(method, uri, now)
	for _, tc := range []struct {
		name   string
		f      *forwarder
		header string
		at     time.Time
		want   writer.Origin
	}{
		{"OKPeer", w0, peer, now, writer.FromPeer},
		{"OKPeerWithinSkew", w0, peer, now.Add(peerProofSkew), writer.FromPeer},
		{"OKOwnCameBack", w1, peer, now, writer.FromSelf},
		{"OKOwnCameBackWithoutSecret", alone, alone.proof(method, uri, now), now, writer.FromSelf},
		{"OKOwnAmongOthers", w1, "junk, " + stranger.proof(method, uri, now) + "," + peer, now, writer.FromSelf},
		{"ErrClientsURL", w0, "http://w0:8080", now, writer.FromClient},
		{"ErrClientsURLOfPeer", w0, "http://w1:8080", now, writer.FromClient},
		{"ErrPeerWithoutSharedSecret", alone, peer, now, writer.FromClient},
		{"ErrOtherSecret", w0, stranger.proof(method, uri, now), now, writer.FromClient},
		{"ErrOtherURI", w0, w1.proof(method, uri+"2", now), now, writer.FromClient},
		{"ErrOtherMethod", w0, w1.proof("PUT", uri, now), now, writer.FromClient},
		{"ErrTooOld", w0, peer, now.Add(peerProofSkew + time.Second), writer.FromClient},
		{"ErrFromTheFuture", w0, peer, now.Add(-peerProofSkew - time.Second), writer.FromClient},
		{"ErrSenderChanged", w0, strings.Replace(peer, "w1", "w2", 1), now, writer.FromClient},
		{"ErrMACChanged", w0, peer[:len(peer)-2] + "AA", now, writer.FromClient},
		{"ErrTooLong", w0, strings.Repeat("x", maxForwardHeader) + "," + peer, now, writer.FromClient},
		{"ErrBeyondTheNewestProofs", w0, peer + strings.Repeat(", a 1 b", maxForwardProofs), now, writer.FromClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := tc.f.verify([]string{tc.header}, method, uri, tc.at); got != tc.want {
				t.Fatalf("origin %v; want %v", got, tc.want)
			}
		})
	}
	t.Run("OKCarriesWellFormedProofsBounded", func(t *testing.T) {
		h := []string{"junk", "a b"}
		for range 2 * maxForwardProofs {
			h = append(h, stranger.proof(method, uri, now))
		}
		h = append(h, "junk")
		_, carry := w0.verify([]string{strings.Join(h[:5], ","), strings.Join(h[5:], ",")}, method, uri, now)
		if n := len(strings.Split(carry, ",")); n != maxForwardProofs-1 || strings.Contains(carry, "junk") {
			t.Fatalf("carries %d proofs (%q); want the %d newest well-formed ones", n, carry, maxForwardProofs-1)
		}
	})
	if _, err := newForwarder("w", []byte("short"), nil); err == nil {
		t.Fatal("a 5-byte peer secret was accepted")
	}
}

// TestForwardsReuseConnections: 16 requests at a time forwarded to a peer
// keep a connection each to it and reuse them; with 2 idle connections a
// host (http.DefaultTransport), every forward beyond the second in flight
// dialled the peer and closed the connection after.
func TestForwardsReuseConnections(t *testing.T) {
	var dialled atomic.Int64
	peer := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // the forwards overlap
		w.WriteHeader(http.StatusNoContent)
	}))
	peer.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	peer.Start()
	defer peer.Close()
	f, err := newForwarder("http://w0:8080", []byte("a peer secret of 32 bytes at least"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.proxy(peer.URL)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, forwards = 16, 100
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range forwards {
				rec := httptest.NewRecorder()
				p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/kv/tenant/acme/project/demo/k", nil))
				if rec.Code != http.StatusNoContent {
					t.Errorf("forwarded: %d", rec.Code)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := dialled.Load(); n > 2*goroutines {
		t.Fatalf("%d connections for %d forwards of %d goroutines; want at most two a goroutine", n, goroutines*forwards, goroutines)
	}
}
