package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestTwoWritersForwardOverTLS: two writers serving HTTPS
// (ESKV_TLS_CERT_FILE, ESKV_TLS_KEY_FILE: certificates of a private CA)
// and trusting that CA for their forwards (ESKV_TLS_CA_FILE) advertise
// https:// URLs, and answer every key (16 keys over all 4 partitions)
// through either writer, the one that does not own a key forwarding over
// TLS to the one that does; the Go client reaches them with WithCAFile;
// a watch streams over HTTPS and HTTP/2; plain HTTP to them is refused;
// the status page's session cookie is Secure.
func TestTwoWritersForwardOverTLS(t *testing.T) {
	t.Parallel()
	pki := testenv.MustPKI(t)
	ps := &writersStack{stack: &stack{tb: t, broker: testenv.MustBroker(t, partitions), pg: testenv.MustPostgresDB(t)}}
	ps.store = projection.New(ps.pg.Pool)
	common := procEnv(ps.stack)
	startProc(t, "projector", append(common, "ESKV_PROJECTOR_ADDR="+freeAddr(t))...)
	dir := t.TempDir()
	for i := range 2 {
		addr := freeAddr(t)
		for len(ps.urls) > 0 && ps.urls[0] == "https://"+addr {
			addr = freeAddr(t)
		}
		cert, key := pki.MustServerCert(t, dir, fmt.Sprintf("writer-%d", i), int64(20+i))
		ps.writers = append(ps.writers, startProc(t, "writer", append(common,
			"ESKV_HTTP_ADDR="+addr, "ESKV_DEV_TOKEN="+devToken, fmt.Sprintf("ESKV_WRITER_ID=tls-writer-%d", i),
			"ESKV_TLS_CERT_FILE="+cert, "ESKV_TLS_KEY_FILE="+key, "ESKV_TLS_CA_FILE="+pki.CAFile)...))
		ps.urls = append(ps.urls, "https://"+addr)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: pki.Pool, MinVersion: tls.VersionTLS12}}}
	for _, u := range ps.urls {
		testenv.WaitFor(t, 60*time.Second, u+" healthy over HTTPS", func() bool {
			resp, err := hc.Get(u + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	testenv.WaitFor(t, 60*time.Second, "every partition owned, by both writers, at https:// URLs", func() bool {
		owners, err := ps.store.Owners(context.Background())
		ids := map[string]bool{}
		for _, o := range owners {
			ids[o.ID] = strings.HasPrefix(o.Addr, "https://")
		}
		return err == nil && len(owners) == partitions && len(ids) == 2 && ids["tls-writer-0"] && ids["tls-writer-1"]
	})

	clients := []*client.Client{
		client.New(ps.urls[0], devToken, client.WithCAFile(pki.CAFile)),
		client.New(ps.urls[1], devToken, client.WithCAFile(pki.CAFile)),
	}
	ctx := t.Context()
	for i := range forwardKeys {
		k := forwardKey(i)
		testenv.WaitFor(t, 30*time.Second, "PUT "+k+" through writer 0", func() bool {
			_, err := clients[0].Put(ctx, client.PutRequest{Key: k, Value: []byte(`"over-tls"`)})
			return err == nil
		})
		for w, c := range clients {
			e, err := c.Get(ctx, k)
			if err != nil || string(e.Value) != `"over-tls"` {
				t.Fatalf("GET %s (partition %d) through writer %d: %+v, %v", k, partitionOf(t, k), w, e, err)
			}
		}
	}
	// A watch streams over HTTPS (HTTP/2, which the Go client negotiates).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ev, err := range clients[1].Watch(wctx, client.WatchOptions{Key: forwardKey(0), FromVersion: 1}) {
		if err != nil || ev.Version != 1 || ev.Key != forwardKey(0) {
			t.Fatalf("watch over HTTPS: %+v, %v; want version 1 of %s", ev, err, forwardKey(0))
		}
		break
	}
	if resp, err := hc.Get(ps.urls[1] + "/healthz"); err != nil || resp.Proto != "HTTP/2.0" {
		t.Fatalf("GET /healthz over HTTPS: %v, %v; want HTTP/2.0", resp, err)
	} else {
		resp.Body.Close()
	}
	for w, u := range ps.urls {
		if n := scrapedMetricWith(t, hc, u, "eskv_writer_forward_loops_total"); n != 0 {
			t.Errorf("writer %d counted %v forward loops, want 0", w, n)
		}
		if exp := scrapedMetricWith(t, hc, u, "eskv_tls_cert_not_after_timestamp_seconds"); exp < float64(time.Now().Unix()) {
			t.Errorf("writer %d eskv_tls_cert_not_after_timestamp_seconds %v, want the certificate's expiry, in the future", w, exp)
		}
	}

	plain := "http://" + strings.TrimPrefix(ps.urls[0], "https://")
	if code, body := devCall("GET", plain+"/v1/kv/"+forwardKey(0), ""); code != http.StatusBadRequest || !strings.Contains(body, "HTTPS") {
		t.Errorf("plain HTTP to an HTTPS writer: %d %s, want 400 saying HTTPS", code, body)
	}

	noFollow := *hc
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(ps.urls[1]+"/ui/login", url.Values{"token": {devToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var secure bool
	for _, ck := range resp.Cookies() {
		secure = secure || ck.Secure
	}
	if len(resp.Cookies()) == 0 || !secure {
		t.Errorf("status page login over HTTPS: cookies %v, want a Secure one", resp.Cookies())
	}
}
