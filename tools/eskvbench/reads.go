package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// Figures 19 to 21: the reads of many keys (docs/api.md, "Reads of many
// keys" and "Reads of the past"), on keys the bench writes first through
// the API, so that they run against any stack.
//
//   - 19: a keys-only listing of manyKeys keys (GET
//     /v1/kv?prefix=…&keysOnly=true, default page of
//     contract.DefaultKeysLimit) walked by nextCursor to its end, whole
//     (19a) and per page (19b), against figure 4's full listing of the
//     same keys (limit=contract.MaxListLimit), whole (19c) and per page
//     (19d); the notes say the bytes answered.
//   - 20: a batch get of contract.MaxBatchGetKeys keys (POST
//     /v1/kv:batchGet) of one project (20a) and of batchProjects projects
//     on as many partitions (20b).
//   - 21: a listing of atKeys keys at a position (GET
//     /v1/kv?prefix=…&at=p<partition>.o<offset>) taken from a listing
//     before one more write to each of them.
//
// None has a target yet. Each figure is timed -many-n times, one client.
const (
	manyKeys      = 10000
	batchProjects = 4
	atKeys        = 1000
)

// manyReads measures figures 19, 20 and 21 (those -only asks for).
func (b *bench) manyReads(ctx context.Context, rep *report) error {
	projects := b.distinctProjects("reads-"+b.runID, batchProjects)
	prefix := b.key(projects[0], "k/")
	if b.c.wants("19") || b.c.wants("20") {
		b.logf("19/20 writing %d keys under one prefix", manyKeys)
		keys := numberedKeys(prefix, manyKeys)
		err := b.readyToList(ctx, keys)
		if b.c.wants("19") {
			b.logf("19 keys-only and full listings of %d keys x %d", manyKeys, b.c.manyN)
			rep.Results = append(rep.Results, b.keysListings(ctx, prefix, err)...)
		}
		if b.c.wants("20") {
			rep.Results = append(rep.Results, b.batchGets(ctx, keys, projects[1:], err)...)
		}
	}
	if err := ctx.Err(); err != nil || !b.c.wants("21") {
		return err
	}
	b.logf("21 listing of %d keys at a position 1,000 writes ago x %d", atKeys, b.c.manyN)
	rep.add(b.listAt(ctx, b.key(projects[0], "at/")))
	return ctx.Err()
}

// readyToList writes keys (each created) and says why they cannot be
// listed: a listing waits for every acknowledged write to be projected.
func (b *bench) readyToList(ctx context.Context, keys []string) error {
	if !b.projecting() {
		return errors.New("no projector")
	}
	return b.writeEach(ctx, keys, 0)
}

// pageInfo is what the bench reads of a listing's page: the fields that
// follow its items (contract.ListAnswer, contract.KeysAnswer).
type pageInfo struct {
	Count      int    `json:"count"`
	Truncated  bool   `json:"truncated"`
	NextCursor string `json:"nextCursor"`
	Position   string `json:"position"`
}

// pageTail is the text that ends a page's items and starts its other
// fields: the server writes count right after items, and neither the
// bench's keys nor its values ({"seq":n}) hold that text.
var pageTail = []byte(`],"count":`)

// readPage decodes the fields of a page after its items. Only the tail is
// decoded, so the client's JSON work, which grows with the items, stays
// out of the comparison of keys-only and full pages.
func readPage(body []byte) (pageInfo, error) {
	var p pageInfo
	i := bytes.LastIndex(body, pageTail)
	if i < 0 {
		return p, fmt.Errorf("page without count: %s", truncate(string(body), 120))
	}
	tail := append([]byte{'{'}, body[i+2:]...)
	if err := json.Unmarshal(tail, &p); err != nil {
		return p, fmt.Errorf("page: %w", err)
	}
	return p, nil
}

