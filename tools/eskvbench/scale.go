package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/tools/internal/stats"
	"github.com/eskv/eskv/writer"
)

// Figure 23 (-scale): flat as data grows. A baseline of 10,000 keys in one
// project, then -scale-keys keys in one project, then 10 × -scale-keys
// over -scale-projects projects, each loaded through the topic: the bench
// produces the put events a writer would (changelog.Record) straight to
// kv.changes, and the stack's projector folds them into Postgres as it
// folds the writer's (the projection's own path, not the writer's: a
// million writes through the API at 5,000/s would take hours). At each
// size it times GETs, a listing of 1,000 keys and figure 8b's filtered
// scan, each against the baseline (23a–c); then the writer's memory after
// touching the large project's keys (23d), partition takeover with two
// writers (23e), a rebuild of the projection from the topic (23f) and the
// bytes per key in Postgres and in the topic (23g).
const (
	scaleBaseKeys        = 10_000
	scaleManyFactor      = 10 // the many-projects step holds 10 × -scale-keys
	targetScaleRatio     = 2.0
	targetTakeoverP99    = 5 * time.Second
	targetRebuildPerSec  = 50_000
	scaleListPage        = 1000
	scaleLoadTimeout     = 2 * time.Hour
	scaleTakeoverTimeout = 60 * time.Second
	scaleTopic           = changelog.DefaultChangesTopic
)

// scaleBytesPerKey is what a key of figure 23 takes in Postgres, with
// room: 4,197 bytes measured (23g, with kv_fields, 2026-11-30), and the
// WAL and the free space of pages around them.
const scaleBytesPerKey = 4500

// scaleDiskNeed is the disk figure 23 needs where Postgres keeps its
// data for steps: every key once, the loaded projection or, after
// freeProjection, the rebuild's copy of it (23f), and scaleDiskSlack.
func scaleDiskNeed(steps []scaleStep) int64 {
	return int64(scaleKeys(steps))*scaleBytesPerKey + scaleDiskSlack
}

// scaleDiskSlack is room for what does not shrink with the keys: the
// WAL Postgres keeps until a checkpoint (max_wal_size), the broker's
// data directory when it shares the file system (113 B a record), a
// VACUUM's and an index build's temporary files.
const scaleDiskSlack = 5_000_000_000

// scaleKeys is the keys of steps, all told.
func scaleKeys(steps []scaleStep) int {
	n := 0
	for _, st := range steps {
		n += st.keys()
	}
	return n
}

// scaleDiskCheck refuses to start figure 23 when the file system under
// Postgres's data directory has less room than scaleDiskNeed: a
// Postgres whose disk fills stops, in the middle of an hour's run. (An
// error, not a SKIP: the user asked for this figure.)
func (b *bench) scaleDiskCheck(ctx context.Context, steps []scaleStep) error {
	var dir string
	if err := b.s.db.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return fmt.Errorf("figure 23: where Postgres keeps its data: %w", err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("figure 23: free disk under %s: %w", dir, err)
	}
	return diskEnough(dir, int64(fs.Bavail)*fs.Bsize, scaleDiskNeed(steps), steps)
}

// diskEnough is scaleDiskCheck's verdict: nil when free covers need.
func diskEnough(dir string, free, need int64, steps []scaleStep) error {
	if free >= need {
		return nil
	}
	return fmt.Errorf("figure 23 needs about %s free under Postgres's data directory %s, which has %s: %s keys "+
		"at about %s each, once (the loaded projection, then the rebuild's copy of it), and %s besides\n"+
		"Solution: a smaller scale (-scale-keys 200000 -scale-projects 20 needs about %s), or more disk there",
		gigabytes(need), dir, gigabytes(free), thousands(scaleKeys(steps)), thousands(scaleBytesPerKey)+" bytes", gigabytes(scaleDiskSlack),
		gigabytes(scaleDiskNeed(scaleSteps("x", 200_000, 20))))
}

// gigabytes writes n bytes in GB (10⁹ bytes, as df -H does).
func gigabytes(n int64) string { return fmt.Sprintf("%.1f GB", float64(n)/1e9) }

