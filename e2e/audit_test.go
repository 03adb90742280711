package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
)

// auditRow is what the tests read of audit_events.
type auditRow struct {
	key                        string
	version, prevVersion       int64
	kind, before, after, keyID string
	prevChain, chain           string
	partition                  int32
	offset                     int64
}

func (at *auditTrail) rows(tb testing.TB) []auditRow {
	tb.Helper()
	// The documented way to read rows: FINAL, one row per (key, version).
	rs, err := at.ch.Conn.Query(context.Background(), `SELECT key, version, prev_version, kind, before_hash, after_hash, hash_key_id,
	prev_chain_hash, chain_hash, kafka_partition, kafka_offset FROM audit_events FINAL ORDER BY key, version`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rs.Close()
	var out []auditRow
	for rs.Next() {
		var r auditRow
		if err := rs.Scan(&r.key, &r.version, &r.prevVersion, &r.kind, &r.before, &r.after, &r.keyID, &r.prevChain, &r.chain, &r.partition, &r.offset); err != nil {
			tb.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestAuditTrailMatchesLog: writes with induced conflicts through the
// API; the trail holds one row per event of kv.changes (same partition,
// offset and value hashes), before_hash(n) = after_hash(n-1) for every
// key, the conflict-rate query returns the induced rate, verify passes,
// and deleting or altering one row makes verify fail naming it.
func TestAuditTrailMatchesLog(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	start := time.Now().UTC()

	const keys, puts = 8, 16
	var applied, conflicts atomic.Int64
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			path := fmt.Sprintf("/v1/kv/tenant/acme/project/audit/k%d", k)
			sem := `"semantics":{"purpose":"checkpoint","producer":"e2e","consumerHints":["audit"]}`
			ver := 0
			for i := range puts {
				if i%4 == 3 { // an induced conflict: a stale expectedVersion
					r := s.do("PUT", path, devToken, fmt.Sprintf(`{"value":{"stale":%d},"expectedVersion":%d,%s}`, i, ver-1, sem))
					if r.Status != http.StatusConflict {
						t.Errorf("stale write %s: %d %s", path, r.Status, r.Body)
						return
					}
					conflicts.Add(1)
				}
				r := s.do("PUT", path, devToken, fmt.Sprintf(`{"value":{"k":%d,"i":%d},"expectedVersion":%d,%s}`, k, i, ver, sem))
				if r.Status != http.StatusOK {
					t.Errorf("write %s: %d %s", path, r.Status, r.Body)
					return
				}
				applied.Add(1)
				ver++
			}
			if k%2 == 0 { // delete and re-create: versions go on, hashes chain through
				if r := s.do("DELETE", fmt.Sprintf("%s?expectedVersion=%d", path, ver), devToken, nil); r.Status != http.StatusOK {
					t.Errorf("delete %s: %d %s", path, r.Status, r.Body)
					return
				}
				r := s.do("PUT", path, devToken, `{"value":"again","expectedVersion":0,`+sem+`}`)
				if r.Status != http.StatusOK {
					t.Errorf("re-create %s: %d %s", path, r.Status, r.Body)
					return
				}
				applied.Add(2)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	waitAudited(t, s, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := s.readLog(ctx)
	rows := at.rows(t)
	t.Run("RowsMatchEventsOneToOne", func(t *testing.T) {
		if len(rows) != len(log) || int64(len(log)) != applied.Load() {
			t.Fatalf("%d rows, %d events, %d writes acknowledged", len(rows), len(log), applied.Load())
		}
		byID := map[string]auditRow{}
		for _, r := range rows {
			byID[fmt.Sprintf("%s@%d", r.key, r.version)] = r
		}
		k := at.keys.Current
		for _, e := range log {
			r, ok := byID[fmt.Sprintf("%s@%d", e.Key, e.Version)]
			if !ok {
				t.Fatalf("event %s@%d has no row", e.Key, e.Version)
			}
			if r.kind != string(e.Kind) || r.prevVersion != e.PrevVersion || r.keyID != "e2e" ||
				r.before != audit.ValueHash(k, e.Key, e.Before) || r.after != audit.ValueHash(k, e.Key, e.After) {
				t.Fatalf("row %+v does not match event %s@%d", r, e.Key, e.Version)
			}
		}
	})
	t.Run("BeforeHashIsPreviousAfterHash", func(t *testing.T) {
		var prev auditRow
		links := 0
		for _, r := range rows {
			if r.key == prev.key {
				if r.before != prev.after || r.prevChain != prev.chain || r.version != prev.version+1 {
					t.Fatalf("%s@%d: before_hash %s, after_hash(n-1) %s; prev chain %s, chain(n-1) %s", r.key, r.version, r.before, prev.after, r.prevChain, prev.chain)
				}
				links++
			} else if r.version != 1 || r.prevChain != "" {
				t.Fatalf("%s starts at version %d", r.key, r.version)
			}
			prev = r
		}
		t.Logf("%d rows of %d keys, %d links with before_hash(n) = after_hash(n-1)", len(rows), keys, links)
	})
	t.Run("ConflictRateIsTheInducedRate", func(t *testing.T) {
		want := float64(conflicts.Load()) / float64(conflicts.Load()+applied.Load())
		total, err := at.store.ConflictRates(ctx, audit.RateQuery{From: start.Add(-time.Minute), To: time.Now().Add(time.Minute),
			Bucket: audit.Total, Tenant: "acme", Project: "audit"})
		if err != nil {
			t.Fatal(err)
		}
		if len(total) != 1 || total[0].Rate != want || total[0].Purpose != "checkpoint" ||
			total[0].Conflicts != uint64(conflicts.Load()) || total[0].Applied != uint64(applied.Load()) {
			t.Fatalf("conflict rate %+v; want %d conflicts, %d applied, rate %v", total, conflicts.Load(), applied.Load(), want)
		}
		// The per-minute view sums to the same figures.
		var c, a uint64
		if err := at.ch.Conn.QueryRow(ctx, "SELECT sum(conflicts), sum(applied) FROM conflict_rate_minute WHERE tenant = 'acme'").Scan(&c, &a); err != nil {
			t.Fatal(err)
		}
		if c != uint64(conflicts.Load()) || a != uint64(applied.Load()) {
			t.Fatalf("conflict_rate_minute sums to %d conflicts, %d applied", c, a)
		}
		t.Logf("induced %d conflicts for %d applied writes: rate %.4f, the query says %.4f", conflicts.Load(), applied.Load(), want, total[0].Rate)
	})
	t.Run("VerifyPasses", func(t *testing.T) {
		rep := at.verify(t, s)
		if len(rep.Discrepancies) > 0 || rep.Rows != len(log) || rep.Conflicts != int(conflicts.Load()) {
			t.Fatalf("verify: %+v", rep)
		}
	})
	// Each tampering comes first in verify's report: k1 sorts before k3.
	for _, tc := range []struct {
		name, mutation, key string
		version             int64
		problem             string
	}{
		{"ErrVerifyNamesAlteredRow", "ALTER TABLE audit_events UPDATE after_hash = before_hash WHERE key = ? AND version = 7",
			"tenant/acme/project/audit/k3", 7, audit.ProblemRowAltered},
		{"ErrVerifyNamesDeletedRow", "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 5",
			"tenant/acme/project/audit/k1", 5, audit.ProblemRowMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at.mutate(t, tc.mutation, tc.key)
			rep := at.verify(t, s)
			if len(rep.Discrepancies) == 0 || rep.Discrepancies[0].Key != tc.key || rep.Discrepancies[0].Version != tc.version ||
				rep.Discrepancies[0].Problem != tc.problem {
				t.Fatalf("discrepancies %v", rep.Discrepancies)
			}
			t.Logf("verify names it: %s", rep.Discrepancies[0])
		})
	}
}

// TestAuditNoRawValue writes a marker value (put, update, a rejected
// write, a delete) and searches every string column of every table and
// view of the audit database for it, plain, hex and uppercase hex.
func TestAuditNoRawValue(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	marker := "eskv-marker-" + hex.EncodeToString(rnd[:])
	path := base + "secret"
	for _, step := range []struct {
		method, path, body string
		status             int
	}{
		{"PUT", path, `{"value":{"secret":"` + marker + `"},"expectedVersion":0,"semantics":{"purpose":"config"}}`, 200},
		{"PUT", path, `{"value":["` + marker + `-2"],"expectedVersion":1}`, 200},
		{"PUT", path, `{"value":"` + marker + `-rejected","expectedVersion":1}`, 409},
		{"DELETE", path + "?expectedVersion=2", "", 200},
	} {
		var body any
		if step.body != "" {
			body = step.body
		}
		if r := s.do(step.method, step.path, devToken, body); r.Status != step.status {
			t.Fatalf("%s %s: %d %s", step.method, step.path, r.Status, r.Body)
		}
	}
	waitAudited(t, s, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The marker did travel through the log.
	var inLog int
	for _, e := range s.readLog(ctx) {
		if strings.Contains(string(e.After), marker) || strings.Contains(string(e.Before), marker) {
			inLog++
		}
	}
	if inLog != 3 || at.count(t, "SELECT count() FROM audit_events FINAL WHERE key = ?", strings.TrimPrefix(path, "/v1/kv/")) != 3 ||
		at.count(t, "SELECT count() FROM audit_conflicts") != 1 {
		t.Fatalf("the marker is in %d events; want 3, with 3 rows and 1 conflict row", inLog)
	}

	rs, err := at.ch.Conn.Query(ctx, "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() ORDER BY table, name")
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ table, name, typ string }
	var cols []column
	for rs.Next() {
		var c column
		if err := rs.Scan(&c.table, &c.name, &c.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rs.Close()
	needles := []string{marker, hex.EncodeToString([]byte(marker)), strings.ToUpper(hex.EncodeToString([]byte(marker)))}
	searched, tables := 0, map[string]bool{}
	for _, c := range cols {
		tables[c.table] = true
		var cond string
		switch {
		case c.typ == "String" || strings.HasPrefix(c.typ, "FixedString"):
			cond = fmt.Sprintf("position(toString(`%s`), ?) > 0", c.name)
		case c.typ == "Array(String)":
			cond = fmt.Sprintf("arrayExists(x -> position(x, ?) > 0, `%s`)", c.name)
		default:
			continue
		}
		for _, n := range needles {
			if got := at.count(t, fmt.Sprintf("SELECT count() FROM `%s` WHERE %s", c.table, cond), n); got != 0 {
				t.Errorf("%s.%s (%s) holds the marker %q in %d rows", c.table, c.name, c.typ, n, got)
			}
		}
		searched++
	}
	if searched < 40 {
		t.Fatalf("searched only %d string columns", searched)
	}
	t.Logf("marker %s: in %d events of kv.changes, in none of %d string columns of %d tables and views", marker, inLog, searched, len(tables))
}
