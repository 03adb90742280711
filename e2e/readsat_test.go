package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// Reads of the past (GET /v1/kv/{key}?at=, GET /v1/kv?prefix=&at=),
// checked against the log: the state at a position is the fold of the
// partition's events up to it, read here from Kafka, not from the
// projection that answers.

// atPrefix is the prefix the reads of the past write under (one
// partition: that of tenant/acme/project/demo).
const atPrefix = "tenant/acme/project/demo/at/"

// atEvent is an event of the log with its offset.
type atEvent struct {
	offset int64
	ev     contract.Event
}

// readPartition returns the committed events of partition p, in order,
// with their offsets.
func (s *stack) readPartition(ctx context.Context, p int32) []atEvent {
	s.tb.Helper()
	cl, err := s.kafka.NewClient("e2e", s.broker.Addrs)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	starts := testenv.StartOffsets(ctx, s.tb, cl, s.broker.Topics.Changes)
	var out []atEvent
	r := changelog.Range{Topic: s.broker.Topics.Changes, Partition: p, From: starts[p], End: s.endOffsets(ctx)[p]}
	err = changelog.ReadCommitted(ctx, cl, r, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		out = append(out, atEvent{r.Offset, e})
		return err
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	return out
}

// foldLogAt is what a read at offset (and at a time, when t is not nil:
// expiries at or before it count) sees of key: its newest event at or
// before offset when that leaves it present, else nil.
func foldLogAt(log []atEvent, key string, offset int64, t *time.Time) *contract.Event {
	var last *contract.Event
	for i := range log {
		if log[i].offset <= offset && log[i].ev.Key == key {
			last = &log[i].ev
		}
	}
	if last == nil || !last.Live() || (t != nil && last.ExpiresAt != nil && !last.ExpiresAt.After(*t)) {
		return nil
	}
	return last
}

// positionOf is the offset a time resolves to: the latest event by
// event time (then offset) at or before t, -1 when none.
func positionOf(log []atEvent, t time.Time) int64 {
	best := -1
	for i, l := range log {
		if !l.ev.TS.After(t) && (best < 0 || !l.ev.TS.Before(log[best].ev.TS)) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return log[best].offset
}

// randomWrites makes n random writes of keys under atPrefix: puts,
// deletes, compare-and-swaps (some at a wrong version: refused, no
// event), puts with a 1 s TTL that the sweeper expires while the test
// pauses between rounds.
func randomWrites(t *testing.T, s *stack, rng *rand.Rand, n int) {
	versions := map[string]int64{}
	for i := range n {
		k := fmt.Sprintf("k%02d", rng.IntN(16))
		path := "/v1/kv/" + atPrefix + k
		var r response
		switch op := rng.IntN(10); {
		case op < 4:
			r = s.do("PUT", path, devToken, fmt.Sprintf(`{"value":{"n":%d,"w":"v%d"}}`, rng.IntN(1000), i))
		case op < 6:
			r = s.do("DELETE", path, devToken, nil)
		case op < 8:
			v := versions[k] + int64(rng.IntN(2)) // a wrong version half the time
			r = s.do("PUT", path, devToken, fmt.Sprintf(`{"value":%d,"expectedVersion":%d}`, i, v))
		default:
			r = s.do("PUT", path, devToken, fmt.Sprintf(`{"value":"ttl%d","ttlSeconds":1}`, i))
		}
		if r.Status == http.StatusOK {
			var a struct{ Version int64 }
			_ = json.Unmarshal(r.Body, &a)
			versions[k] = a.Version
		} else if r.Status != http.StatusConflict && r.Status != http.StatusNotFound {
			t.Fatalf("write %d: %d %s", i, r.Status, r.Body)
		}
		if i%(n/4) == n/4-1 {
			time.Sleep(1500 * time.Millisecond) // the TTLs pass, the sweeper expires them
		}
	}
}

// sameEntry reports whether the answer r of a read of key is ev's entry
// (r a 404 when ev is nil).
func sameEntry(t *testing.T, r response, ev *contract.Event) bool {
	t.Helper()
	if ev == nil {
		return r.Status == http.StatusNotFound && r.errorBody(t).Code == contract.ENotFound
	}
	if r.Status != http.StatusOK {
		return false
	}
	e := r.entry(t)
	return e.Version == ev.Version && sameJSON(t, e.Value, ev.After) && reflect.DeepEqual(e.ExpiresAt, ev.ExpiresAt)
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestReadsAtFoldTheLog: after random writes through the stack (puts,
// deletes, CAS, TTL expiries by the sweeper), GET ?at= of 1,000 random
// (key, position) pairs, listings ?at= of random positions paged by 3,
// and GET ?at= of random times each answer the fold of the partition's
// log up to that point.
func TestReadsAtFoldTheLog(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = 100 * time.Millisecond }))
	rng := rand.New(rand.NewPCG(1, 2))
	randomWrites(t, s, rng, 240)
	waitProjected(t, s)
	part := changelog.Partition("tenant/acme/project/demo", partitions)
	log := s.readPartition(context.Background(), part)
	if len(log) < 150 || !slices.ContainsFunc(log, func(l atEvent) bool { return l.ev.Kind == contract.KindExpire }) {
		t.Fatalf("the log has %d events and wants expiries too", len(log))
	}
	last := log[len(log)-1].offset
	for range 1000 {
		k := atPrefix + fmt.Sprintf("k%02d", rng.IntN(16))
		off := rng.Int64N(last+3) - 1 // -1 to the last event's commit marker
		r := s.do("GET", "/v1/kv/"+k+"?at="+posText(part, off), readerTok, nil)
		if want := foldLogAt(log, k, off, nil); !sameEntry(t, r, want) {
			t.Fatalf("GET %s at %d: %d %s, want %+v", k, off, r.Status, r.Body, want)
		}
	}
	for range 40 {
		off := rng.Int64N(last+3) - 1
		got := listPastAt(t, s, posText(part, off), 3)
		if want := foldPrefix(log, off, nil); !slices.Equal(got, want) {
			t.Fatalf("list at %d: %v, want %v", off, got, want)
		}
	}
	first := log[0].ev.TS.Add(-time.Second)
	span := log[len(log)-1].ev.TS.Sub(first)
	for range 100 {
		tm := first.Add(time.Duration(rng.Int64N(int64(span))))
		k := atPrefix + fmt.Sprintf("k%02d", rng.IntN(16))
		r := s.do("GET", "/v1/kv/"+k+"?at="+tm.Format(time.RFC3339Nano), readerTok, nil)
		off := positionOf(log, tm)
		if want := foldLogAt(log, k, off, &tm); !sameEntry(t, r, want) || r.Header.Get("Eskv-Position") != posText(part, off) {
			t.Fatalf("GET %s at %s (%d): %d %s %s, want %+v", k, tm, off, r.Status, r.Header.Get("Eskv-Position"), r.Body, want)
		}
	}
}

func posText(p int32, off int64) string { return contract.Cursor{Partition: p, Offset: off}.String() }

// foldPrefix is the listing foldLogAt makes of atPrefix: "key=version".
func foldPrefix(log []atEvent, off int64, t *time.Time) []string {
	var out []string
	for i := range 16 {
		k := atPrefix + fmt.Sprintf("k%02d", i)
		if ev := foldLogAt(log, k, off, t); ev != nil {
			out = append(out, fmt.Sprintf("%s=%d", k, ev.Version))
		}
	}
	return out
}

// listPastAt lists atPrefix at at in pages of limit, following the cursors
// with the same at: "key=version" each.
func listPastAt(t *testing.T, s *stack, at string, limit int) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		q := url.Values{"prefix": {atPrefix}, "at": {at}, "limit": {fmt.Sprint(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := s.do("GET", "/v1/kv?"+q.Encode(), readerTok, nil)
		var a contract.ListAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != http.StatusOK {
			t.Fatalf("list at %s: %d %s", at, r.Status, r.Body)
		}
		for _, e := range a.Items {
			out = append(out, fmt.Sprintf("%s=%d", e.Key, e.Version))
		}
		if a.NextCursor == "" {
			return out
		}
		cursor = a.NextCursor
	}
}

// TestReadsAtRefusals: reads of the past refuse, with their code and
// field, a position of another partition or past the log's end, a time
// in the future, a filter (400); a position the history retention no
// longer reaches (410 cursor_expired); a principal without the read
// right (403), as today's reads do.
func TestReadsAtRefusals(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for i := range 3 {
		if r := s.do("PUT", "/v1/kv/"+atPrefix+"r", devToken, fmt.Sprintf(`{"value":%d}`, i)); r.Status != http.StatusOK {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
	}
	waitProjected(t, s)
	part := changelog.Partition("tenant/acme/project/demo", partitions)
	log := s.readPartition(context.Background(), part)
	v1 := posText(part, log[0].offset)
	other := posText((part+1)%partitions, 0)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	key, list := "/v1/kv/"+atPrefix+"r?at=", "/v1/kv?prefix="+atPrefix+"&at="
	for _, tc := range []struct {
		path, token string
		status      int
		code, field string
	}{
		{key + v1, readerTok, 200, "", ""},
		{key + other, readerTok, 400, contract.EInvalid, "at"},
		{list + other, readerTok, 400, contract.EInvalid, "at"},
		{key + posText(part, 1<<40), readerTok, 400, contract.EInvalid, "at"},
		{key + future, readerTok, 400, contract.EInvalid, "at"},
		{key + "p0.o", readerTok, 400, contract.EInvalid, "at"},
		{list + v1 + "&field=n&op=eq&value=1", readerTok, 400, contract.EInvalid, "field"},
		{key + v1, inproc.WriterToken, 403, contract.EForbidden, "key"},
		{list + v1, inproc.WriterToken, 403, contract.EForbidden, "prefix"},
		{"/v1/kv/tenant/other/project/x/r?at=p0.o0", acmeToken, 403, contract.EForbidden, "key"},
	} {
		r := s.do("GET", tc.path, tc.token, nil)
		if r.Status != tc.status || (tc.status != 200 && (r.errorBody(t).Code != tc.code || r.errorBody(t).Field != tc.field)) {
			t.Errorf("GET %s: %d %s, want %d %s on %q", tc.path, r.Status, r.Body, tc.status, tc.code, tc.field)
		}
	}
	p, _ := retainer(t, s, projection.Retention{MaxVersions: 1})
	if n, err := p.PruneHistory(context.Background(), time.Now()); err != nil || n != 2 {
		t.Fatalf("retention: %d, %v; want 2 rows", n, err)
	}
	for _, path := range []string{key + v1, list + v1, key + url.QueryEscape(log[0].ev.TS.Format(time.RFC3339Nano))} {
		r := s.do("GET", path, readerTok, nil)
		if d := r.errorBody(t); r.Status != http.StatusGone || d.Code != contract.ECursorExpired || d.Field != "at" {
			t.Errorf("GET %s after retention: %d %s, want 410 cursor_expired on at", path, r.Status, r.Body)
		}
	}
	if r := s.do("GET", key+posText(part, log[2].offset), readerTok, nil); r.Status != http.StatusOK || string(r.entry(t).Value) != "2" {
		t.Errorf("GET at the kept version: %d %s", r.Status, r.Body)
	}
}