// scaleStep is one size of figure 23: perProject keys jobs/0000000… in
// each of projects.
type scaleStep struct {
	title      string
	projects   []string
	perProject int
}

func (s scaleStep) keys() int { return s.perProject * len(s.projects) }

// scaleSteps are the baseline, one project of keys keys, and 10 × keys
// over projects projects; run names the projects apart from other runs'.
func scaleSteps(run string, keys, projects int) []scaleStep {
	many := make([]string, projects)
	for i := range many {
		many[i] = fmt.Sprintf("scale-%s-m%03d", run, i)
	}
	return []scaleStep{
		{title: thousands(scaleBaseKeys) + " keys in 1 project", projects: []string{"scale-" + run + "-base"}, perProject: scaleBaseKeys},
		{title: thousands(keys) + " keys in 1 project", projects: []string{"scale-" + run + "-one"}, perProject: keys},
		{title: fmt.Sprintf("%s keys over %d projects", thousands(scaleManyFactor*keys), projects), projects: many,
			perProject: scaleManyFactor * keys / projects},
	}
}

// scaleKeyPath is the path of key i of a step's project.
func scaleKeyPath(i int) string { return fmt.Sprintf("jobs/%07d", i) }

// ratioVerdict compares got with base (latencies, bytes): got/base and
// PASS when at most limit times base; SKIP without a base or a measure.
func ratioVerdict[T time.Duration | int64](base, got T, limit float64) (float64, string) {
	if base <= 0 || got <= 0 {
		return 0, verdictSkip
	}
	r := float64(got) / float64(base)
	if r <= limit {
		return r, verdictPass
	}
	return r, verdictMiss
}

// rebuildLine is the line `projector rebuild` prints when it is done.
var rebuildLine = regexp.MustCompile(`rebuilt \S+ into schema \S+: (\d+) events read from \d+ partitions .*, (\d+) keys, in (\S+)\n?$`)

// parseRebuild reads the events, keys and duration of `projector
// rebuild`'s output.
func parseRebuild(out string) (events, keys int64, took time.Duration, err error) {
	m := rebuildLine.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("no \"rebuilt … keys, in …\" line in the rebuild's output %q", truncate(out, 300))
	}
	events, _ = strconv.ParseInt(m[1], 10, 64)
	keys, _ = strconv.ParseInt(m[2], 10, 64)
	if took, err = time.ParseDuration(m[3]); err != nil {
		return 0, 0, 0, fmt.Errorf("rebuild duration %q: %w", m[3], err)
	}
	return events, keys, took, nil
}

