package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/writer"
)

// proofWriter routes every key to owner (its own URL when owner is
// empty), as writer.Route does by who sent the request, and records it.
type proofWriter struct {
	fakeWriter
	mu    sync.Mutex
	owner string
	from  []writer.Origin
}

func (w *proofWriter) Route(_ contract.Key, from writer.Origin) (bool, string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from = append(w.from, from)
	switch from {
	case writer.FromSelf:
		return false, "", &contract.Error{Code: contract.EForwardLoop, Message: "came back", RetryAfterSeconds: 1}
	case writer.FromPeer:
		return false, "", &contract.Error{Code: contract.EUnavailable, Message: "moving", RetryAfterSeconds: 1}
	}
	return false, w.owner, nil
}

func (w *proofWriter) origins() []writer.Origin {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.from)
}

// proofServer is a writer's API at its own URL, with the peer secret.
type proofServer struct {
	url string
	w   *proofWriter
}

func startProofServer(t *testing.T, secret []byte) *proofServer {
	t.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	ps := &proofServer{w: &proofWriter{}}
	var h http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	ps.url = hs.URL
	s, err := api.New(api.Config{Tokens: tokens, AdvertiseURL: hs.URL, PeerSecret: secret}, ps.w, stubLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h = s.Handler()
	return ps
}

// TestForwardProofs: writers sharing the peer secret forward once and
// refuse a second hop; a writer's own forward coming back is recognized,
// with or without the secret; a writer of another secret is a client to
// the others; without the secret, a request bounced between two writers
// stops when it reaches the first again. The owner always gets the
// client's request with the proofs, never what the client wrote in
// Eskv-Forwarded-By.
func TestForwardProofs(t *testing.T) {
	secret := []byte("a peer secret of 32 bytes at least")
	var mu sync.Mutex
	var got []string
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, strings.Join(r.Header.Values(api.ForwardedHeader), ","))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"key":"k"}`))
	}))
	defer owner.Close()
	get := func(base, forwardedBy string) (int, string) { return getForwardedBy(t, base, forwardedBy) }
	t.Run("ErrPeersForwardNotForwardedAgain", func(t *testing.T) {
		w0, w1 := startProofServer(t, secret), startProofServer(t, secret)
		w0.w.owner, w1.w.owner = owner.URL, w0.url
		if code, ec := get(w1.url, ""); code != http.StatusServiceUnavailable || ec != contract.EUnavailable {
			t.Fatalf("%d %s; want 503 partition_unavailable from w0", code, ec)
		}
		wantOrigins(t, w1.w, writer.FromClient)
		wantOrigins(t, w0.w, writer.FromPeer)
	})
	t.Run("ErrOwnForwardCameBack", func(t *testing.T) {
		for _, secret := range [][]byte{secret, nil} {
			w0 := startProofServer(t, secret)
			w0.w.owner = w0.url // its owner's address reaches it
			if code, ec := get(w0.url, ""); code != http.StatusServiceUnavailable || ec != contract.EForwardLoop {
				t.Fatalf("%d %s; want 503 forward_loop", code, ec)
			}
			wantOrigins(t, w0.w, writer.FromClient, writer.FromSelf)
		}
	})
	t.Run("OKClientsHeaderProvesNothing", func(t *testing.T) {
		w0 := startProofServer(t, secret)
		w0.w.owner = owner.URL
		for _, h := range []string{w0.url, "http://other-writer:8080", "x 1 y"} {
			mu.Lock()
			got = nil
			mu.Unlock()
			if code, _ := get(w0.url, h); code != http.StatusOK {
				t.Fatalf("%s: %q: %d; want 200 through the owner", api.ForwardedHeader, h, code)
			}
			mu.Lock()
			by := got
			mu.Unlock()
			if len(by) != 1 || strings.Contains(by[0], ",") || !strings.HasPrefix(by[0], strings.ReplaceAll(strings.ReplaceAll(w0.url, ":", "%3A"), "/", "%2F")+" ") {
				t.Fatalf("%q: the owner got %s: %q; want w0's proof alone", h, api.ForwardedHeader, by)
			}
		}
		wantOrigins(t, w0.w, writer.FromClient, writer.FromClient, writer.FromClient)
	})
	t.Run("OKOtherSecretIsAClient", func(t *testing.T) {
		w0, w1 := startProofServer(t, secret), startProofServer(t, []byte("another secret, 32 bytes at least"))
		w0.w.owner, w1.w.owner = owner.URL, w0.url
		if code, _ := get(w1.url, ""); code != http.StatusOK {
			t.Fatalf("%d; want 200 through w0 and the owner", code)
		}
		wantOrigins(t, w0.w, writer.FromClient)
	})
	t.Run("ErrBounceWithoutSecretStopsAtTheFirst", func(t *testing.T) {
		w0, w1 := startProofServer(t, nil), startProofServer(t, nil)
		w0.w.owner, w1.w.owner = w1.url, w0.url // each thinks the other owns the key
		if code, ec := get(w0.url, ""); code != http.StatusServiceUnavailable || ec != contract.EForwardLoop {
			t.Fatalf("%d %s; want 503 forward_loop", code, ec)
		}
		wantOrigins(t, w0.w, writer.FromClient, writer.FromSelf)
		wantOrigins(t, w1.w, writer.FromClient)
	})
}

// getForwardedBy GETs a key from the writer at base with the dev token
// and, unless empty, Eskv-Forwarded-By: forwardedBy; it returns the
// status and the error code.
func getForwardedBy(t *testing.T, base, forwardedBy string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v1/kv/tenant/acme/project/demo/k", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if forwardedBy != "" {
		req.Header.Set(api.ForwardedHeader, forwardedBy)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e contract.ErrorBody
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// wantOrigins checks whom w's Route calls were told the requests came
// from.
func wantOrigins(t *testing.T, w *proofWriter, origins ...writer.Origin) {
	t.Helper()
	if got := w.origins(); !slices.Equal(got, origins) {
		t.Fatalf("routed as from %v; want %v", got, origins)
	}
}
