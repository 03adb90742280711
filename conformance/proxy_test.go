package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// proxied is an in-process stack behind a proxy and its control API.
func proxied(t *testing.T) (p *Proxy, url, control string) {
	st := inproc.MustRun(t)
	p, err := NewProxy([]string{st.URL})
	if err != nil {
		t.Fatal(err)
	}
	return p, serve(t, p), serve(t, Control(p, func(int) (string, error) { return "", errors.New("no kill here") }))
}

// put PUTs body at key through url with the dev token: the answer, or
// the transport error.
func put(t *testing.T, url, key, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url+"/v1/kv/"+key, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+inproc.DevToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestDropNextResponse: a refused request goes through while armed; the
// next one is dropped after it was applied (the key is at version 1), its
// client getting a transport error; the repeat with the same requestId is
// answered (disarmed), a replay at version 1.
func TestDropNextResponse(t *testing.T) {
	t.Parallel()
	_, url, control := proxied(t)
	key := "tenant/acme/project/conf/k"
	var armed map[string]bool
	postControl(t, control+"/drop-next-response?path=/v1/kv/"+key, &armed)
	if !armed["armed"] {
		t.Fatalf("control answered %v", armed)
	}
	if resp, err := put(t, url, key, `{"value":`); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a refused request while armed: %v, %v; want its 400 through", resp, err)
	}
	body := `{"value":{"n":1},"requestId":"drop-1"}`
	if resp, err := put(t, url, key, body); err == nil {
		t.Fatalf("the armed request was answered: %s", resp.Status)
	}
	c := client.New(url, inproc.DevToken)
	e, err := c.Get(context.Background(), key)
	if err != nil || e.Version != 1 {
		t.Fatalf("after the dropped answer: %+v, %v; want the write applied at version 1", e, err)
	}
	resp, err := put(t, url, key, body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Eskv-Replayed") != "true" {
		t.Fatalf("the repeat: %v, %v; want 200 Eskv-Replayed: true (disarmed after one)", resp, err)
	}
	if e, err := c.Get(context.Background(), key); err != nil || e.Version != 1 {
		t.Fatalf("after the replay: %+v, %v; want version 1", e, err)
	}
}

// TestClientRetriesDroppedAnswer: the Go client retries a put with a
// requestId after the dropped answer (one retry, answered as a replay,
// one version in history); without a requestId it returns the transport
// error (the write was applied: it may not repeat it).
func TestClientRetriesDroppedAnswer(t *testing.T) {
	t.Parallel()
	p, url, _ := proxied(t)
	ctx := context.Background()
	retries := 0
	c := client.New(url, inproc.DevToken, client.WithRetryPolicy(client.RetryPolicy{OnRetry: func(error, int, time.Duration) { retries++ }}))
	key := "tenant/acme/project/conf/with-id"
	p.DropNext("/v1/kv/" + key)
	res, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`{"n":1}`), RequestID: "retry-1"})
	if err != nil || !res.Replayed || res.Entry.Version != 1 || retries != 1 {
		t.Fatalf("put with a requestId: %+v, %v after %d retries; want a replay of version 1 after 1", res, err, retries)
	}
	n := 0
	for _, err := range c.History(ctx, key, client.HistoryOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("history holds %d versions, want 1", n)
	}
	key = "tenant/acme/project/conf/without-id"
	p.DropNext("/v1/kv/" + key)
	_, err = c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`{"n":1}`)})
	var ne *client.NetworkError
	if !errors.As(err, &ne) {
		t.Fatalf("put without a requestId: %v, want the *client.NetworkError", err)
	}
	if e, err := c.Get(ctx, key); err != nil || e.Version != 1 {
		t.Fatalf("after it: %+v, %v; want the write applied once", e, err)
	}
}

// TestControl: kill-writer names the writer the proxy sends to, which is
// the first one up; a drop-next-response without a path is refused.
func TestControl(t *testing.T) {
	p, err := NewProxy([]string{"http://127.0.0.1:1", "http://127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	control := serve(t, Control(p, func(i int) (string, error) { p.SetUp(i, false); return p.Name(i), nil }))
	for _, want := range []string{"w0", "w1"} {
		var got map[string]string
		postControl(t, control+"/kill-writer", &got)
		if got["killed"] != want {
			t.Fatalf("kill-writer answered %v, want killed %s", got, want)
		}
	}
	if resp, err := http.Post(control+"/kill-writer", "", nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("kill-writer with none up: %v, %v; want 503", resp, err)
	}
	p.SetUp(0, true)
	if p.Current() != 0 {
		t.Fatalf("current %d after w0 came back, want 0", p.Current())
	}
	resp, err := http.Post(control+"/drop-next-response", "", nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("drop-next-response without path: %v, %v; want 400", resp, err)
	}
	defer resp.Body.Close()
	var body contract.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error.Code != contract.EInvalid || body.Error.Field != "path" {
		t.Fatalf("drop-next-response without path answered %+v, %v; want code invalid, field path", body, err)
	}
}

// TestLargeBodyRefusedThroughProxy: a request announcing a body far over
// the writer's limit and asking first (Expect: 100-continue, as the Go and
// Python clients do above 1 MiB) is answered 413 through the proxy before
// any body is sent: the proxy passes the question on to the writer, which
// refuses from the head, instead of saying 100 Continue itself and then
// forwarding a body the writer refuses and cuts off (a reset in place of
// the 413 for a client that does not read while it sends: Python's).
func TestLargeBodyRefusedThroughProxy(t *testing.T) {
	t.Parallel()
	_, url, _ := proxied(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "PUT /v1/kv/tenant/acme/project/conf/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", inproc.DevToken, 20<<20)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 413") {
		t.Fatalf("first answer to a 20 MiB body asked first: %q, %v; want HTTP/1.1 413 before the body", line, err)
	}
}
