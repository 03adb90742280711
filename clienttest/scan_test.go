package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestScan runs filtered listings (GET /v1/kv with field, op and value)
// through the whole stack: writer, projector, Postgres and the API.
func TestScan(t *testing.T) {
	t.Parallel()
	base := stack.MustStart(t)
	c := client.New(base, stack.DevToken)
	ctx := t.Context()
	const jobs = scope + "jobs/"
	t0 := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	states := []string{"queued", "running", "done", "failed"}
	const n = 12
	for i := range n {
		v := fmt.Sprintf(`{"state":%q,"attempt":%d,"updated_at":%q,"urgent":%v,"label":"%d"}`,
			states[i%4], i, t0.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i%3 == 0, i%2)
		if _, err := c.Put(ctx, client.PutRequest{Key: fmt.Sprintf("%s%02d", jobs, i), Value: json.RawMessage(v)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"list", "text", "nested"} {
		v := map[string]string{"list": `["done"]`, "text": `"done"`, "nested": `{"job":{"state":"done"}}`}[k]
		if _, err := c.Put(ctx, client.PutRequest{Key: jobs + k, Value: json.RawMessage(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, jobs+"00", client.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	queued := client.ScanOptions{Prefix: jobs, Filter: client.Filter{Field: "state", Op: contract.FilterEq, Value: "queued"}}
	stack.WaitFor(t, "the projection to hold every job", func() bool {
		page, err := c.Scan(ctx, queued)
		return err == nil && len(page.Items) == 2 && page.Items[0].Key == jobs+"04" // 00 deleted
	})

	keys := func(t *testing.T, o client.ScanOptions) []string {
		t.Helper()
		got := []string{}
		for e, err := range c.ScanAll(ctx, o) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, strings.TrimPrefix(e.Key, jobs))
		}
		return got
	}
	for _, tt := range []struct {
		name string
		f    client.Filter
		want string
	}{
		{"StringEq", client.Filter{Field: "state", Op: contract.FilterEq, Value: "done"}, "02 06 10"},
		{"StringNe", client.Filter{Field: "state", Op: contract.FilterNe, Value: "done"}, "01 03 04 05 07 08 09 11"},
		{"TimestampLt", client.Filter{Field: "updated_at", Op: contract.FilterLt, Value: t0.Add(3 * time.Minute).Format(time.RFC3339)}, "01 02"},
		{"TimestampGte", client.Filter{Field: "updated_at", Op: contract.FilterGte, Value: t0.Add(10 * time.Minute).Format(time.RFC3339)}, "10 11"},
		{"NumberGt", client.Filter{Field: "attempt", Op: contract.FilterGt, Value: 8.5}, "09 10 11"},
		{"NumberLte", client.Filter{Field: "attempt", Op: contract.FilterLte, Value: json.Number("2")}, "01 02"},
		{"Bool", client.Filter{Field: "urgent", Op: contract.FilterEq, Value: true}, "03 06 09"},
		{"StringIsNotNumber", client.Filter{Field: "label", Op: contract.FilterEq, Value: 1}, ""},
		{"NumberIsNotString", client.Filter{Field: "label", Op: contract.FilterEq, Value: "1"}, "01 03 05 07 09 11"},
		{"RawLiteral", client.Filter{Field: "attempt", Op: contract.FilterEq, Value: json.RawMessage(`7`)}, "07"},
		{"MissingField", client.Filter{Field: "owner", Op: contract.FilterNe, Value: "x"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := keys(t, client.ScanOptions{Prefix: jobs, Filter: tt.f, Limit: 2})
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}

	t.Run("PagesWithCursor", func(t *testing.T) {
		o := client.ScanOptions{Prefix: jobs, Filter: client.Filter{Field: "attempt", Op: contract.FilterGte, Value: 1}, Limit: 4}
		page, err := c.Scan(ctx, o)
		if err != nil || len(page.Items) != 4 || !page.Truncated || page.NextCursor == "" || page.Items[3].Key != jobs+"04" {
			t.Fatalf("first page: %+v, %v", page, err)
		}
		o.Cursor = page.NextCursor
		page, err = c.Scan(ctx, o)
		if err != nil || len(page.Items) != 4 || page.Items[0].Key != jobs+"05" {
			t.Fatalf("second page: %+v, %v", page, err)
		}
		if got := keys(t, client.ScanOptions{Prefix: jobs, Filter: o.Filter, Limit: 4, Cursor: o.Cursor}); len(got) != 7 || got[0] != "05" {
			t.Errorf("ScanAll from the cursor: %v", got)
		}
	})

	// The value parameter as written by hand: a JSON literal, or else a
	// plain string.
	for _, tt := range []struct {
		name, query, want string
	}{
		{"PlainString", "field=state&op=eq&value=done", "02 06 10"},
		{"QuotedString", "field=label&op=eq&value=%221%22", "01 03 05 07 09 11"},
		{"Number", "field=attempt&op=lt&value=2", "01"},
		{"NumberIsNotString", "field=label&op=eq&value=1", ""},
		{"Bool", "field=urgent&op=eq&value=false", "01 02 04 05 07 08 10 11"},
		{"NotJSONIsString", "field=state&op=gt&value=r", "01 05 09"},
		{"EmptyString", "field=state&op=eq&value=", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := rawList(t, base, stack.DevToken, "prefix="+url.QueryEscape(jobs)+"&"+tt.query)
			var page client.ListPage
			if status != http.StatusOK || json.Unmarshal(body, &page) != nil {
				t.Fatalf("%d %s", status, body)
			}
			got := []string{}
			for _, e := range page.Items {
				got = append(got, strings.TrimPrefix(e.Key, jobs))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %v, want %s", got, tt.want)
			}
		})
	}

	for _, tt := range []struct {
		name, token, query string
		status             int
		code, field        string
	}{
		{"ErrFieldAlone", stack.DevToken, "field=state", 400, contract.EInvalid, "op"},
		{"ErrNoValue", stack.DevToken, "field=state&op=eq", 400, contract.EInvalid, "value"},
		{"ErrNoField", stack.DevToken, "op=eq&value=done", 400, contract.EInvalid, "field"},
		{"ErrValueAlone", stack.DevToken, "value=done", 400, contract.EInvalid, "field"},
		{"ErrEmptyField", stack.DevToken, "field=&op=eq&value=done", 400, contract.EInvalid, "field"},
		{"ErrFieldTwice", stack.DevToken, "field=state&field=x&op=eq&value=done", 400, contract.EInvalid, "field"},
		{"ErrUnknownOp", stack.DevToken, "field=state&op=like&value=done", 400, contract.EInvalid, "op"},
		{"ErrBoolLt", stack.DevToken, "field=urgent&op=lt&value=true", 400, contract.EInvalid, "op"},
		{"ErrNullGt", stack.DevToken, "field=urgent&op=gt&value=null", 400, contract.EInvalid, "op"},
		{"ErrObjectValue", stack.DevToken, "field=state&op=eq&value=" + url.QueryEscape(`{"a":1}`), 400, contract.EInvalid, "value"},
		{"ErrLongString", stack.DevToken, "field=state&op=eq&value=" + strings.Repeat("s", 257), 400, contract.EInvalid, "value"},
		{"ErrInvalidUTF8", stack.DevToken, "field=state&op=eq&value=%ff", 400, contract.EInvalid, "value"},
		{"ErrUnknownParam", stack.DevToken, "field=state&op=eq&value=done&where=x", 400, contract.EInvalid, "where"},
		{"ErrBadCursor", stack.DevToken, "field=state&op=eq&value=done&cursor=nope", 400, contract.EInvalid, "cursor"},
		{"ErrBadLimit", stack.DevToken, "field=state&op=eq&value=done&limit=1001", 400, contract.EInvalid, "limit"},
		{"ErrReaderOutsideGrant", stack.ReaderToken, "field=state&op=eq&value=done&prefix=" + url.QueryEscape("tenant/other/project/p/"), 403, contract.EForbidden, "prefix"},
		{"ErrNoToken", "", "field=state&op=eq&value=done", 401, contract.EUnauthenticated, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.query
			if !strings.Contains(q, "prefix=") {
				q = "prefix=" + url.QueryEscape(jobs) + "&" + q
			}
			status, body := rawList(t, base, tt.token, q)
			var answer struct {
				Error struct{ Code, Field string }
			}
			if err := json.Unmarshal(body, &answer); err != nil || status != tt.status || answer.Error.Code != tt.code || answer.Error.Field != tt.field {
				t.Errorf("%d %s; want %d %s on %q", status, body, tt.status, tt.code, tt.field)
			}
		})
	}

	t.Run("OKReaderInsideGrant", func(t *testing.T) {
		page, err := client.New(base, stack.ReaderToken).Scan(ctx, client.ScanOptions{Prefix: jobs, Filter: client.Filter{Field: "state", Op: contract.FilterEq, Value: "done"}})
		if err != nil || len(page.Items) != 3 {
			t.Errorf("reader scan: %+v, %v", page, err)
		}
	})
	t.Run("ErrClientRefusesObjectValue", func(t *testing.T) {
		_, err := c.Scan(ctx, client.ScanOptions{Prefix: jobs, Filter: client.Filter{Field: "state", Op: contract.FilterEq, Value: map[string]int{"a": 1}}})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "value" {
			t.Errorf("want invalid value, got %v", err)
		}
	})
	t.Run("ErrServerNamesField", func(t *testing.T) {
		for _, err := range c.ScanAll(ctx, client.ScanOptions{Prefix: jobs, Filter: client.Filter{Field: "state", Op: "like", Value: "x"}}) {
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "op" {
				t.Errorf("want invalid op, got %v", err)
			}
		}
	})
	t.Run("PlainListUnchanged", func(t *testing.T) {
		page, err := c.List(ctx, client.ListOptions{Prefix: jobs, Limit: 1000})
		if err != nil || len(page.Items) != n-1+3 {
			t.Errorf("list: %d items, %v", len(page.Items), err)
		}
	})
}

// rawList sends GET /v1/kv?query and returns the status and body.
func rawList(t *testing.T, base, token, query string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/kv?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf strings.Builder
	if _, err := io.Copy(&buf, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, []byte(buf.String())
}
