package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// TestListConcurrentPushTrimPop: 8 clients push at both ends of one list
// while a trimmer keeps its newest 20 (ltrim 0 19, the seed's use case 7)
// and a popper pops from the right. Afterwards lrange of the whole list
// equals the fold of the log (pushes insert at their end, pops remove
// theirs and carry the value they answered, trims cut to the range their
// metadata names), llen equals its length, and every pop answered the
// value the fold had at that end.
func TestListConcurrentPushTrimPop(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := client.New(s.url, devToken)
	list := "tenant/acme/project/demo/lists/activity-log"
	const pushers = 8
	ops := 40
	if testing.Short() {
		ops = 12
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		popped = map[int64]string{} // version -> value answered
	)
	for p := range pushers {
		wg.Go(func() {
			for i := range ops {
				r := client.PushRequest{Key: list, Value: json.RawMessage(fmt.Sprintf(`"p%d-%d"`, p, i))}
				var err error
				if (p+i)%2 == 0 {
					_, err = c.LPush(t.Context(), r)
				} else {
					_, err = c.RPush(t.Context(), r)
				}
				if err != nil {
					t.Errorf("pusher %d op %d: %v", p, i, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range ops {
			if _, err := c.LTrim(t.Context(), list, 0, 19); err != nil {
				t.Errorf("ltrim: %v", err)
				return
			}
			a, err := c.RPop(t.Context(), list)
			if contract.ErrorCode(err) == contract.ENotFound {
				continue
			}
			if err != nil {
				t.Errorf("rpop: %v", err)
				return
			}
			mu.Lock()
			popped[a.Version] = string(a.Value)
			mu.Unlock()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}

	// Fold the log's events of the list, in version order.
	var fold []string
	var versions []int64
	for _, e := range s.readLog(t.Context()) {
		if e.Key != list {
			continue
		}
		versions = append(versions, e.Version)
		meta, err := contract.ParseCollectionMeta(e.After)
		if err != nil {
			t.Fatalf("event %d: %v", e.Version, err)
		}
		switch e.Op {
		case contract.OpLPush:
			fold = append([]string{string(e.Element.Value)}, fold...)
		case contract.OpRPush:
			fold = append(fold, string(e.Element.Value))
		case contract.OpRPop:
			if last := fold[len(fold)-1]; last != string(e.Element.Value) || popped[e.Version] != last {
				t.Fatalf("event %d pops %s, answered %s; the fold ends with %s", e.Version, e.Element.Value, popped[e.Version], last)
			}
			fold = fold[:len(fold)-1]
		case contract.OpLTrim:
			if meta.Size > 20 || len(fold) <= 20 {
				t.Fatalf("event %d trims %d elements to %d", e.Version, len(fold), meta.Size)
			}
			fold = fold[:20]
		default:
			t.Fatalf("event %d of the list is a %s", e.Version, e.Op)
		}
		if meta.Size != int64(len(fold)) {
			t.Fatalf("event %d: metadata %s, but the fold holds %d values", e.Version, e.After, len(fold))
		}
	}
	for i, v := range versions {
		if v != int64(i+1) {
			t.Fatalf("versions %v are not contiguous from 1", versions)
		}
	}
	got, err := c.LRange(t.Context(), list, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, v := range got.Values {
		values = append(values, string(v))
	}
	if !slices.Equal(values, fold) {
		t.Fatalf("lrange 0 -1 %v,\nthe log implies %v", values, fold)
	}
	if n, err := c.LLen(t.Context(), list); err != nil || n != int64(len(fold)) {
		t.Fatalf("llen %d (%v), want %d", n, err, len(fold))
	}
	t.Logf("%d pushers x %d ops, a trimmer and a popper: %d events, %d pops, %d values at the end", pushers, ops, len(versions), len(popped), len(fold))
}

// TestListWriteOnlyLearnsNothing: a principal with only the write right
// may push and pop, but its answers hold neither the value popped nor
// the list's length, and it may not lrange or llen (403).
func TestListWriteOnlyLearnsNothing(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := secBase + "list"
	expect(t, "push", s.do("POST", k+":rpush", acmeToken, `{"value":"list-secret"}`), 200, "", "")
	expect(t, "push by write-only", s.do("POST", k+":rpush", writerTok, `{"value":"another"}`), 200, "", "")
	r := s.do("POST", k+":lpop", writerTok, nil)
	expect(t, "pop by write-only", r, 200, "", "")
	if body := string(r.Body); strings.Contains(body, "list-secret") || strings.Contains(body, `"value"`) || !strings.Contains(body, `"length":0`) {
		t.Fatalf("a write-only pop learned %s", r.Body)
	}
	expect(t, "lrange by write-only", s.do("GET", k+":lrange?start=0&stop=-1", writerTok, nil), 403, contract.EForbidden, "key")
	expect(t, "llen by write-only", s.do("GET", k+":llen", writerTok, nil), 403, contract.EForbidden, "key")
	r = s.do("GET", k+":lrange?start=0&stop=-1", acmeToken, nil)
	expect(t, "lrange", r, 200, "", "")
	if !strings.Contains(string(r.Body), `"values":["another"]`) {
		t.Fatalf("lrange after the write-only pop: %s", r.Body)
	}
}