// walked is one listing walked to its end.
type walked struct {
	pages    latencies // each page's request, sent to last byte read
	bytes    int       // answered, over every page
	count    int       // items, over every page
	position string    // the first page's
}

// walk lists path (GET /v1/kv with its query) page by page, following
// nextCursor until a page has none. It returns the first status other
// than 200, with what was walked up to it.
func (b *bench) walk(ctx context.Context, path string, buf *bytes.Buffer) (walked, int, error) {
	var w walked
	next := path
	for {
		t0 := time.Now()
		status, err := b.send(ctx, http.MethodGet, next, nil, buf)
		if err != nil || status != http.StatusOK {
			return w, status, err
		}
		w.pages = append(w.pages, time.Since(t0))
		w.bytes += buf.Len()
		p, err := readPage(buf.Bytes())
		if err != nil {
			return w, status, err
		}
		w.count += p.Count
		if w.position == "" {
			w.position = p.Position
		}
		if p.NextCursor == "" {
			return w, status, nil
		}
		next = path + "&cursor=" + url.QueryEscape(p.NextCursor)
	}
}

// listingFigure is one listing of figure 19 or 21, timed whole and per
// page.
type listingFigure struct {
	steps [2]string // whole, per page
	title string    // of the whole listing
	path  string    // of its first page
	want  int       // items over the listing
}

// timeListing walks f.path -many-n times after one walk that checks it
// lists f.want items. Per-page latencies come from the complete walks.
func (b *bench) timeListing(ctx context.Context, f listingFigure) (whole, page result) {
	var buf bytes.Buffer
	first, status, err := b.walk(ctx, f.path, &buf)
	if err != nil || status != http.StatusOK || first.count != f.want {
		note := fmt.Sprintf("first listing: status %d, %d items, err %v", status, first.count, err)
		return result{Step: f.steps[0], Title: f.title, Verdict: verdictSkip, Note: note},
			result{Step: f.steps[1], Title: f.title + ", per page", Verdict: verdictSkip, Note: note}
	}
	var pages latencies
	lat, errs, elapsed := timed(ctx, b.c.manyN, false, func() (int, error) {
		w, status, err := b.walk(ctx, f.path, &buf)
		if err == nil && status == http.StatusOK {
			pages = append(pages, w.pages...)
		}
		return status, err
	})
	whole = newResult(f.steps[0], f.title, summarize(lat), errs, elapsed)
	whole.Note = fmt.Sprintf("GET %s: %d pages, %s answered per listing", f.path, len(first.pages), fmtSize(first.bytes))
	page = newResult(f.steps[1], f.title+", per page", summarize(pages), errorCounts{}, elapsed)
	page.Note = fmt.Sprintf("%s per page on average", fmtSize(first.bytes/len(first.pages)))
	return whole, page
}

// keysListings is figure 19: keys-only against full listings of the
// manyKeys keys under prefix.
func (b *bench) keysListings(ctx context.Context, prefix string, writeErr error) []result {
	keysOnly := listingFigure{steps: [2]string{"19a", "19b"}, want: manyKeys,
		title: fmt.Sprintf("keys-only listing of %s keys (pages of %s)", thousands(manyKeys), thousands(contract.DefaultKeysLimit)),
		path:  "/v1/kv?prefix=" + prefix + "&keysOnly=true"}
	full := listingFigure{steps: [2]string{"19c", "19d"}, want: manyKeys,
		title: fmt.Sprintf("full listing of the same %s keys (limit=%d)", thousands(manyKeys), contract.MaxListLimit),
		path:  "/v1/kv?prefix=" + prefix + "&limit=" + strconv.Itoa(contract.MaxListLimit)}
	if writeErr != nil {
		return skipped(writeErr.Error(), keysOnly.steps[0], keysOnly.title, keysOnly.steps[1], keysOnly.title+", per page",
			full.steps[0], full.title, full.steps[1], full.title+", per page")
	}
	ka, kb := b.timeListing(ctx, keysOnly)
	fa, fb := b.timeListing(ctx, full)
	if ka.P50 > 0 && fa.P50 > 0 {
		fa.Note += fmt.Sprintf("; p50 %.2fx that of 19a", float64(fa.P50)/float64(ka.P50))
	}
	return []result{ka, kb, fa, fb}
}

