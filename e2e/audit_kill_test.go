package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// TestAuditorKill9: the auditor process is killed with SIGKILL while
// writes (and conflicts) stream in, then restarted; twice at a random
// point, twice in the middle of a batch: ClickHouse has accepted the
// batch and its offset commit is held at the broker, so the restarted
// auditor reads and inserts the batch again. In the end the documented
// queries see each event exactly once, nothing is lost, and verify
// passes.
func TestAuditorKill9(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	at := mustAuditTrail(t)
	env := []string{
		"ESKV_BROKERS=" + strings.Join(s.broker.Addrs, ","),
		fmt.Sprintf("ESKV_PARTITIONS=%d", partitions),
		"ESKV_CLICKHOUSE_ADDR=" + at.ch.Addr,
		"ESKV_CLICKHOUSE_DATABASE=" + at.ch.Database,
		"ESKV_AUDIT_KEY=" + auditKeyHex,
		"ESKV_AUDIT_KEY_ID=e2e",
		"ESKV_AUDITOR_ADDR=" + freeAddr(t),
		"ESKV_AUDITOR_MAX_BATCH=300",
		"ESKV_AUDITOR_LINGER=20ms",
		"ESKV_ALERT_WINDOW=0",
		"ESKV_LOG_LEVEL=warn",
		"ESKV_AUDITOR_ID=auditor-e2e",
	}
	auditor := startProcArgs(t, "auditor", []string{"serve"}, env...)

	// holdCommit, when armed, holds the auditor's next offset commit at
	// the broker, says so on held, and drops it (closes the connection)
	// once released: the commit is never applied.
	var armed atomic.Bool
	held, release := make(chan struct{}, 1), make(chan struct{})
	s.broker.Cluster.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.broker.Cluster.KeepControl()
		if r, ok := req.(*kmsg.OffsetCommitRequest); !ok || r.Group != audit.Group || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		held <- struct{}{}
		s.broker.Cluster.SleepControl(func() { <-release })
		return nil, errors.New("dropped: the auditor was killed"), true
	})

	var writes, conflicts atomic.Int64
	stop := runClients(t, 8, func(c, i int) {
		key := fmt.Sprintf("/v1/kv/tenant/t%d/project/p/k%d", c, i%20)
		body := map[string]any{"value": map[string]int{"c": c, "i": i}}
		if i%5 == 4 {
			body["expectedVersion"] = 0 // exists already: a conflict, after the first round
		}
		switch r := s.do("PUT", key, devToken, body); r.Status {
		case 200:
			writes.Add(1)
		case 409:
			conflicts.Add(1)
		}
	})
	const kills = 4
	replayed := 0
	for k := range kills {
		testenv.WaitFor(t, 30*time.Second, "writes", func() bool { return writes.Load() > int64(150*(k+1)) })
		if k%2 == 1 {
			armed.Store(true)
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatal("no offset commit of the auditor within 30s")
			}
		}
		raw := at.count(t, "SELECT count() FROM audit_events")
		auditor.Kill()
		if k%2 == 1 {
			release <- struct{}{}
		}
		testenv.WaitFor(t, 30*time.Second, "writes while the auditor is down", func() bool { return writes.Load() > int64(150*(k+1)+100) })
		mustStart(t, auditor)
		// Once the restarted auditor has re-read what was not committed,
		// rows inserted twice show up as raw rows beyond the distinct ones.
		testenv.WaitFor(t, 30*time.Second, "the restarted auditor to insert", func() bool { return at.count(t, "SELECT count() FROM audit_events") > raw })
		// Rows inserted twice show as raw rows beyond the distinct ones
		// until ClickHouse merges them away in the background.
		if d := int(at.count(t, "SELECT toUInt64(count() - uniqExact(key, version)) FROM audit_events")); d > replayed {
			replayed = d
		}
	}
	stop()
	waitAudited(t, s, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := s.readLog(ctx)
	raw := at.count(t, "SELECT count() FROM audit_events")
	distinct := at.count(t, "SELECT uniqExact(key, version) FROM audit_events")
	final := at.count(t, "SELECT count() FROM audit_events FINAL")
	if distinct != uint64(len(log)) || final != uint64(len(log)) {
		t.Fatalf("%d events in the log; ClickHouse has %d distinct (key, version), FINAL %d rows (raw %d)", len(log), distinct, final, raw)
	}
	rows := at.rows(t)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[fmt.Sprintf("%s@%d", r.key, r.version)] = true
	}
	for _, e := range log {
		if !seen[fmt.Sprintf("%s@%d", e.Key, e.Version)] {
			t.Fatalf("event %s@%d lost", e.Key, e.Version)
		}
	}
	cdistinct := at.count(t, "SELECT uniqExact(key, conflict_id) FROM audit_conflicts")
	cfinal := at.count(t, "SELECT count() FROM audit_conflicts FINAL")
	if cdistinct != uint64(conflicts.Load()) || cfinal != cdistinct {
		t.Fatalf("%d conflicts answered; ClickHouse has %d distinct, FINAL %d", conflicts.Load(), cdistinct, cfinal)
	}
	if rep := at.verify(t, s); len(rep.Discrepancies) > 0 {
		t.Fatalf("verify: %v", rep.Discrepancies)
	}
	t.Logf("%d kills: %d events and %d conflicts, each once in the documented queries (up to %d duplicate raw rows from replays seen before merges; %d raw rows at the end)",
		kills, len(log), cdistinct, replayed, raw)
}