// rebuildPhases reads, from `projector rebuild`'s info log (JSON lines,
// durations in nanoseconds), how long the fold took and the restore
// after it, with the restore's longest steps (index builds, the
// derivation of kv_fields), longest first: where 23f's time goes. It
// returns "" when the log has neither line.
func rebuildPhases(log string, steps int) string {
	var fold, restore time.Duration
	var took map[string]time.Duration
	for line := range strings.Lines(log) {
		var l struct {
			Msg   string                   `json:"msg"`
			Took  time.Duration            `json:"took"`
			Steps map[string]time.Duration `json:"steps"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l.Msg {
		case "folded":
			fold = l.Took
		case "restored":
			restore, took = l.Took, l.Steps
		}
	}
	if fold == 0 && restore == 0 {
		return ""
	}
	names := slices.SortedFunc(maps.Keys(took), func(a, b string) int {
		return cmp.Or(cmp.Compare(took[b], took[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, n := range names[:min(steps, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %s", n, took[n].Round(100*time.Millisecond)))
	}
	out := fmt.Sprintf("fold %s, restore %s", fold.Round(100*time.Millisecond), restore.Round(100*time.Millisecond))
	if len(parts) > 0 {
		out += " (" + strings.Join(parts, ", ") + ")"
	}
	return out
}

// scaleMeasure is what figure 23 measures at one size.
type scaleMeasure struct {
	get, list, scan result
}

// scale is figure 23.
func (b *bench) scale(ctx context.Context, rep *report) error {
	if !b.s.own || b.s.local == nil {
		rep.add(result{Step: "23", Title: "flat as data grows", Verdict: verdictSkip,
			Note: "only on the bench's own stack: it loads the keys straight into the topic"})
		return nil
	}
	steps := scaleSteps(b.runID, b.c.scaleKeys, b.c.scaleProjects)
	if err := b.scaleDiskCheck(ctx, steps); err != nil {
		return err
	}
	begin := time.Now()
	now := begin
	cl, err := kafkaconf.Conn{}.NewClient("eskvbench", []string{b.s.local.Brokers},
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return fmt.Errorf("figure 23: %w", err)
	}
	defer cl.Close()
	var (
		base     scaleMeasure
		loads    []string
		produced topicBytes
		rssBase  int64
		peaks    []int64 // the writer's VmHWM after each step
	)
	for i, st := range steps {
		b.logf("23 loading %s through the topic", st.title)
		took, err := b.loadScaleStep(ctx, cl, st, now, &produced)
		if err != nil {
			return fmt.Errorf("figure 23: loading %s: %w", st.title, err)
		}
		serving, err := b.waitServing(ctx, st)
		if err != nil {
			return fmt.Errorf("figure 23: after loading %s: %w", st.title, err)
		}
		loads = append(loads, fmt.Sprintf("%s in %s (%.0f keys/s), the writer serving them again %s later",
			st.title, took.Round(time.Second), float64(st.keys())/took.Seconds(), serving.Round(time.Second)))
		b.logf("23 loaded %s in %s, served %s later; VACUUM ANALYZE", st.title, took.Round(time.Second), serving.Round(time.Second))
		// What autovacuum does within a minute of such a load (figure 8).
		if _, err := b.s.db.Exec(ctx, `VACUUM ANALYZE kv_entries, kv_history, kv_fields`); err != nil {
			return fmt.Errorf("figure 23: VACUUM ANALYZE: %w", err)
		}
		m := b.scaleMeasureStep(ctx, st, now)
		if i == 0 {
			base = m
			rssBase, _ = stats.StatusBytes(b.s.writerPID, "VmRSS")
		}
		for _, r := range []struct {
			letter string
			base   result
			got    result
		}{{"a", base.get, m.get}, {"b", base.list, m.list}, {"c", base.scan, m.scan}} {
			rep.add(scaleRatio(fmt.Sprintf("23%s%d", r.letter, i+1), r.base, r.got, i == 0))
		}
		if i == 1 {
			rep.add(b.scaleRSS(ctx, st, rssBase))
		}
		hwm, _ := stats.StatusBytes(b.s.writerPID, "VmHWM")
		peaks = append(peaks, hwm)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	rep.add(peakRatio(steps, peaks))
	rep.add(b.takeover(ctx))
	rep.add(b.bytesPerKey(ctx, &produced))
	if err := b.freeProjection(ctx); err != nil {
		return fmt.Errorf("figure 23: %w", err)
	}
	rep.add(b.rebuild(ctx))
	rep.add(result{Step: "23h", Title: "the -scale run", Seconds: time.Since(begin).Seconds(),
		Note: fmt.Sprintf("took %s; loaded through kv.changes (events produced as a writer would, folded by the stack's projector): %s",
			time.Since(begin).Round(time.Second), strings.Join(loads, "; "))})
	return nil
}

// peakRatio is figure 23i: the writer's peak resident memory (VmHWM)
// after the last step against after the second (ten times the keys):
// bounded by configuration, it does not grow with the keys. 23d reads
// the memory at one moment; the peak also counts catch-ups and reads of
// the log during the loads.
func peakRatio(steps []scaleStep, peaks []int64) result {
	r := result{Step: "23i", Title: "writer peak resident memory (VmHWM) over the loads"}
	var ratio float64
	if len(peaks) >= 3 {
		ratio, r.Verdict = ratioVerdict(peaks[1], peaks[len(peaks)-1], targetScaleRatio)
	}
	if len(peaks) < 3 || r.Verdict == verdictSkip {
		r.Verdict, r.Note = verdictSkip, fmt.Sprintf("the writer's VmHWM after each step: %v", peaks)
		return r
	}
	last := peaks[len(peaks)-1]
	r.Target = fmt.Sprintf("≤ %.0f× its peak after %s", targetScaleRatio, steps[1].title)
	r.Note = fmt.Sprintf("%.2f×: %s after %s, %s after %s (%s after the baseline)", ratio, fmtBytes(peaks[1]), steps[1].title,
		fmtBytes(last), steps[len(steps)-1].title, fmtBytes(peaks[0]))
	return r
}

// scaleRatio is got's row of figure 23a–c: its p99 against base's.
func scaleRatio(step string, base, got result, isBase bool) result {
	got.Step = step
	if isBase || got.Verdict == verdictSkip {
		if isBase && got.Verdict != verdictSkip {
			got.Verdict, got.Target = "", "the baseline"
		}
		return got
	}
	ratio, v := ratioVerdict(time.Duration(base.P99), time.Duration(got.P99), targetScaleRatio)
	got.Target, got.Verdict = fmt.Sprintf("p99 ≤ %.0f× %s", targetScaleRatio, time.Duration(base.P99).Round(time.Microsecond)), v
	got.Note = fmt.Sprintf("%.2f× the baseline's p99 (p50 %.2f×); %s", ratio, float64(got.P50)/float64(max(base.P50, 1)), got.Note)
	return got
}

// topicBytes counts the records the bench produced and their bytes (key,
// value, header keys and values).
type topicBytes struct {
	records, bytes atomic.Int64
}

// scaleEvent is the put event of key i loaded straight into the
// projection (figure 8) or the topic (figure 23): figure 8's job value,
// version 1.
func scaleEvent(key, scope string, i int, now time.Time) *contract.Event {
	return &contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           key,
		Scope:         scope,
		Version:       1,
		Kind:          contract.KindPut,
		Op:            contract.OpSet,
		After:         json.RawMessage(scanValue(i, now)),
		CreatedAt:     now,
		Semantics:     contract.Semantics{Purpose: "other", Producer: "eskvbench"},
		Principal:     "eskvbench",
		TS:            now,
	}
}

// scopesOf returns the scopes of st's projects.
func scopesOf(b *bench, st scaleStep) []string {
	out := make([]string, 0, len(st.projects))
	for _, project := range st.projects {
		out = append(out, contract.ScopeOf(b.key(project, scaleKeyPath(0))))
	}
	return out
}

// loadScaleStep produces the step's put events to kv.changes and waits
// until the stack's projector has applied them.
func (b *bench) loadScaleStep(ctx context.Context, cl *kgo.Client, st scaleStep, now time.Time, tb *topicBytes) (time.Duration, error) {
	start := time.Now()
	var (
		mu     sync.Mutex
		ends   = map[int32]int64{}
		failed atomic.Pointer[error]
	)
	for _, project := range st.projects {
		k, err := contract.ParseKey(b.key(project, scaleKeyPath(0)))
		if err != nil {
			return 0, err
		}
		part := changelog.Partition(k.Scope(), int32(b.c.partitions))
		for i := -1; i < st.perProject; i++ {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			if p := failed.Load(); p != nil {
				return 0, *p
			}
			e := declarationEvent(k.Scope(), now) // first: the scan's fields (scanFields)
			if i >= 0 {
				e = scaleEvent(b.key(project, scaleKeyPath(i)), k.Scope(), i, now)
			}
			rec, err := changelog.Record(e, scaleTopic, part, "eskvbench")
			if err != nil {
				return 0, err
			}
			n := len(rec.Key) + len(rec.Value)
			for _, h := range rec.Headers {
				n += len(h.Key) + len(h.Value)
			}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				tb.records.Add(1)
				tb.bytes.Add(int64(n))
				mu.Lock()
				ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
				mu.Unlock()
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	if p := failed.Load(); p != nil {
		return 0, *p
	}
	b.logf("23 produced %s in %s; waiting for the projector", st.title, time.Since(start).Round(time.Second))
	store := projection.New(b.s.db)
	deadline := time.Now().Add(scaleLoadTimeout)
	for {
		offs, err := store.Offsets(ctx, scaleTopic)
		if err != nil {
			return 0, err
		}
		done := true
		for p, end := range ends {
			done = done && offs[p] >= end
		}
		if done {
			return time.Since(start), b.awaitFieldsReady(ctx, scopesOf(b, st))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the projector did not apply the events within %s", scaleLoadTimeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitServing waits until the writer answers a GET of key 0 of every
// project of st with 200. Records it did not append make the writer give
// their partitions up ("another writer appended to the partition") and
// take them back after its session timeout, fencing and catching up
// again.
func (b *bench) waitServing(ctx context.Context, st scaleStep) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, len(st.projects))
	var wg sync.WaitGroup
	for i, project := range st.projects {
		wg.Go(func() {
			key := b.key(project, scaleKeyPath(0))
			var buf bytes.Buffer
			errs[i] = proc.WaitFor(ctx, 3*time.Minute, "the writer to serve "+key, nil, func() bool {
				status, err := b.get(ctx, key, &buf)
				return err == nil && status == http.StatusOK
			})
		})
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// scaleMeasureStep times GETs of random keys of the step, listings of
// 1,000 keys of a random project and figure 8b's filtered scan of a
// random project, each after an unmeasured quarter as many (caches warm
// as they would be on a stack that serves these keys).
func (b *bench) scaleMeasureStep(ctx context.Context, st scaleStep, now time.Time) scaleMeasure {
	b.logf("23 %s: warming up, then %d GETs, %d listings, %d filtered scans", st.title, b.c.n, b.c.listN, b.c.scanN)
	b.scaleTimeStep(ctx, st, now, 4)
	return b.scaleTimeStep(ctx, st, now, 1)
}

// scaleTimeStep is scaleMeasureStep's measure, with 1/div as many
// requests of each kind.
func (b *bench) scaleTimeStep(ctx context.Context, st scaleStep, now time.Time, div int) scaleMeasure {
	rng := rand.New(rand.NewPCG(uint64(len(st.projects)*div), uint64(st.perProject)))
	project := func() string { return st.projects[rng.IntN(len(st.projects))] }
	var buf bytes.Buffer
	lat, errs, elapsed := timed(ctx, max(b.c.n/div, 1), true, func() (int, error) {
		return b.get(ctx, b.key(project(), scaleKeyPath(rng.IntN(st.perProject))), &buf)
	})
	var m scaleMeasure
	m.get = newResult("", "GET random key, 1 client, "+st.title, summarize(lat), errs, elapsed)
	m.get.Note = "GET /v1/kv/{key} (linearizable)"

	listed := func(title, note string, n int, q func(prefix string) url.Values) result {
		lat, errs, elapsed := timed(ctx, max(n/div, 1), false, func() (int, error) {
			prefix := b.key(project(), "jobs/")
			status, got, err := b.getList(ctx, b.s.writerURL+"/v1/kv?"+q(prefix).Encode(), true)
			if err == nil && status == http.StatusOK && got == 0 {
				err = errors.New("empty page")
			}
			return status, err
		})
		r := newResult("", title+", 1 client, "+st.title, summarize(lat), errs, elapsed)
		r.Note = note
		return r
	}
	m.list = listed(fmt.Sprintf("list %d keys", scaleListPage), "GET /v1/kv?prefix=…/jobs/&limit=1000 (the first page)", b.c.listN,
		func(prefix string) url.Values {
			return url.Values{"prefix": {prefix}, "limit": {strconv.Itoa(scaleListPage)}}
		})
	old := now.Add(-5 * time.Minute).UTC().Format(time.RFC3339)
	m.scan = listed("filtered scan (8b: updated_at lt now-5m, 1 in 100)", fmt.Sprintf("figure 8b's scan, a page of %d", scanPage), b.c.scanN,
		func(prefix string) url.Values {
			return url.Values{"prefix": {prefix}, "limit": {strconv.Itoa(scanPage)}, "field": {"updated_at"}, "op": {"lt"}, "value": {old}}
		})
	return m
}

// scaleRSS is figure 23d: the writer's resident memory after
// -scale-touch requests (GETs, every tenth a CAS write) of random keys of
// st from 16 clients, against the memory at the baseline.
func (b *bench) scaleRSS(ctx context.Context, st scaleStep, base int64) result {
	const clients = 16
	title := fmt.Sprintf("writer RSS after %s requests over %s (GETs, 1 in 10 a write)", thousands(b.c.scaleTouch), st.title)
	b.logf("23d %s", title)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 23))
			var buf bytes.Buffer
			for ctx.Err() == nil && next.Add(1) <= int64(b.c.scaleTouch) {
				i := rng.IntN(st.perProject)
				key := b.key(st.projects[rng.IntN(len(st.projects))], scaleKeyPath(i))
				var status int
				var err error
				if i%10 == 0 {
					status, err = b.cas(ctx, &writeState{key: key, version: 1, seq: 1})
				} else {
					status, err = b.get(ctx, key, &buf)
				}
				if err != nil || (status != http.StatusOK && status != http.StatusConflict) {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	after, err := stats.StatusBytes(b.s.writerPID, "VmRSS")
	r := result{Step: "23d", Title: title, Ops: b.c.scaleTouch, Errors: int(failed.Load())}
	if err != nil || base == 0 {
		r.Verdict, r.Note = verdictSkip, fmt.Sprintf("could not read the writer's VmRSS: %v", err)
		return r
	}
	bound := int64(2 * writer.DefaultStateCacheBytes)
	r.Target = "growth ≤ 2 × ESKV_STATE_CACHE_BYTES (" + fmtBytes(bound) + ")"
	r.Verdict = verdictMiss
	if after-base <= bound {
		r.Verdict = verdictPass
	}
	r.Note = fmt.Sprintf("VmRSS %s at the baseline, %s after (growth %s); the writer's memory for keys is bounded by ESKV_STATE_CACHE_BYTES "+
		"(default %s, the states of applied keys), ESKV_MAX_OVERLAY (100,000 unprojected keys per partition) and ESKV_REQUEST_ID_WINDOW, "+
		"not by the key count; twice the cache leaves room for Go's heap growth (GOGC=100)",
		fmtBytes(base), fmtBytes(after), fmtBytes(after-base), fmtBytes(writer.DefaultStateCacheBytes))
	return r
}

// takeover is figure 23e: with a second writer started next to the
// stack's, SIGKILL it -scale-takeovers times and time, for each partition
// it owned, until a write to that partition (sent to the surviving writer,
// which forwards to the owner) is acknowledged again.
func (b *bench) takeover(ctx context.Context) result {
	title := fmt.Sprintf("partition takeover: SIGKILL a writer owning some of %d partitions, until each answers a write", b.c.partitions)
	r := result{Step: "23e", Title: title}
	ports, err := proc.FreePorts(1)
	if err != nil {
		r.Verdict, r.Note = verdictSkip, err.Error()
		return r
	}
	const id2 = "eskvbench-writer-2"
	url2 := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	w2 := b.s.local.Service("writer-2", "writer", nil, append(b.s.local.Env(benchLogLevel, b.c.partitions),
		"ESKV_DEV_TOKEN="+b.s.token, "ESKV_WRITER_ID="+id2, fmt.Sprintf("ESKV_HTTP_ADDR=127.0.0.1:%d", ports[0]))...)
	w2.URL = url2
	defer w2.Stop(15 * time.Second)
	// A project on each partition, and one key in it per partition.
	projects := map[int32]string{}
	for i := 0; len(projects) < b.c.partitions && i < 100*b.c.partitions; i++ {
		p := fmt.Sprintf("takeover-%s-%d", b.runID, i)
		projects[changelog.Partition("tenant/"+tenant+"/project/"+p, int32(b.c.partitions))] = p
	}
	store := projection.New(b.s.db)
	var lat latencies
	errs := errorCounts{}
	start := time.Now()
	for round := range b.c.scaleTakeovers {
		if err := w2.Start(); err != nil {
			r.Verdict, r.Note = verdictSkip, err.Error()
			return r
		}
		victims, err := b.waitOwnership(ctx, store, id2, url2)
		if err != nil {
			r.Verdict, r.Note = verdictSkip, fmt.Sprintf("round %d: %v", round+1, err)
			return r
		}
		b.logf("23e round %d: SIGKILL writer-2, owner of partitions %v", round+1, victims)
		killed := time.Now()
		w2.Kill()
		// The writers' logs time the phases after it (docs/performance.md, 23e).
		b.logf("23e round %d: writer-2 killed at %s", round+1, killed.UTC().Format(time.RFC3339Nano))
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, p := range victims {
			wg.Go(func() {
				st := &writeState{key: b.key(projects[p], "takeover")}
				for ctx.Err() == nil && time.Since(killed) < scaleTakeoverTimeout {
					status, err := b.cas(ctx, st)
					if err == nil && status == http.StatusOK {
						mu.Lock()
						lat = append(lat, time.Since(killed))
						mu.Unlock()
						return
					}
					if err == nil && status == http.StatusConflict {
						continue // st.version is the current one now
					}
					mu.Lock()
					errs[status]++
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			break
		}
	}
	s := summarize(lat)
	r = newResult("23e", title, s, errorCounts{}, time.Since(start))
	r.target(targetP99, targetTakeoverP99)
	r.Note = fmt.Sprintf("%d kills of a second writer (writer-2, started next to the stack's writer), %d partition takeovers timed from the SIGKILL "+
		"to the first write acknowledged through the surviving writer; %d refused attempts meanwhile (retried every 10ms), by status %v; "+
		"a killed writer's partitions move once the Kafka group's session timeout (ESKV_KAFKA_SESSION_TIMEOUT: 3s where the broker accepts it, "+
		"as the bench's devbroker does) expires, which bounds this figure from below",
		b.c.scaleTakeovers, s.N, errs.total(), map[int]int(errs))
	return r
}

// waitOwnership waits until every partition has an owner, writer-2
// (id at url) owning at least one of them and answering /readyz, and
// returns the partitions it owns.
func (b *bench) waitOwnership(ctx context.Context, store *projection.Store, id, url string) ([]int32, error) {
	var victims []int32
	err := proc.WaitFor(ctx, 3*time.Minute, "writer-2 to own partitions", nil, func() bool {
		owners, err := store.Owners(ctx)
		if err != nil || len(owners) < b.c.partitions || !proc.HTTPOK(url+"/readyz") || !proc.HTTPOK(b.s.writerURL+"/readyz") {
			return false
		}
		victims = victims[:0]
		for p, o := range owners {
			if o.ID == id {
				victims = append(victims, p)
			}
		}
		return len(victims) > 0
	})
	return victims, err
}

// freeProjection makes room for the rebuild's copy (23f) once every
// figure that reads the loaded projection is taken: it stops the stack's
// writer and projector, so that nothing writes to the projection any more,
// and empties the loaded tables. The rebuild reads kv.changes alone, and
// its copy then takes the disk the loaded projection took, so figure 23
// needs room for the keys once, not twice (scaleDiskNeed).
func (b *bench) freeProjection(ctx context.Context) error {
	b.logf("23f stopping the writer and the projector, emptying the loaded projection to make room for the rebuild's copy")
	b.s.stopServices()
	if _, err := b.s.db.Exec(ctx, `TRUNCATE kv_fields, kv_history, kv_entries`); err != nil {
		return fmt.Errorf("emptying the loaded projection before the rebuild: %w", err)
	}
	return nil
}

// rebuild is figure 23f: `projector rebuild -into` a fresh schema from
// kv.changes, the product's rebuild, in keys/s.
func (b *bench) rebuild(ctx context.Context) result {
	title := "projection rebuild from the compacted topic (projector rebuild -into a fresh schema)"
	r := result{Step: "23f", Title: title}
	schema := "eskvbench_rebuild_" + b.runID
	b.logf("23f %s", title)
	cmd := exec.CommandContext(ctx, filepath.Join(b.s.local.Bin, "projector"), "rebuild", "-into", schema)
	cmd.Env = append(proc.BaseEnv(), b.s.local.Env("info", b.c.partitions)...) // its phases (rebuildPhases)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := projection.DropSchema(dctx, b.s.db, schema); derr != nil {
			b.logf("23f dropping schema %s: %v", schema, derr)
		}
	}()
	if err != nil {
		r.Verdict, r.Note = verdictSkip, fmt.Sprintf("projector rebuild: %v: %s", err, tailOf(stderr.String(), 500))
		return r
	}
	events, keys, took, err := parseRebuild(out.String())
	if err != nil {
		r.Verdict, r.Note = verdictSkip, err.Error()
		return r
	}
	r.Ops, r.Seconds = int(keys), took.Seconds()
	if took > 0 {
		r.OpsPerSec = float64(keys) / took.Seconds()
	}
	r.target(targetThroughput, targetRebuildPerSec)
	r.Target = fmt.Sprintf("≥ %s keys/s", thousands(targetRebuildPerSec))
	r.Note = fmt.Sprintf("%s events read, %s keys in %s: %.0f keys/s (kfake does not compact: every event the run produced was read)",
		thousands(int(events)), thousands(int(keys)), took.Round(time.Millisecond), r.OpsPerSec)
	if p := rebuildPhases(stderr.String(), 6); p != "" {
		r.Note += "; " + p
	}
	return r
}

// bytesPerKey is figure 23g: the projection's tables (kv_entries and
// kv_history with their indexes and TOAST, and kv_fields) over its keys,
// and the topic's record bytes over its records.
func (b *bench) bytesPerKey(ctx context.Context, produced *topicBytes) result {
	r := result{Step: "23g", Title: "bytes per key in Postgres and in the topic"}
	var entries, history, fields, keys int64
	err := b.s.db.QueryRow(ctx, `SELECT pg_total_relation_size('kv_entries'), pg_total_relation_size('kv_history'),
		pg_total_relation_size('kv_fields'), (SELECT count(*) FROM kv_entries)`).Scan(&entries, &history, &fields, &keys)
	if err != nil || keys == 0 {
		r.Verdict, r.Note = verdictSkip, fmt.Sprintf("table sizes: %v (%d keys)", err, keys)
		return r
	}
	recs, recBytes := produced.records.Load(), produced.bytes.Load()
	r.Ops = int(keys)
	r.Note = fmt.Sprintf("Postgres: %d B/key in kv_entries + kv_history with their indexes (%s + %s), %d B/key with kv_fields (%s) too, over %s keys; "+
		"topic: %d B/record of key, value and headers uncompressed (%s records produced by the bench)",
		(entries+history)/keys, fmtBytes(entries), fmtBytes(history), (entries+history+fields)/keys, fmtBytes(fields), thousands(int(keys)),
		recBytes/max(recs, 1), thousands(int(recs)))
	if dir := b.brokerDataDir(); dir != "" {
		if n, err := dirBytes(dir); err == nil {
			r.Note += fmt.Sprintf("; the broker's data directory: %s (%d B/record, every record of the run, in batches compressed with franz-go's default; the bench's batches are larger than a writer's, so compress better)", fmtBytes(n), n/max(recs, 1))
		}
	}
	return r
}

// brokerDataDir is the broker's data directory, from its environment.
func (b *bench) brokerDataDir() string {
	if b.s.local.Broker == nil {
		return ""
	}
	for _, e := range b.s.local.Broker.Env {
		if v, ok := strings.CutPrefix(e, "ESKV_BROKER_DATA="); ok {
			return v
		}
	}
	return ""
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	return n, err
}