// skipped is a skipped result per (step, title) pair of stepTitles, each
// with note.
func skipped(note string, stepTitles ...string) []result {
	var out []result
	for i := 0; i+1 < len(stepTitles); i += 2 {
		out = append(out, result{Step: stepTitles[i], Title: stepTitles[i+1], Verdict: verdictSkip, Note: note})
	}
	return out
}

// fmtSize prints a byte count in kB or MB (powers of ten, as HTTP
// sizes are usually read).
func fmtSize(n int) string {
	if n >= 1e6 {
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f kB", float64(n)/1e3)
}

// batchGets is figure 20: a batch get of contract.MaxBatchGetKeys keys,
// every tenth of keys (figure 19's, one project), then as many keys
// spread evenly over the project of keys and the others (each on its own
// partition; their keys are written first).
func (b *bench) batchGets(ctx context.Context, keys []string, others []string, writeErr error) []result {
	n := contract.MaxBatchGetKeys
	oneTitle := fmt.Sprintf("batch get of %s keys, 1 project", thousands(n))
	spreadTitle := fmt.Sprintf("batch get of %s keys, %d projects", thousands(n), 1+len(others))
	if writeErr != nil {
		return skipped(writeErr.Error(), "20a", oneTitle, "20b", spreadTitle)
	}
	one := make([]string, 0, n)
	for i := 0; len(one) < n; i += len(keys) / n {
		one = append(one, keys[i])
	}
	b.logf("20a batch get of %d keys of one project x %d", n, b.c.manyN)
	out := []result{b.timeBatchGet(ctx, "20a", oneTitle, one)}
	per := n / (1 + len(others))
	spread := append(make([]string, 0, n), keys[:n-per*len(others)]...)
	for _, p := range others {
		ks := numberedKeys(b.key(p, "k/"), per)
		if err := b.writeEach(ctx, ks, 0); err != nil {
			return append(out, skipped(err.Error(), "20b", spreadTitle)...)
		}
		spread = append(spread, ks...)
	}
	b.logf("20b batch get of %d keys of %d projects x %d", n, 1+len(others), b.c.manyN)
	return append(out, b.timeBatchGet(ctx, "20b", spreadTitle, spread))
}

// timeBatchGet times -many-n batch gets of keys after one that checks
// every key is answered with its entry, in one answer.
func (b *bench) timeBatchGet(ctx context.Context, step, title string, keys []string) result {
	body, err := json.Marshal(contract.BatchGetBody{Keys: keys})
	if err != nil {
		return result{Step: step, Title: title, Verdict: verdictSkip, Note: err.Error()}
	}
	var buf bytes.Buffer
	var a contract.BatchGetAnswer
	status, err := b.send(ctx, http.MethodPost, "/v1/kv:batchGet", body, &buf)
	if err == nil && status == http.StatusOK {
		err = json.Unmarshal(buf.Bytes(), &a)
	}
	if err := checkBatch(a, len(keys), status, err); err != nil {
		return result{Step: step, Title: title, Verdict: verdictSkip, Note: "first batch get: " + err.Error()}
	}
	answered := buf.Len()
	lat, errs, elapsed := timed(ctx, b.c.manyN, false, func() (int, error) {
		return b.send(ctx, http.MethodPost, "/v1/kv:batchGet", body, &buf)
	})
	r := newResult(step, title, summarize(lat), errs, elapsed)
	r.Note = fmt.Sprintf("POST /v1/kv:batchGet: %d partition(s) read, %s asked, %s answered",
		len(a.Partitions), fmtSize(len(body)), fmtSize(answered))
	return r
}

// checkBatch says what is wrong with a, the answer (status, err) of a
// batch get of n keys, when not every key came back with its entry.
func checkBatch(a contract.BatchGetAnswer, n, status int, err error) error {
	switch {
	case err != nil:
		return err
	case status != http.StatusOK:
		return fmt.Errorf("status %d", status)
	case a.Truncated || len(a.Items) != n:
		return fmt.Errorf("%d of %d keys answered (truncated %t)", len(a.Items), n, a.Truncated)
	}
	for _, it := range a.Items {
		if it.Entry == nil {
			return fmt.Errorf("%s answered without its entry: %+v", it.Key, it.Error)
		}
	}
	return nil
}

// listAt is figure 21: the atKeys keys under prefix are written, listed
// for the listing's position, each written once more, then listed at that
// position (every page of a listing with at is read at it). A writer
// without reads of the past refuses at: the figure is then unavailable,
// as a peer of figure 18 that does not start.
func (b *bench) listAt(ctx context.Context, prefix string) result {
	title := fmt.Sprintf("listing of %s keys at= a position %s writes ago (limit=%d)", thousands(atKeys), thousands(atKeys), contract.MaxListLimit)
	skip := func(note string) result { return result{Step: "21", Title: title, Verdict: verdictSkip, Note: note} }
	keys := numberedKeys(prefix, atKeys)
	if err := b.readyToList(ctx, keys); err != nil {
		return skip(err.Error())
	}
	path := "/v1/kv?prefix=" + prefix + "&limit=" + strconv.Itoa(contract.MaxListLimit)
	var buf bytes.Buffer
	before, status, err := b.walk(ctx, path, &buf)
	if err != nil || status != http.StatusOK || before.count != atKeys || before.position == "" {
		return skip(fmt.Sprintf("listing for the position: status %d, %d items, position %q, err %v", status, before.count, before.position, err))
	}
	if err := b.writeEach(ctx, keys, 1); err != nil {
		return skip(err.Error())
	}
	path += "&at=" + url.QueryEscape(before.position)
	if unavailable, err := b.probeAt(ctx, path, &buf); unavailable != "" || err != nil {
		if unavailable != "" {
			return skip("unavailable: " + unavailable)
		}
		return skip("first listing at " + before.position + ": " + err.Error())
	}
	r, _ := b.timeListing(ctx, listingFigure{steps: [2]string{"21", "21"}, title: title, path: path, want: atKeys})
	return r
}

// probeAt sends the first page of the listing with at once and judges
// its answer (judgeAt).
func (b *bench) probeAt(ctx context.Context, path string, buf *bytes.Buffer) (unavailable string, err error) {
	status, err := b.send(ctx, http.MethodGet, path, nil, buf)
	if err != nil {
		return "", err
	}
	return judgeAt(status, buf.Bytes())
}

// judgeAt judges the answer (status, body) of a listing with at of
// figure 21. unavailable says why the writer cannot answer at (it
// refuses the parameter: 400 naming field at, as a writer without reads
// of the past does); err says what else is wrong with the answer, which
// must hold every key as it was at the position: {"seq":1}, not the
// {"seq":2} written after it.
func judgeAt(status int, body []byte) (unavailable string, err error) {
	var refused struct {
		Error contract.ErrorDetail `json:"error"`
	}
	if status == http.StatusBadRequest && json.Unmarshal(body, &refused) == nil && refused.Error.Field == "at" {
		return fmt.Sprintf("the writer refuses at (400 %s: %s)", refused.Error.Code, refused.Error.Message), nil
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", status, truncate(string(body), 200))
	}
	var a contract.ListAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return "", err
	}
	for _, e := range a.Items {
		var v struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(e.Value, &v); err != nil || v.Seq != 1 {
			return "", fmt.Errorf("%s holds %s at the position, want {\"seq\":1}", e.Key, e.Value)
		}
	}
	return "", nil
}
