package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
)

// rebuildSchema is where the harness rebuilds the projection from the log.
const rebuildSchema = "chaos_rebuild"

// projFindings compare the live projection with the log: the fold and
// the acknowledged writes (logcheck), and a rebuild from the log.
type projFindings struct {
	logcheck.ProjectionFindings
	// Rebuild is the diff of a rebuild from the log (`projector rebuild`)
	// against the live projection; Tool is what `projector diff` said.
	Rebuild *projection.Diff
	Tool    toolRun
	// Formats counts the live kv_history rows by the format their
	// projector wrote them in (ESKV_HISTORY_FORMAT: jsonb or text).
	Formats map[string]int
}

// diffCount is what "projection diff" prints: every difference found.
func (f projFindings) diffCount() int64 {
	n := int64(len(f.FoldDiffs))
	if f.Tool.diffExit != 0 {
		n++
	}
	if f.Rebuild != nil {
		n += f.Rebuild.Differing + f.Rebuild.NotCompared + f.Rebuild.HistoryMismatch
		if f.Rebuild.History != f.Rebuild.AgainstHistory {
			n++
		}
	}
	return n
}

// waitProjected waits until the live projection stored, for every
// partition, an offset past the log's last event.
func waitProjected(ctx context.Context, s *stack, l *logcheck.Log, timeout time.Duration) error {
	ends := l.LastEventEnds()
	var lag string
	err := proc.WaitFor(ctx, timeout, "the projection to hold every event of the log", nil, func() bool {
		got, err := s.store.Offsets(ctx, s.topics.Changes)
		if err != nil {
			lag = err.Error()
			return false
		}
		for p, e := range ends {
			if got[p] < e {
				lag = fmt.Sprintf("partition %d stored %d, log's last event ends at %d", p, got[p], e)
				return false
			}
		}
		return true
	})
	if err != nil {
		s.dumpActivity(ctx)
		groups := s.describeGroups(ctx)
		return fmt.Errorf("%w (%s; consumer groups: %s; Postgres sessions in %s)", err, lag, groups, filepath.Join(s.Dir, "pg-activity.txt"))
	}
	return nil
}

// describeGroups describes the projector's and the writers' consumer
// groups as the broker sees them.
func (s *stack) describeGroups(ctx context.Context) string {
	cl, err := kafkaconf.Conn{}.NewClient("chaos", []string{s.Brokers}) // the tool's own plaintext local stack
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, "kv-projector", "kv-writer")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, g := range gs.Sorted() {
		var ms []string
		for _, m := range g.Members {
			id := m.MemberID
			if m.InstanceID != nil {
				id = *m.InstanceID
			}
			ms = append(ms, id)
		}
		out = append(out, fmt.Sprintf("%s %s (%d members: %s; err %v)", g.Group, g.State, len(ms), strings.Join(ms, ", "), g.Err))
	}
	return strings.Join(out, "; ")
}

// dumpActivity writes the database's sessions and the locks they wait for
// to the run directory: a projector that stopped applying is often
// waiting for a lock.
func (s *stack) dumpActivity(ctx context.Context) {
	rows, err := s.DB.Query(ctx, `
SELECT a.pid, a.application_name, a.client_addr::text, a.state, coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''),
    coalesce(a.xact_start::text, ''), pg_blocking_pids(a.pid)::text, left(a.query, 200)
FROM pg_stat_activity a WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() ORDER BY a.xact_start NULLS LAST`)
	if err != nil {
		return
	}
	var b strings.Builder
	var pid int32
	var app, addr, state, wtype, wevent, xstart, blockers, query *string
	_, _ = pgx.ForEachRow(rows, []any{&pid, &app, &addr, &state, &wtype, &wevent, &xstart, &blockers, &query}, func() error {
		fmt.Fprintf(&b, "pid %d app %q from %s: %s, waiting %s/%s, transaction since %s, blocked by %s: %s\n",
			pid, deref(app), deref(addr), deref(state), deref(wtype), deref(wevent), deref(xstart), deref(blockers), deref(query))
		return nil
	})
	_ = os.WriteFile(filepath.Join(s.Dir, "pg-activity.txt"), []byte(b.String()), 0o644)
}

// checkProjection compares the live projection with the fold of the log,
// looks up every acknowledged write in kv_history, and rebuilds the
// projection from the log with the projector's own commands to diff it
// with the live one.
func checkProjection(ctx context.Context, s *stack, l *logcheck.Log, acks []logcheck.Acked) (projFindings, error) {
	var f projFindings
	var err error
	if f.ProjectionFindings, err = logcheck.Projection(ctx, s.DB, l, acks); err != nil {
		return f, err
	}
	if f.Formats, err = historyFormats(ctx, s); err != nil {
		return f, err
	}
	f.Rebuild, f.Tool, err = rebuild(ctx, s)
	return f, err
}

// historyFormats counts the live kv_history rows by format.
func historyFormats(ctx context.Context, s *stack) (map[string]int, error) {
	rows, err := s.DB.Query(ctx, `SELECT CASE WHEN event IS NULL THEN 'text' ELSE 'jsonb' END, count(*) FROM kv_history GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("kv_history formats: %w", err)
	}
	formats := map[string]int{}
	var format string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&format, &n}, func() error {
		formats[format] = n
		return nil
	})
	return formats, err
}

// rebuild runs `projector rebuild --into chaos_rebuild --replace` (the
// whole log folded into a fresh schema by the projector's own code) and
// `projector diff --schema chaos_rebuild` (exit 0: equal to the live
// projection), and compares the two schemas in-process too, for the counts.
func rebuild(ctx context.Context, s *stack) (*projection.Diff, toolRun, error) {
	tr := toolRun{}
	out, code, err := s.projectorTool(ctx, "rebuild", "--into", rebuildSchema, "--replace")
	tr.output = out
	if err != nil || code != 0 {
		return nil, tr, fmt.Errorf("projector rebuild: exit %d %v\n%s", code, err, out)
	}
	out, code, err = s.projectorTool(ctx, "diff", "--schema", rebuildSchema)
	tr.output += out
	tr.diffExit = code
	if err != nil || code == 2 {
		return nil, tr, fmt.Errorf("projector diff: exit %d %v\n%s", code, err, out)
	}
	d, err := projection.Compare(ctx, s.DB, projection.DiffSpec{Schema: rebuildSchema, Against: "public", Topic: s.topics.Changes, Limit: 20})
	return d, tr, err
}

// toolRun is what the projector's rebuild and diff commands said.
type toolRun struct {
	output   string
	diffExit int // 0 equal, 1 different
}

// projectorTool runs a projector command against the stack and returns
// its combined output and exit code.
func (s *stack) projectorTool(ctx context.Context, args ...string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.Bin, "projector"), args...)
	cmd.Env = append(proc.BaseEnv(), s.Env("warn", int(s.topics.Partitions))...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), nil
	}
	return string(out), 0, err
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
