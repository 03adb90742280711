package e2e

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/testenv"
)

// auditKeyHex is the audit key of the e2e tests (id e2e).
const auditKeyHex = "5f3c0a9e1b7d2c4e6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"

func auditKeys(tb testing.TB) *audit.Keyring {
	tb.Helper()
	k, err := audit.ParseKey("e2e:" + auditKeyHex)
	if err != nil {
		tb.Fatal(err)
	}
	kr, err := audit.NewKeyring(k)
	if err != nil {
		tb.Fatal(err)
	}
	return kr
}

// auditTrail is a fresh, migrated ClickHouse database for a stack's
// auditor.
type auditTrail struct {
	ch    *testenv.ClickHouse
	store *audit.Store
	keys  *audit.Keyring
}

func mustAuditTrail(tb testing.TB) *auditTrail {
	tb.Helper()
	ch := testenv.MustClickHouse(tb)
	st := audit.NewStore(ch.Conn)
	if err := st.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return &auditTrail{ch: ch, store: st, keys: auditKeys(tb)}
}

// mustAuditedStack runs a stack, and an in-process auditor of it into a
// fresh audit trail, until the test ends.
func mustAuditedStack(tb testing.TB) (*stack, *auditTrail) {
	tb.Helper()
	s := mustStack(tb)
	at := mustAuditTrail(tb)
	at.startAuditor(tb, s)
	return s, at
}

// startAuditor runs an in-process auditor on the stack's broker until the
// test ends.
func (at *auditTrail) startAuditor(tb testing.TB, s *stack) {
	tb.Helper()
	a, err := audit.New(audit.Config{Brokers: s.broker.Addrs, Topics: s.broker.Topics, Linger: 20 * time.Millisecond},
		at.store, at.keys, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	testenv.RunUntilCleanup(tb, "auditor", a.Run)
}

// waitAudited waits until the auditor group has committed the last stable
// offset of every partition of both topics.
func waitAudited(tb testing.TB, s *stack, d time.Duration) {
	tb.Helper()
	cl, err := s.kafka.NewClient("e2e", s.broker.Addrs)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ends := map[string]map[int32]int64{}
	for _, t := range []string{s.broker.Topics.Changes, s.broker.Topics.Conflicts} {
		ends[t] = testenv.EndOffsets(ctx, tb, cl, t)
	}
	testenv.WaitFor(tb, d, "the auditor to commit the end of both topics", func() bool {
		fo, err := adm.FetchOffsets(ctx, audit.Group)
		if err != nil {
			return false
		}
		for t, ps := range ends {
			for p, end := range ps {
				o, ok := fo.Lookup(t, p)
				if end > 0 && (!ok || o.At < end) {
					return false
				}
			}
		}
		return true
	})
}

func (at *auditTrail) verify(tb testing.TB, s *stack) *audit.VerifyReport {
	tb.Helper()
	rep, err := audit.Verify(context.Background(), at.store, at.keys, audit.VerifyConfig{Brokers: s.broker.Addrs, Kafka: s.kafka, Topics: s.broker.Topics})
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// mutate runs an ALTER TABLE ... UPDATE or DELETE and waits until it is
// done.
func (at *auditTrail) mutate(tb testing.TB, q string, args ...any) {
	tb.Helper()
	if err := at.ch.Conn.Exec(context.Background(), q, args...); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	testenv.WaitFor(tb, 30*time.Second, "mutation "+q, func() bool {
		return at.count(tb, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0") == 0
	})
}

func (at *auditTrail) count(tb testing.TB, q string, args ...any) uint64 {
	tb.Helper()
	var n uint64
	if err := at.ch.Conn.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}
