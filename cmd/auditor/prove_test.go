package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// runAuditorUntil runs an auditor writing scheme s rows until it has
// committed p's events of kv.changes.
func runAuditorUntil(t *testing.T, b *testenv.Broker, ch *testenv.ClickHouse, p *testenv.Producer, s audit.Scheme) {
	t.Helper()
	kr, err := audit.NewKeyring(mustKey(t))
	if err != nil {
		t.Fatal(err)
	}
	store := audit.NewStore(ch.Conn)
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := audit.New(audit.Config{Brokers: b.Addrs, Topics: b.Topics, Linger: 10 * time.Millisecond, HashScheme: s}, store, kr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := testenv.RunUntilCleanup(t, "auditor", a.Run)
	want := p.Committed(t)
	testenv.WaitFor(t, 30*time.Second, "the auditor to commit", func() bool {
		got := a.Committed()[b.Topics.Changes]
		for part, end := range want {
			if got[part] < end {
				return false
			}
		}
		return true
	})
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
}

func mustKey(t *testing.T) audit.HMACKey {
	t.Helper()
	k, err := audit.ParseKey(testAuditKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestProveSchemes: prove tells 2^53 from 2^53+1 and 0 from -0 on
// scheme-2 rows; on scheme-1 rows (written before hash schemes) it still
// proves, says what a scheme-1 proof is worth, and refuses a value whose
// numbers scheme 1 rounded.
func TestProveSchemes(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	ch := testenv.MustClickHouse(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	put := func(key string, v int64, before, after string) contract.Event {
		return contract.Event{SchemaVersion: 1, Key: key, Scope: "tenant/t/project/p", Version: v, PrevVersion: v - 1,
			Kind: contract.KindPut, Op: contract.OpSet, Before: json.RawMessage(before), After: json.RawMessage(after),
			CreatedAt: now, TS: now, Principal: "tester", Semantics: contract.Semantics{Purpose: "counter"}}
	}
	const oldKey, newKey = "tenant/t/project/p/old", "tenant/t/project/p/new"
	p := testenv.MustProducer(t, b)
	o1, o2 := put(oldKey, 1, "null", `{"n":1.5}`), put(oldKey, 2, `{"n":1.5}`, `9007199254740993`)
	p.Commit(t, &o1, &o2)
	runAuditorUntil(t, b, ch, p, audit.Scheme1)
	n1, n2, n3 := put(newKey, 1, "null", `9007199254740993`), put(newKey, 2, `9007199254740993`, `-0`), put(oldKey, 3, `9007199254740993`, `0`)
	p.Commit(t, &n1, &n2, &n3)
	runAuditorUntil(t, b, ch, p, audit.CurrentScheme)

	setenv(t, map[string]string{
		"ESKV_BROKERS": strings.Join(b.Addrs, ","), "ESKV_PARTITIONS": "2",
		"ESKV_CLICKHOUSE_ADDR": ch.Addr, "ESKV_CLICKHOUSE_DATABASE": ch.Database,
		"ESKV_AUDIT_KEY": strings.TrimPrefix(testAuditKey, "test:"), "ESKV_AUDIT_KEY_ID": "test",
	})
	for _, tc := range []struct {
		name, key, version, value string
		problem                   string // "" when proven
		out                       string
	}{
		{"OKScheme2Exact", newKey, "1", `9007199254740993`, "", "PROVEN: 9007199254740993 was the value"},
		{"ErrScheme2TwoToThe53", newKey, "1", `9007199254740992`, "value_differs", "hash scheme 2"},
		{"OKScheme2NegativeZero", newKey, "2", `-0.0`, "", "PROVEN: -0 was the value"},
		{"ErrScheme2Zero", newKey, "2", `0`, "value_differs", ""},
		{"ErrScheme2BelowTheDoubles", newKey, "2", `1e-400`, "value_differs", ""},
		{"OKScheme2AfterScheme1", oldKey, "3", `0`, "", "PROVEN: 0 was the value"},
		{"OKScheme1", oldKey, "1", `{"n":1.50}`, "", "note: a scheme-1 row compares numbers as IEEE 754 doubles"},
		{"ErrScheme1RoundedNumber", oldKey, "2", `9007199254740993`, "value_ambiguous", "hash scheme 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), []string{"prove", "-key", tc.key, "-version", tc.version, "-value", tc.value}, &out, io.Discard)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("prove: %v\n%s", err, out.String())
				}
			} else if de, ok := errors.AsType[*discrepancyError](err); !ok || de.first.Problem != tc.problem {
				t.Fatalf("prove: %v, want %s\n%s", err, tc.problem, out.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Fatalf("prove printed no %q:\n%s", tc.out, out.String())
			}
			t.Logf("%v\n%s", err, out.String())
		})
	}
}
