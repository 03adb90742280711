package kvcli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// waiters is eskv_writer_waiters on the stack at url.
func waiters(tb testing.TB, url string) string {
	tb.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+stack.DevToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "eskv_writer_waiters "); ok {
			return v
		}
	}
	return ""
}

// TestPopWaitCLI: queue pop --wait and lpop --wait are held by the
// server until a push, then print it; a wait that ends first exits as an
// empty pop does; --wait beyond 30s is a usage error.
func TestPopWaitCLI(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	q, l := scope+"waits/q", scope+"waits/l"

	t.Run("OKQueuePopAnsweredOnPush", func(t *testing.T) {
		b := k.start(t, nil, "queue", "pop", q, "--wait", "25s", "-o", "value")
		stack.WaitFor(t, "kvctl's pop to wait", func() bool { return waiters(t, url) == "1" })
		if _, err := c.QPush(ctx, client.QPushRequest{Key: q, Data: json.RawMessage(`{"job":7}`)}); err != nil {
			t.Fatal(err)
		}
		if r := b.wait(t); r.code != 0 || strings.TrimSpace(r.stdout) != `{"job":7}` {
			t.Fatalf("queue pop --wait: %+v", r)
		}
	})
	t.Run("OKLPopAnsweredOnPush", func(t *testing.T) {
		b := k.start(t, nil, "lpop", l, "--wait", "25s", "-o", "value")
		stack.WaitFor(t, "kvctl's lpop to wait", func() bool { return waiters(t, url) == "1" })
		if _, err := c.RPush(ctx, client.PushRequest{Key: l, Value: json.RawMessage(`"v"`)}); err != nil {
			t.Fatal(err)
		}
		if r := b.wait(t); r.code != 0 || strings.TrimSpace(r.stdout) != "v" {
			t.Fatalf("lpop --wait: %+v", r)
		}
	})
	t.Run("ErrEmptyAfterWait", func(t *testing.T) {
		start := time.Now()
		r := k.run(t, "", nil, "queue", "pop", q, "--wait", "1s")
		if r.code != exitUnavailable || time.Since(start) < time.Second {
			t.Fatalf("queue pop --wait 1s of an empty queue: %+v after %v, want exit %d after 1s", r, time.Since(start), exitUnavailable)
		}
		if r := k.run(t, "", nil, "rpop", l, "--wait", "1s"); r.code != exitFailed {
			t.Fatalf("rpop --wait 1s of an empty list: %+v, want exit %d", r, exitFailed)
		}
	})
	t.Run("ErrWaitTooLong", func(t *testing.T) {
		if r := k.run(t, "", nil, "queue", "pop", q, "--wait", "31s"); r.code != exitUsage || !strings.Contains(r.stderr, "--wait") {
			t.Fatalf("queue pop --wait 31s: %+v, want a usage error naming --wait", r)
		}
	})
}
