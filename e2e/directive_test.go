package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// TestDirective: a write's directive (the principal's <agent>:<directive>,
// else a service account's Eskv-Directive header) reaches its change
// event, its INFO write log line and a conflict's WARN line (with the
// agent), and the audit trail's rows (events and conflicts), which still
// verify; a bad directive is refused with 400 naming the header, and
// nothing is written.
func TestDirective(t *testing.T) {
	t.Parallel()
	var logs testenv.Buffer
	s := mustStack(t, inproc.Logs(&logs))
	at := mustAuditTrail(t)
	at.startAuditor(t, s)
	const (
		svcKey   = "tenant/acme/project/dir/svc"
		agentKey = "tenant/acme/project/dir/agent"
		badKey   = "tenant/acme/project/dir/bad"
	)
	steps := []struct {
		name, method, key, token, directive, body string
		status                                    int
	}{
		{"ServiceAccountNamesOne", "PUT", svcKey, inproc.AcmeToken, "reindex.nightly", `{"value":1,"requestId":"d-1"}`, 200},
		{"AgentFromPrincipal", "PUT", agentKey, inproc.AgentToken, "", `{"value":1}`, 200},
		{"AgentConflict", "PUT", agentKey, inproc.AgentToken, "", `{"value":2,"expectedVersion":7}`, 409},
		{"DeleteWithoutBody", "DELETE", svcKey, inproc.AcmeToken, "cleanup", "", 200},
		{"ErrBadCharacters", "PUT", badKey, inproc.AcmeToken, "two words", `{"value":1}`, 400},
		{"ErrTooLong", "PUT", badKey, inproc.AcmeToken, strings.Repeat("d", contract.MaxDirectiveLen+1), `{"value":1}`, 400},
		{"ErrOtherThanPrincipals", "PUT", badKey, inproc.AgentToken, "other", `{"value":1}`, 400},
		{"ErrBadOnDelete", "DELETE", agentKey, inproc.AgentToken, "a:b", "", 400},
	}
	for _, st := range steps {
		r := doDirective(t, s, st.method, st.key, st.token, st.directive, st.body)
		if r.Status != st.status {
			t.Fatalf("%s: %d %s", st.name, r.Status, r.Body)
		}
		if st.status == http.StatusBadRequest {
			if e := r.errorBody(t); e.Code != contract.EInvalid || e.Field != contract.DirectiveHeader {
				t.Fatalf("%s: %+v, want invalid naming %s", st.name, e, contract.DirectiveHeader)
			}
		}
	}
	t.Run("OKNothingWrittenOnBadDirective", func(t *testing.T) {
		if r := s.do("GET", "/v1/kv/"+badKey, devToken, nil); r.Status != http.StatusNotFound {
			t.Fatalf("the refused key: %d %s", r.Status, r.Body)
		}
		if r := s.do("GET", "/v1/kv/"+agentKey, devToken, nil); r.Status != http.StatusOK || r.entry(t).Version != 1 {
			t.Fatalf("the agent's key after a refused delete: %d %s", r.Status, r.Body)
		}
	})
	want := map[string]string{svcKey + "@1": "reindex.nightly", svcKey + "@2": "cleanup", agentKey + "@1": "sync-onedrive"}
	t.Run("OKEvents", func(t *testing.T) {
		got := map[string]string{}
		for _, e := range s.readLog(t.Context()) {
			if strings.HasPrefix(e.Key, "tenant/acme/project/dir/") {
				got[e.Key+"@"+strconv.FormatInt(e.Version, 10)] = e.Directive
			}
		}
		if !maps.Equal(got, want) {
			t.Fatalf("events' directives %v, want %v", got, want)
		}
	})
	t.Run("OKLogLines", func(t *testing.T) {
		lines := logLines(t, logs.String())
		wantLine(t, lines, map[string]any{"msg": "write", "key": svcKey, "directive": "reindex.nightly", "agent": "acme-svc", "principal": "acme-svc", "requestId": "d-1"})
		wantLine(t, lines, map[string]any{"msg": "write", "key": agentKey, "directive": "sync-onedrive", "agent": "acme-harvester", "principal": inproc.AgentPrincipal})
		wantLine(t, lines, map[string]any{"msg": "version conflict", "key": agentKey, "directive": "sync-onedrive", "agent": "acme-harvester"})
	})
	t.Run("OKAuditRows", func(t *testing.T) {
		waitAudited(t, s, 60*time.Second)
		got := map[string]string{}
		rs, err := at.ch.Conn.Query(context.Background(), "SELECT key, version, directive FROM audit_events FINAL WHERE key LIKE 'tenant/acme/project/dir/%'")
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		for rs.Next() {
			var (
				k, d string
				v    int64
			)
			if err := rs.Scan(&k, &v, &d); err != nil {
				t.Fatal(err)
			}
			got[k+"@"+strconv.FormatInt(v, 10)] = d
		}
		if !maps.Equal(got, want) {
			t.Fatalf("audit rows' directives %v, want %v", got, want)
		}
		if n := at.count(t, "SELECT count() FROM audit_conflicts WHERE key = ? AND directive = 'sync-onedrive'", agentKey); n != 1 {
			t.Fatalf("%d conflict rows of the agent with its directive, want 1", n)
		}
		if rep := at.verify(t, s); len(rep.Discrepancies) > 0 {
			t.Fatalf("verify: %v", rep.Discrepancies)
		}
	})
}

// doDirective sends a request with directive in Eskv-Directive (none
// when "").
func doDirective(t *testing.T, s *stack, method, key, token, directive, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.url+"/v1/kv/"+key, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if directive != "" {
		req.Header.Set(contract.DirectiveHeader, directive)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// logLines decodes the JSON log lines of out.
func logLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(out) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			lines = append(lines, m)
		}
	}
	return lines
}

// wantLine fails unless a line has every attribute of want.
func wantLine(t *testing.T, lines []map[string]any, want map[string]any) {
	t.Helper()
	for _, l := range lines {
		ok := true
		for k, v := range want {
			ok = ok && l[k] == v
		}
		if ok {
			return
		}
	}
	t.Fatalf("no log line has %v", want)
}
