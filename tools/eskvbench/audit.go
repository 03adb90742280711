package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// Auditor figures: 7a its lag during run 2a, 7b its ingest rate on the
// whole backlog of the run.
const (
	targetAuditorRowsPerSec = 20000
	auditorLagMetric        = "eskv_auditor_lag_seconds"
)

// auditorSetup is the auditor side of a stack the bench started.
type auditorSetup struct {
	env       []string // brokers, partitions, ClickHouse address, key
	chAddr    string
	databases []string // created by the auditors; dropped at close
}

// auditorAvailable reports whether ClickHouse answers at addr, saying so
// on progress when it does not.
func auditorAvailable(ctx context.Context, addr string, progress io.Writer) bool {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, DialTimeout: 3 * time.Second})
	if err == nil {
		defer conn.Close()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err = conn.Ping(ctx)
	}
	if err != nil {
		fmt.Fprintf(progress, "eskvbench: ClickHouse at %s is unreachable (bash scripts/ensure-clickhouse.sh starts it): auditor figures are skipped: %v\n", addr, err)
	}
	return err == nil
}

// startFirstAuditor starts the auditor of the stack, in the production
// group, and waits until it is ready.
func (s *stack) startFirstAuditor(ctx context.Context, c config) error {
	s.auditor = &auditorSetup{chAddr: c.clickhouseAddr,
		env: []string{"ESKV_BROKERS=" + s.local.Brokers, fmt.Sprintf("ESKV_PARTITIONS=%d", c.partitions), "ESKV_LOG_LEVEL=" + benchLogLevel,
			"ESKV_CLICKHOUSE_ADDR=" + c.clickhouseAddr, "ESKV_AUDIT_KEY=" + localstack.RandomHex(32), "ESKV_AUDIT_KEY_ID=eskvbench"},
	}
	p, err := s.startAuditor(ctx, "auditor", "kv-auditor")
	if err != nil {
		return err
	}
	if err := s.waitReady(ctx, 60*time.Second, p, "/readyz"); err != nil {
		return err
	}
	s.auditorURL, s.auditorPID = p.URL, p.PID()
	return nil
}

// startAuditor starts `auditor serve` named name in group with a fresh
// ClickHouse database and waits until it reports its address.
func (s *stack) startAuditor(ctx context.Context, name, group string, env ...string) (*proc.Proc, error) {
	a := s.auditor
	db := "eskvbench_" + localstack.RandomHex(6)
	a.databases = append(a.databases, db)
	p, err := s.startListening(name, []string{"serve"}, "ESKV_AUDITOR_ADDR", "ESKV_AUDITOR_ADDR_FILE", append(append(a.env,
		"ESKV_CLICKHOUSE_DATABASE="+db, "ESKV_AUDITOR_GROUP="+group, "ESKV_AUDITOR_ID="+name), env...)...)
	if err != nil {
		return nil, err
	}
	_, err = s.waitListening(ctx, p)
	return p, err
}

// dropAuditDatabases drops the ClickHouse databases of the bench's
// auditors.
func (a *auditorSetup) dropDatabases(progress io.Writer) {
	if a == nil || len(a.databases) == 0 {
		return
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{a.chAddr}, DialTimeout: 3 * time.Second})
	if err != nil {
		fmt.Fprintf(progress, "eskvbench: drop ClickHouse databases %v: %v\n", a.databases, err)
		return
	}
	defer conn.Close()
	for _, db := range a.databases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db); err != nil {
			fmt.Fprintf(progress, "eskvbench: drop ClickHouse database %s: %v\n", db, err)
		}
		cancel()
	}
}

