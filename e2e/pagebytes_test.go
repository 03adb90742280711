package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// TestRangeAndPeekPagesStopAtTheByteBudget: lrange and qpeek of large
// values answer pages of about MaxListBytes (at least one value), report
// truncated, and lrange continued from start+len(values) reads the rest
// exactly, in order.
func TestRangeAndPeekPagesStopAtTheByteBudget(t *testing.T) {
	t.Parallel()
	const pageBytes, n = 1 << 20, 40
	s := mustStack(t, inproc.API(api.Config{MaxListBytes: pageBytes}))
	c := client.New(s.url, devToken)
	const list, queue = "tenant/acme/project/demo/big-log", "tenant/acme/project/demo/big-tasks"
	big := strings.Repeat("v", 60<<10)
	var want []string
	for i := range n {
		v := fmt.Sprintf(`"%03d%s"`, i, big)
		want = append(want, v)
		if _, err := c.RPush(t.Context(), client.PushRequest{Key: list, Value: json.RawMessage(v)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.QPush(t.Context(), client.QPushRequest{Key: queue, Data: json.RawMessage(v)}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("OKRangeContinuesFromStartPlusLen", func(t *testing.T) {
		var got []string
		for start, pages := 0, 1; ; pages++ {
			r := s.do("GET", fmt.Sprintf("/v1/kv/%s:lrange?start=%d&stop=-1", list, start), devToken, nil)
			var a contract.RangeAnswer
			if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 {
				t.Fatalf("lrange: %d %.200s", r.Status, r.Body)
			}
			t.Logf("lrange from %d: %d values, %d KiB, truncated %v", start, len(a.Values), len(r.Body)>>10, a.Truncated)
			if len(r.Body) > pageBytes+64<<10 || len(a.Values) < 1 {
				t.Fatalf("page %d: %d bytes, %d values; budget %d", pages, len(r.Body), len(a.Values), pageBytes)
			}
			for _, v := range a.Values {
				got = append(got, string(v))
			}
			if !a.Truncated {
				if !slices.Equal(got, want) || pages < 3 {
					t.Fatalf("%d values in %d pages, want the %d pushed, in order, in 3 or more", len(got), pages, n)
				}
				return
			}
			start += len(a.Values)
		}
	})

	t.Run("OKPeekTruncated", func(t *testing.T) {
		r := s.do("GET", "/v1/kv/"+queue+":qpeek?count="+url.QueryEscape(fmt.Sprint(contract.MaxPeek)), devToken, nil)
		var a contract.QPeekAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 {
			t.Fatalf("qpeek: %d %.200s", r.Status, r.Body)
		}
		t.Logf("qpeek %d: %d items, %d KiB, truncated %v", contract.MaxPeek, len(a.Items), len(r.Body)>>10, a.Truncated)
		if len(r.Body) > pageBytes+64<<10 || len(a.Items) < 1 || !a.Truncated || string(a.Items[0].Data) != want[0] {
			t.Fatalf("qpeek: %d bytes, %d items, truncated %v; want the first items within %d, truncated", len(r.Body), len(a.Items), a.Truncated, pageBytes)
		}
	})
}
