package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// diff is one run of projector diff.
type diff struct {
	c               config
	schema, against string
	limit           int
	wait            time.Duration
	keep            bool
	stdout, stderr  io.Writer
	pool            *pgxpool.Pool
}

// diffCmd compares the kv_entries of two projections. Without -schema it
// answers "does the live projection equal the fold of the log?": it
// folds the log into a temporary schema up to the live projection's
// stored offsets, compares, and drops the schema.
func diffCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	r := diff{stdout: stdout, stderr: stderr}
	fs := newFlags("diff", &r.c, slog.LevelWarn, stderr)
	fs.StringVar(&r.schema, "schema", "", "schema to compare, e.g. a rebuild; empty: fold the log into a temporary schema, compare it, drop it")
	fs.StringVar(&r.against, "against", "", "schema to compare with (default: the schema of -postgres-url, normally public: the live projection)")
	fs.IntVar(&r.limit, "limit", 20, "differing keys to print (the count covers them all)")
	fs.DurationVar(&r.wait, "wait", 30*time.Second, "without -schema: how long to wait for the live projection to reach the log's last stable offsets taken at start")
	fs.BoolVar(&r.keep, "keep", false, "without -schema: keep the temporary schema, for inspection")
	if err := r.c.parse(fs, args); err != nil {
		return err
	}
	var err error
	if r.pool, err = r.c.postgres.Open(ctx); err != nil {
		return err
	}
	defer r.pool.Close()
	if r.against == "" {
		if r.against, err = projection.CurrentSchema(ctx, r.pool); err != nil {
			return err
		}
	}
	if r.schema == "" {
		tmp, drop, err := r.foldLog(ctx)
		if err != nil {
			return err
		}
		defer drop()
		r.schema = tmp
	}
	d, err := projection.Compare(ctx, r.pool, projection.DiffSpec{Schema: r.schema, Against: r.against, Topic: r.c.kafka.Topic, Limit: r.limit})
	if err != nil {
		return err
	}
	printDiff(stdout, d, r.limit)
	return verdict(d)
}

