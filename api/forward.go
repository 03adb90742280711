package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/writer"
)

// ForwardedHeader marks a request one writer forwarded to another. Its
// value is a list of proofs, one per writer the request went through,
// oldest first, comma-separated; each is "<sender> <unix seconds> <mac>":
// the sender's advertise URL (query-escaped), when it sent the request,
// and HMAC-SHA256 over the sender, the time, the method and the request
// URI, base64url, under the forwarding key.
//
// The forwarding key is derived from the peer secret the writers of a
// deployment share (Config.PeerSecret), or, without one, drawn at random
// by each process. So a writer verifies its peers' proofs (with the
// secret) and always its own: a request another writer forwarded
// (writer.FromPeer) is never forwarded again, and one it forwarded itself
// that came back (writer.FromSelf) answers forward_loop. A proof that
// does not verify proves nothing: the request is a client's
// (writer.FromClient). The server takes the header off every request
// before any handler runs (Server.serve), so no handler ever reads what
// a client wrote there; the proofs it could not verify are carried on, unread,
// when the request is forwarded, so that their own writer recognizes them
// if the request comes back (without a shared secret, that is how a
// request bounced between two writers stops after one round).
//
// Why an HMAC proof and not the secret itself in a header: a forward goes
// in plain HTTP to whatever address writer_owners names for the owner,
// which under the misconfigurations forward_loop is about may be another
// process; a bearer secret would be handed to it, and to anyone reading
// the traffic, for good. A proof leaks no secret, is bound to one method
// and request URI, and is taken for peerProofSkew only: replaying it can
// only mark that one request as forwarded (503 for it, at worst). It
// costs one HMAC per hop.
const ForwardedHeader = "Eskv-Forwarded-By"

// MinPeerSecretBytes is the shortest Config.PeerSecret accepted.
const MinPeerSecretBytes = 32

const (
	// peerProofSkew is how far a proof's time may be from the receiver's
	// clock (both ways): the writers' clocks must agree within it.
	peerProofSkew = 5 * time.Minute
	// maxForwardProofs bounds the proofs a request carries (the newest
	// kept) and maxForwardHeader the header's bytes (beyond it the
	// header is dropped whole): a client cannot make a writer verify more.
	maxForwardProofs = 8
	maxForwardHeader = 4096
	proofLabel       = "eskv-forward-v1"
)

// forwarder proxies requests to the writer that owns the key's partition
// and proves to it that they come from a writer.
type forwarder struct {
	self string
	// key signs and verifies proofs; shared says it is the peer
	// secret's, so that other writers' proofs verify too.
	key     []byte
	shared  bool
	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy
	// client sends the batch gets a writer splits across owners
	// (batchget.go); the request's context bounds each. transport is its
	// and the proxies' (trusting Config.ForwardTLS's roots).
	client    *http.Client
	transport http.RoundTripper
}

// newForwarder returns the forwarder of a writer answering at self, with
// the peer secret (nil: a random key of this process), reaching other
// writers over HTTPS with tlsCfg (nil: the system's roots).
func newForwarder(self string, secret []byte, tlsCfg *tls.Config) (*forwarder, error) {
	// DefaultTransport's settings, but keeping up to 256 idle connections
	// to each peer (no limit over all of them: the peers are the other
	// writers) instead of 2: with 2, each forward beyond the second in
	// flight to a peer dialled it (and, with ForwardTLS, shook hands) and
	// closed the connection after.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 0, 256
	if tlsCfg != nil {
		t.TLSClientConfig = tlsCfg.Clone()
	}
	f := &forwarder{self: self, proxies: make(map[string]*httputil.ReverseProxy), shared: secret != nil, transport: t}
	f.client = &http.Client{Transport: f.transport}
	if secret == nil {
		secret = make([]byte, MinPeerSecretBytes)
		_, _ = rand.Read(secret)
	}
	if len(secret) < MinPeerSecretBytes {
		return nil, errors.New("api: the peer secret (PeerSecret) must be at least 32 bytes")
	}
	f.key = derive(secret, "eskv-forward-proof")
	return f, nil
}

