package stack_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestMustRun: the stack answers with its tokens' rights and serves its
// metrics, on as many partitions as asked.
func TestMustRun(t *testing.T) {
	s := stack.MustRun(t, stack.Partitions(3), stack.WithoutProjector())
	if s.Broker.Topics.Partitions != 3 {
		t.Fatalf("%d partitions; want 3", s.Broker.Topics.Partitions)
	}
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"OKDevWrites", "PUT", "/v1/kv/tenant/acme/project/p/k", stack.DevToken, http.StatusOK},
		{"OKAcmeWrites", "PUT", "/v1/kv/tenant/acme/project/p/k", stack.AcmeToken, http.StatusOK},
		{"OKReaderReads", "GET", "/v1/kv/tenant/acme/project/p/k", stack.ReaderToken, http.StatusOK},
		{"ErrReaderWrites", "PUT", "/v1/kv/tenant/acme/project/p/k", stack.ReaderToken, http.StatusForbidden},
		{"ErrAcmeWritesOtherTenant", "PUT", "/v1/kv/tenant/other/project/p/k", stack.AcmeToken, http.StatusForbidden},
		{"OKMetrics", "GET", "/metrics", "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(`{"value":1}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s: %d; want %d", tc.method, tc.path, resp.StatusCode, tc.status)
			}
		})
	}
}
