package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// statementLog records the SQL a clickhouse-go connection sends, bound
// as the server receives it: the driver logs each query at debug level
// ("sending query") before it writes it.
type statementLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *statementLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *statementLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *statementLog) WithGroup(string) slog.Handler            { return l }
func (l *statementLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "sending query" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "query" {
			l.mu.Lock()
			l.sent = append(l.sent, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// statements returns what was sent, in order.
func (l *statementLog) statements() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sent)
}

// statement is one statement of the dump
// (tools/chcheck/run.js).
type statement struct {
	SQL string `json:"sql"`
	// Rows is, for an INSERT the driver sends as native blocks, the rows
	// the table holds in its columns as TabSeparated: the runner sends
	// them with the statement.
	Rows string `json:"rows,omitempty"`
	// Want is a SELECT's answer on ClickHouse 18.16, TabSeparated.
	Want string `json:"want,omitempty"`
	// Source is where the statement comes from: the auditor's code or
	// docs/audit.md.
	Source string `json:"source"`
}

// shape is a statement with its literals replaced, to keep one
// statement of each form.
func shape(sql string) string {
	s := regexp.MustCompile(`'(?:[^'\\]|\\.)*'`).ReplaceAllString(sql, "?")
	s = regexp.MustCompile(`\b\d+\b`).ReplaceAllString(s, "N")
	s = regexp.MustCompile(`(\(\?, N\),?\s*)+`).ReplaceAllString(s, "(?, N)")
	return strings.Join(strings.Fields(s), " ")
}

// TestStatementsOnEveryVersion: every statement the audit trail's code
// sends to ClickHouse (the migrations, the auditor's inserts and
// lookups, report's, verify's and prove's queries, the alerts') and
// every query of docs/audit.md runs on the server the tests use
// (Debian's 18.16) and on a current ClickHouse (chDB, an embedded 26.x,
// run by tools/chcheck/run.js), on a hash-chained trail the auditor
// wrote, and every SELECT answers the same rows on both.
func TestStatementsOnEveryVersion(t *testing.T) {
	t.Parallel()
	node, runner := mustChDB(t)
	ch := testenv.MustClickHouse(t)
	sent := &statementLog{}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr: []string{ch.Addr}, Auth: clickhouse.Auth{Database: ch.Database, Username: "default"},
		DialTimeout: 5 * time.Second, ReadTimeout: 60 * time.Second, Logger: slog.New(sent),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	from := len(sent.statements())
	s := audit.NewStore(conn)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The trail of verify_test's history: 15 keys, their conflicts,
	// an aborted transaction, through the auditor.
	b := testenv.MustBroker(t, 4)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	h := synth("a", 10, 4, ts)
	h2 := synth("b", 5, 4, ts)
	h.events, h.conflicts = append(h.events, h2.events...), append(h.conflicts, h2.conflicts...)
	produce(t, b, h, true)
	waitCaughtUp(t, b, runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil))

	// What report, prove, verify and the alerts ask.
	for _, bucket := range []audit.Bucket{audit.Minute, audit.Hour, audit.Total} {
		if _, err := s.ConflictRates(ctx, audit.RateQuery{Bucket: bucket, From: ts.Add(-time.Hour), To: ts.Add(time.Hour), Tenant: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TopConflictingKeys(ctx, ts.Add(-time.Hour), ts.Add(time.Hour), "a", 5); err != nil {
		t.Fatal(err)
	}
	alert := audit.Alert{At: ts.Truncate(time.Second), Group: audit.RateGroup{Tenant: "a", Project: "p0", Purpose: "cursor"}, State: "firing",
		Rate: 0.2, Conflicts: 1, Applied: 4, WindowSeconds: 300, Threshold: 0.1, Auditor: "test"}
	if err := s.InsertAlerts(ctx, []audit.Alert{alert}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FiringAlerts(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Alerts(ctx, ts.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChainHashes(ctx, []audit.KeyVersion{{Key: h.events[0].Key, Version: 1}, {Key: h.events[0].Key, Version: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Count(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.EventRowAt(ctx, h.events[0].Key, 2); err != nil || !ok {
		t.Fatalf("EventRowAt: %v, %v", ok, err)
	}
	kr, err := audit.NewKeyring(testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []audit.Scope{{}, audit.TenantScope("a"), audit.KeyScope(h.events[0].Key)} {
		rep, err := audit.Verify(ctx, s, kr, audit.VerifyConfig{Brokers: b.Addrs, Topics: b.Topics, Scope: scope})
		if err != nil || len(rep.Discrepancies) != 0 {
			t.Fatalf("verify %v: %v, %v", scope, err, rep)
		}
	}
	var stmts []statement
	seen := map[string]bool{}
	for _, sql := range sent.statements()[from:] {
		if sh := shape(sql); !seen[sh] && !strings.HasPrefix(sql, "SELECT version()") {
			seen[sh] = true
			stmts = append(stmts, statement{SQL: sql, Source: "code"})
		}
	}
	// The driver's debug message is what records them: a client that
	// renamed it would leave the check empty.
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS audit_events", "INSERT INTO audit_events", "any(chain_hash)", "FROM audit_alerts"} {
		if !slices.ContainsFunc(stmts, func(st statement) bool { return strings.Contains(st.SQL, want) }) {
			t.Fatalf("no statement with %q recorded of %d: has clickhouse-go's \"sending query\" debug message changed?", want, len(stmts))
		}
	}
	for _, sql := range docQueries(t) {
		if err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("docs/audit.md on %s: %v\n%s", version, err, sql)
		}
		stmts = append(stmts, statement{SQL: sql, Source: "docs/audit.md"})
	}
	httpAddr := testenv.ClickHouseHTTPAddr()
	for i := range stmts {
		st := &stmts[i]
		word := strings.ToUpper(strings.Fields(st.SQL)[0])
		switch {
		case word == "INSERT":
			table, cols := insertTarget(t, st.SQL)
			st.Rows = mustHTTP(t, httpAddr, ch.Database, "SELECT "+cols+" FROM "+table+" FORMAT TabSeparated")
		case word == "SELECT" && !strings.Contains(st.SQL, "now()"):
			st.Want = mustHTTP(t, httpAddr, ch.Database, st.SQL+"\nFORMAT TabSeparated")
		}
		fmt.Printf("ClickHouse %s: OK  %s  %s\n", version, st.Source, oneLine(st.SQL))
	}
	dump := filepath.Join(t.TempDir(), "statements.json")
	raw, err := json.Marshal(stmts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, runner, dump)
	cmd.Dir = filepath.Dir(runner)
	out, err := cmd.CombinedOutput()
	fmt.Printf("%s", out)
	if err != nil {
		t.Fatalf("tools/chcheck/run.js: %v", err)
	}
	fmt.Printf("ClickHouse %s and chDB: %d statements (%d of the code, %d of docs/audit.md), each OK on both\n",
		version, len(stmts), len(stmts)-len(docQueries(t)), len(docQueries(t)))
}

// insertTarget returns the table and columns of an INSERT the driver sent.
func insertTarget(tb testing.TB, sql string) (table, cols string) {
	tb.Helper()
	m := regexp.MustCompile(`(?s)^INSERT INTO (\w+) \((.*)\)`).FindStringSubmatch(sql)
	if m == nil {
		tb.Fatalf("INSERT without a column list: %s", sql)
	}
	return m[1], m[2]
}

// docQueries returns the statements of docs/audit.md's sql blocks, the
// placeholder of the proof's (key K, version N) filled in.
func docQueries(tb testing.TB) []string {
	tb.Helper()
	raw, err := os.ReadFile("../docs/audit.md")
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, block := range regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		for stmt := range strings.SplitSeq(block[1], ";\n") {
			stmt = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(stmt), ";"))
			if stmt != "" {
				out = append(out, strings.ReplaceAll(stmt, "version = N", "version = 1"))
			}
		}
	}
	return out
}

// mustHTTP runs q on the ClickHouse HTTP interface at addr and returns
// its answer.
func mustHTTP(tb testing.TB, addr, database, q string) string {
	tb.Helper()
	resp, err := http.Post("http://"+addr+"/?database="+url.QueryEscape(database), "text/plain", strings.NewReader(q))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %v %s: %s", q, err, resp.Status, body)
	}
	return string(body)
}

func oneLine(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	return s
}

// mustChDB returns node's path and tools/chcheck/run.js's once chDB is
// installed there, when missing: npm install, which keeps the versions
// of its package-lock.json (npm ci refuses a lock file without chDB's
// platform libraries for other systems, which the registry does not
// serve).
func mustChDB(tb testing.TB) (node, runner string) {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatalf("node is required (apt-get install nodejs npm): %v", err)
	}
	dir, err := filepath.Abs("../tools/chcheck")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/chdb/package.json")); err != nil {
		var out bytes.Buffer
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund")
		cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
		if err := cmd.Run(); err != nil {
			tb.Fatalf("npm install in %s: %v\n%s", dir, err, out.Bytes())
		}
	}
	return node, filepath.Join(dir, "run.js")
}