// mac is a proof's MAC.
func (f *forwarder) mac(sender, unix, method, uri string) []byte {
	m := hmac.New(sha256.New, f.key)
	for _, s := range []string{proofLabel, sender, unix, method, uri} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// proof is this writer's proof for a request, sent at now.
func (f *forwarder) proof(method, uri string, now time.Time) string {
	unix := strconv.FormatInt(now.Unix(), 10)
	return url.QueryEscape(f.self) + " " + unix + " " + base64.RawURLEncoding.EncodeToString(f.mac(f.self, unix, method, uri))
}

// verify reads a request's ForwardedHeader values: who sent the request,
// as far as its proofs prove it, and the well-formed proofs to carry on
// if it is forwarded (comma-separated, at most maxForwardProofs-1 of the
// newest, so that ours fits after them).
func (f *forwarder) verify(values []string, method, uri string, now time.Time) (writer.Origin, string) {
	raw := strings.Join(values, ",")
	if len(raw) > maxForwardHeader {
		return writer.FromClient, ""
	}
	proofs := strings.Split(raw, ",")
	if len(proofs) > maxForwardProofs {
		proofs = proofs[len(proofs)-maxForwardProofs:]
	}
	from, carry := writer.FromClient, make([]string, 0, len(proofs))
	for _, p := range proofs {
		pr, ok := parseProof(strings.TrimSpace(p))
		if !ok {
			continue
		}
		carry = append(carry, strings.TrimSpace(p))
		if !f.verifies(pr, method, uri, now) {
			continue
		}
		switch {
		case pr.sender == f.self:
			from = writer.FromSelf
		case f.shared && from == writer.FromClient:
			from = writer.FromPeer
		}
	}
	if len(carry) >= maxForwardProofs {
		carry = carry[len(carry)-maxForwardProofs+1:]
	}
	return from, strings.Join(carry, ",")
}

// proof is one writer's proof that it forwarded a request: its name, the
// time (unix seconds) and the MAC over both and the request.
type proof struct {
	sender, unix string
	mac          []byte
}

// parseProof splits a proof into its sender, time and MAC.
func parseProof(p string) (proof, bool) {
	esc, rest, ok1 := strings.Cut(p, " ")
	unix, enc, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return proof{}, false
	}
	sender, err := url.QueryUnescape(esc)
	if err != nil {
		return proof{}, false
	}
	mac, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(mac) != sha256.Size {
		return proof{}, false
	}
	return proof{sender: sender, unix: unix, mac: mac}, true
}

// verifies reports whether a proof's MAC holds under our key and its time
// is within peerProofSkew of now.
func (f *forwarder) verifies(pr proof, method, uri string, now time.Time) bool {
	sender, unix, mac := pr.sender, pr.unix, pr.mac
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > peerProofSkew || d < -peerProofSkew {
		return false
	}
	return hmac.Equal(mac, f.mac(sender, unix, method, uri))
}

func (f *forwarder) proxy(target string) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.proxies[target]; ok {
		return p, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = f.transport
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			_, _ = w.Write([]byte(`{"error":{"code":"partition_unavailable","message":"the writer owning this key did not answer; retry","retryAfterSeconds":1}}`))
			return
		}
		// The owner may have been handed the write (the request was
		// sent, or partly): its outcome is unknown. The body was
		// streamed to the owner unread, so the requestId it carried is
		// the client's to repeat.
		_, _ = w.Write([]byte(`{"error":{"code":"outcome_unknown","message":"the writer owning this key did not answer: the write may have been applied; retry it with the requestId it carried","retryAfterSeconds":1}}`))
	}
	f.proxies[target] = p
	return p, nil
}

// forward answers the request through the key's owner when another writer
// owns it. It reports whether it did. The request carries the proofs it
// came with that we could not verify, and ours (ForwardedHeader), so the
// writer receiving it refuses to forward it again and each writer
// recognizes its own forward coming back (writer.Route).
func (s *Server) forward(c echo.Context, k contract.Key) (bool, error) {
	from, carry := originOf(c)
	local, owner, err := s.w.Route(k, from)
	if local {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	p, err := s.fwd.proxy(owner)
	if err != nil {
		return true, contract.Errorf(contract.EInternal, "owner address %q: %v", owner, err)
	}
	r := c.Request()
	proof := s.fwd.proof(r.Method, r.URL.RequestURI(), s.now())
	if carry != "" {
		proof = carry + "," + proof
	}
	r.Header.Set(ForwardedHeader, proof)
	p.ServeHTTP(c.Response(), r)
	return true, nil
}