// auditorLag is figure 7a: the auditor's lag histogram (event ts to
// ClickHouse accepting the row) over the observations made during 2a.
func (b *bench) auditorLag(before, after metrics, rate float64) result {
	const title = "auditor lag histogram (event ts -> row in ClickHouse)"
	if b.s.auditorURL == "" {
		return result{Step: "7a", Title: title, Verdict: verdictSkip,
			Note: "no auditor (ClickHouse unreachable, -auditor=false, or give -auditor-url with -url)"}
	}
	r, over := histogramFigure("7a", title, b.s.auditorURL, auditorLagMetric, before, after)
	if r.Ops > 0 {
		r.Note = fmt.Sprintf("%s: bucket deltas over run 2a at %.0f writes/s, interpolated%s; includes the auditor's batch linger (500 ms by default); no target",
			auditorLagMetric, rate, map[bool]string{true: "; p99 beyond the last bucket", false: ""}[over])
	}
	return r
}

// auditorIngest is figure 7b: a second auditor, in a group of its own with
// an empty database, reads everything the run wrote (kv.changes and
// kv.conflicts) and inserts it; rows/s from its first row to the last.
func (b *bench) auditorIngest(ctx context.Context) result {
	r := result{Step: "7b", Title: "auditor ingest of the run's backlog (fresh group and database)", Verdict: verdictSkip}
	if b.s.auditor == nil {
		r.Note = "no auditor (ClickHouse unreachable or -auditor=false; with -url the backlog measure needs the bench's own stack)"
		return r
	}
	ends, err := b.s.endOffsets(ctx)
	if err != nil {
		r.Note = err.Error()
		return r
	}
	var records int64
	for _, ps := range ends {
		for _, o := range ps {
			records += o
		}
	}
	start := time.Now()
	// Batches of 5000 (not 20000), so that even a short run's backlog is
	// several batches and the rate after the first one means something.
	p, err := b.s.startAuditor(ctx, "auditor-ingest", "eskvbench-ingest-"+b.runID, "ESKV_AUDITOR_MAX_BATCH=5000")
	if err != nil {
		r.Note = err.Error()
		return r
	}
	defer p.Stop(15 * time.Second)
	var (
		t0, t1       time.Time
		rows0, rows1 float64
	)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		m := b.scrape(ctx, p.URL)
		if m != nil {
			rows := m.sum("eskv_auditor_rows_total")
			now := time.Now()
			if t0.IsZero() && rows > 0 {
				t0, rows0 = now, rows
			}
			if caughtUp(m, ends) {
				t1, rows1 = now, rows
				break
			}
		}
		if !p.Alive() {
			r.Note = fmt.Sprintf("auditor-ingest exited: %v", p.Err())
			return r
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.Note = "auditor-ingest did not catch up within 10 minutes"
			return r
		}
		time.Sleep(25 * time.Millisecond)
	}
	r.Ops = int(rows1)
	r.Seconds = t1.Sub(start).Seconds()
	if t1.After(t0) && rows1 > rows0 {
		r.OpsPerSec = (rows1 - rows0) / t1.Sub(t0).Seconds()
	}
	r.target(targetThroughput, targetAuditorRowsPerSec)
	r.Note = fmt.Sprintf("%d rows (events and conflicts, %d records with transaction markers) in %.2fs from start, %.0f of them in the %.2fs after its first batch of 5000 was in; "+
		"rows/s is that part (start, group join and the first batch excluded); broker, auditor and ClickHouse share the machine",
		int(rows1), records, t1.Sub(start).Seconds(), rows1-rows0, t1.Sub(t0).Seconds())
	if rows1 < 20000 {
		r.Note += "; fewer than 20,000 rows: a longer -duration gives a steadier figure"
	}
	return r
}

// endOffsets returns the last stable offsets of both topics.
func (s *stack) endOffsets(ctx context.Context) (map[string]map[int32]int64, error) {
	cl, err := kafkaconf.Conn{}.NewClient("bench", []string{s.local.Brokers}) // the tool's own plaintext local stack
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := map[string]map[int32]int64{}
	for _, t := range []string{"kv.changes", "kv.conflicts"} {
		lo, err := adm.ListCommittedOffsets(ctx, t)
		if err == nil {
			err = lo.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("end offsets of %s: %w", t, err)
		}
		out[t] = map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { out[t][o.Partition] = o.Offset })
	}
	return out, nil
}
