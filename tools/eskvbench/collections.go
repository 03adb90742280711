package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// sizeFigure is a figure of collections (13 sets, 14 lists, 15 queues): one read
// timed on a small and a large collection loaded straight into the
// projection, whose latency should not depend on the size, so the second
// step's p50 is compared with the first's.
type sizeFigure struct {
	steps [2]string // step names, small first
	sizes [2]int
	ops   int    // reads timed per step; 0: -n
	kind  string // "set", "list" or "queue": names the key and the notes
	noun  string // what the collection holds: "members", "values"
	// title names a step on a collection of n elements.
	title  func(n int) string
	target time.Duration // p50
	// load writes the collection key with n elements into the projection.
	load func(ctx context.Context, key string, n int) error
	// probe makes one read of key (n elements) and reports whether its
	// answer was right (only looked at on 200).
	probe func(ctx context.Context, key string, n int, buf *bytes.Buffer) (status int, right bool, err error)
	// route is the read's route, for the note.
	route string
}

// sizeFigure measures f: both steps, each skipped when the bench does
// not run its own stack (it writes straight into the projection).
func (b *bench) sizeFigure(ctx context.Context, f sizeFigure) []result {
	out := make([]result, 0, len(f.steps))
	for i, step := range f.steps {
		n := f.sizes[i]
		title := f.title(n)
		switch {
		case !b.s.own:
			out = append(out, result{Step: step, Title: title, Verdict: verdictSkip, Note: "only on the bench's own stack: it loads the " + f.kind + " straight into the projection"})
			continue
		case b.s.db == nil:
			out = append(out, result{Step: step, Title: title, Verdict: verdictSkip, Note: "no projection database"})
			continue
		}
		key := b.key(f.kind+"s-"+b.runID, fmt.Sprintf("%s-%d", f.noun, n))
		b.logf("%s loading a %s of %d %s straight into the projection", step, f.kind, n, f.noun)
		start := time.Now()
		if err := f.load(ctx, key, n); err != nil {
			out = append(out, result{Step: step, Title: title, Verdict: verdictSkip, Note: "loading the " + f.kind + ": " + err.Error()})
			continue
		}
		loaded := time.Since(start)
		ops := cmp.Or(f.ops, b.c.n)
		b.logf("%s %s x %d", step, f.route, ops)
		var buf bytes.Buffer
		var wrong int
		lat, errs, elapsed := timed(ctx, ops, false, func() (int, error) {
			status, right, err := f.probe(ctx, key, n, &buf)
			if err == nil && status == http.StatusOK && !right {
				wrong++
			}
			return status, err
		})
		r := newResult(step, title, summarize(lat), errs, elapsed)
		r.target(targetP50, f.target)
		r.Note = fmt.Sprintf("%s; the %s was loaded straight into Postgres in %s "+
			"(its entry with projection.Store.Apply, its %s with one INSERT ... SELECT generate_series, then ANALYZE kv_elements)",
			f.route, f.kind, loaded.Round(time.Millisecond), f.noun)
		if wrong > 0 {
			r.Verdict, r.Note = verdictMiss, fmt.Sprintf("%d answers were wrong; %s", wrong, r.Note)
		}
		if len(out) == 1 && out[0].P50 > 0 {
			r.Note += fmt.Sprintf("; p50 %.2fx that of %s", float64(r.P50)/float64(out[0].P50), f.steps[0])
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// loadCollection writes a collection key of n elements into the
// projection: its entry through projection.Store.Apply (one synthetic
// event adding the first element, el, whose metadata says the size, as
// the projector would apply it), then the other elements with insert
// ($1 the key, $2 n: rows 1 .. n-1 of generate_series), then ANALYZE
// kv_elements (what autovacuum does within a minute).
func (b *bench) loadCollection(ctx context.Context, key string, purpose string, op contract.Op, el *contract.Element, insert string, n int) error {
	k, err := contract.ParseKey(key)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	meta, _ := json.Marshal(contract.CollectionMeta{Type: purpose, Size: int64(n), Since: 1})
	e := contract.Event{
		SchemaVersion: contract.SchemaVersion, Key: key, Scope: k.Scope(), Version: 1, Kind: contract.KindPut, Op: op,
		Before: json.RawMessage("null"), After: meta, CreatedAt: now, TS: now, Principal: "eskvbench",
		Semantics: contract.Semantics{Purpose: purpose, Producer: "eskvbench"},
		Element:   el,
	}
	part := changelog.Partition(k.Scope(), int32(b.c.partitions))
	if err := projection.New(b.s.db).Apply(ctx, scanTopic, []projection.Applied{{Partition: part, Offset: int64(n), Event: e}}); err != nil {
		return err
	}
	if _, err := b.s.db.Exec(ctx, insert, key, n); err != nil {
		return err
	}
	_, err = b.s.db.Exec(ctx, `ANALYZE kv_elements`)
	return err
}

// getJSON sends an authorized GET of path to the writer and decodes a 200
// answer into a.
func (b *bench) getJSON(ctx context.Context, path string, buf *bytes.Buffer, a any) (status int, err error) {
	status, err = b.send(ctx, http.MethodGet, path, nil, buf)
	if err == nil && status == http.StatusOK {
		err = json.Unmarshal(buf.Bytes(), a)
	}
	return status, err
}

// send sends an authorized request for path to the writer, with body
// (JSON) when it is not nil, and reads the whole answer into buf.
func (b *bench) send(ctx context.Context, method, path string, body []byte, buf *bytes.Buffer) (status int, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.s.writerURL+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header["Authorization"] = []string{b.auth}
	if body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, err
}