// foldLog gives the live projection a bounded time to reach the log's end
// now, then folds the log up to the offsets it stored into a temporary
// schema. drop drops that schema (or, with -keep, says it was kept).
func (r *diff) foldLog(ctx context.Context) (tmp string, drop func(), err error) {
	lsos, err := lastStableOffsets(ctx, &r.c)
	if err != nil {
		return "", nil, err
	}
	began := time.Now()
	stored, caughtUp, err := r.waitCaughtUp(ctx, lsos)
	if err != nil {
		return "", nil, err
	}
	// Said once the rebuild up to the stored offsets succeeded: a stored
	// offset past the log's end fails it (the topic was reset).
	progress := fmt.Sprintf("the live projection (%s) reached the log's last stable offsets taken at start (waited %s); comparing with the log up to its stored offsets\n",
		r.against, time.Since(began).Round(time.Millisecond))
	if !caughtUp {
		behind, parts := trail(lsos, stored)
		progress = fmt.Sprintf("the live projection (%s) trails the log's last stable offsets taken at start by %d offsets (partitions %v) after waiting %s; comparing with the log up to its stored offsets\n",
			r.against, behind, parts, r.wait)
	}
	if tmp, err = tempSchema(); err != nil {
		return "", nil, err
	}
	if _, err := projection.CreateSchema(ctx, r.pool, tmp, false); err != nil {
		return "", nil, err
	}
	drop = func() {
		if r.keep {
			fmt.Fprintf(r.stdout, "kept schema %s\n", tmp)
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := projection.DropSchema(dctx, r.pool, tmp); err != nil {
			fmt.Fprintf(r.stderr, "projector: dropping the temporary schema %s failed: %v\n", tmp, err)
		}
	}
	// The fold's kv_history format does not matter: Compare reads either.
	st, _, err := rebuildInto(ctx, &r.c, rebuildTarget{schema: tmp, batch: projector.DefaultMaxBatch, format: projection.HistoryJSONB, ends: stored}, r.c.logger(r.stderr))
	if err != nil {
		drop()
		return "", nil, err
	}
	fmt.Fprint(r.stdout, progress)
	fmt.Fprintf(r.stdout, "folded %s into the temporary schema %s up to those offsets: %d events read in %s\n",
		r.c.kafka.Topic, tmp, st.Events, st.Took.Round(time.Millisecond))
	return tmp, drop, nil
}

func keysDiffer(n int64) string {
	if n == 1 {
		return "1 key differs"
	}
	return fmt.Sprintf("%d keys differ", n)
}

// verdict is nil when d is equal, else the exit-1 error.
func verdict(d *projection.Diff) error {
	if d.Equal() {
		return nil
	}
	if d.Differing == 0 {
		return &exitError{code: 1, err: fmt.Errorf("%s and %s were folded from different topics", d.Schema, d.Against)}
	}
	return &exitError{code: 1, err: fmt.Errorf("%s between %s and %s", keysDiffer(d.Differing), d.Schema, d.Against)}
}

// printDiff writes the differing keys (up to limit), the counts and the
// verdict.
func printDiff(w io.Writer, d *projection.Diff, limit int) {
	if d.TopicsDiffer() {
		fmt.Fprintf(w, "topics differ: %s was folded from the topic of ID %s, %s from the topic of ID %s: the topic was deleted and recreated\n",
			d.Schema, d.TopicID, d.Against, d.AgainstTopicID)
	}
	for _, k := range d.Keys {
		switch {
		case !k.InAgainst:
			fmt.Fprintf(w, "- %s: only in %s (version %d)\n", k.Key, d.Schema, k.Version)
		case !k.InSchema:
			fmt.Fprintf(w, "- %s: only in %s (version %d)\n", k.Key, d.Against, k.AgainstVersion)
		case k.Version == k.AgainstVersion:
			fmt.Fprintf(w, "- %s: %s (version %d in both)\n", k.Key, differ(k.Columns), k.Version)
		default:
			fmt.Fprintf(w, "- %s: %s (version %d in %s, %d in %s)\n", k.Key, differ(k.Columns),
				k.Version, d.Schema, k.AgainstVersion, d.Against)
		}
	}
	if more := d.Differing - int64(len(d.Keys)); more > 0 {
		fmt.Fprintf(w, "... and %d more differing keys (-limit %d)\n", more, limit)
	}
	if !maps.Equal(d.Offsets, d.AgainstOffsets) {
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(union(d.Offsets, d.AgainstOffsets))) {
			if d.Offsets[p] != d.AgainstOffsets[p] {
				parts = append(parts, fmt.Sprintf("%d: %d/%d", p, d.Offsets[p], d.AgainstOffsets[p]))
			}
		}
		fmt.Fprintf(w, "stored offsets differ (partition: %s/%s): %s; keys changed past the smaller one are not compared\n",
			d.Schema, d.Against, strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "kv_entries: %d differing keys; %d rows in %s, %d in %s; %d keys changed past the common offsets, not compared\n",
		d.Differing, d.Entries, d.Schema, d.AgainstEntries, d.Against, d.NotCompared)
	fmt.Fprintf(w, "kv_history (information only: a rebuild from the compacted topic keeps each key's latest event): %d rows in %s, %d in %s; %d rows of %s missing from or different in %s\n",
		d.History, d.Schema, d.AgainstHistory, d.Against, d.HistoryMismatch, d.Schema, d.Against)
	switch {
	case d.Equal():
		fmt.Fprintln(w, "result: equal")
	case d.Differing == 0:
		fmt.Fprintln(w, "result: DIFFERENT (folded from different topics)")
	default:
		fmt.Fprintf(w, "result: DIFFERENT (%s)\n", keysDiffer(d.Differing))
	}
}

// differ says which columns differ: "value differs", "live, value differ".
func differ(cols []string) string {
	if len(cols) == 1 {
		return cols[0] + " differs"
	}
	return strings.Join(cols, ", ") + " differ"
}

func union(a, b map[int32]int64) map[int32]int64 {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// lastStableOffsets lists the last stable offset of every partition of
// the changes topic.
func lastStableOffsets(ctx context.Context, c *config) (map[int32]int64, error) {
	cl, err := c.kafka.Conn().NewClient("projector_diff", c.kafka.BrokerList())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := changelog.Check(ctx, adm, c.kafka.Topics()); err != nil {
		return nil, err
	}
	listed, err := adm.ListCommittedOffsets(ctx, c.kafka.Topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets of %s: %w", c.kafka.Topic, err)
	}
	out := make(map[int32]int64)
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

// waitCaughtUp polls the stored offsets of the live projection (schema
// r.against) until each partition reaches lsos or r.wait passes; it
// returns the last stored offsets read and whether they reached lsos.
func (r *diff) waitCaughtUp(ctx context.Context, lsos map[int32]int64) (map[int32]int64, bool, error) {
	pool, schema, topic, wait := r.pool, r.against, r.c.kafka.Topic, r.wait
	deadline := time.Now().Add(wait)
	for {
		stored, err := projection.OffsetsIn(ctx, pool, schema, topic)
		if err != nil {
			return nil, false, err
		}
		if behind, _ := trail(lsos, stored); behind == 0 {
			return stored, true, nil
		}
		if !time.Now().Before(deadline) {
			return stored, false, nil
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(min(100*time.Millisecond, time.Until(deadline))):
		}
	}
}

// trail returns how many offsets stored is behind lsos in total, and in
// which partitions.
func trail(lsos, stored map[int32]int64) (int64, []int32) {
	var behind int64
	var parts []int32
	for _, p := range slices.Sorted(maps.Keys(lsos)) {
		if d := lsos[p] - stored[p]; d > 0 {
			behind += d
			parts = append(parts, p)
		}
	}
	return behind, parts
}

// tempSchema returns a fresh schema name for a diff's rebuild.
func tempSchema() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "eskv_diff_" + hex.EncodeToString(b[:]), nil
}
