package linz

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const k1, k2 = "tenant/chaos/project/p0/reg", "tenant/chaos/project/p1/reg"

func read(client int, key string, call, ret int64, out Output) Op {
	return Op{Client: client, In: Input{Key: key, Kind: Read}, Out: out, Call: call, Return: ret}
}

func write(client int, key string, expected int64, value string, call, ret int64, out Output) Op {
	return Op{Client: client, In: Input{Key: key, Kind: Write, Expected: expected, Value: value}, Out: out, Call: call, Return: ret}
}

var (
	notFound = Output{Outcome: NotFound}
	unknown  = Output{Outcome: Unknown}
	failed   = Output{Outcome: Failed}
)

func ok(v int64, value string) Output { return Output{Outcome: OK, Version: v, Value: value} }

func conflict(v int64, value string) Output {
	return Output{Outcome: Conflict, Version: v, Value: value}
}

func TestLinearizability(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    []Op
		want porcupine.CheckResult
	}{
		{"OKSequential", []Op{
			read(0, k1, 0, 1, notFound),
			write(0, k1, 0, "a", 2, 3, ok(1, "a")),
			read(1, k1, 4, 5, ok(1, "a")),
			write(1, k1, 1, "b", 6, 7, ok(2, "b")),
			write(0, k1, 1, "c", 8, 9, conflict(2, "b")),
			read(0, k1, 10, 11, ok(2, "b")),
		}, porcupine.Ok},
		{"OKConcurrentWritesOneWins", []Op{
			write(0, k1, 0, "a", 0, 10, ok(1, "a")),
			write(1, k1, 0, "b", 1, 9, conflict(1, "a")),
			read(2, k1, 2, 3, notFound), // before either write took effect
		}, porcupine.Ok},
		{"OKConflictAgainstAbsentKey", []Op{
			write(0, k1, 3, "a", 0, 1, conflict(0, "")),
			read(0, k1, 2, 3, notFound),
		}, porcupine.Ok},
		{"OKUnknownWriteApplied", []Op{
			read(0, k1, 0, 1, notFound),
			write(0, k1, 0, "a", 2, 3, unknown), // timed out, yet it took effect
			read(1, k1, 10, 11, ok(1, "a")),
			write(1, k1, 1, "b", 12, 13, ok(2, "b")),
		}, porcupine.Ok},
		{"OKUnknownWriteNotApplied", []Op{
			write(0, k1, 0, "a", 2, 3, unknown), // never took effect
			read(1, k1, 10, 11, notFound),
			write(1, k1, 0, "b", 12, 13, ok(1, "b")),
			read(1, k1, 14, 15, ok(1, "b")),
		}, porcupine.Ok},
		{"OKUnknownWriteAppliedLate", []Op{
			// The timed-out write reached the owner only after the other
			// write, and then conflicted; or it applied first and the
			// other conflicted: either way this history is possible.
			write(0, k1, 0, "a", 0, 1, unknown),
			write(1, k1, 0, "b", 5, 6, ok(1, "b")),
			read(1, k1, 7, 8, ok(1, "b")),
		}, porcupine.Ok},
		{"OKFailedOperationsIgnored", []Op{
			write(0, k1, 0, "a", 0, 1, failed),
			read(1, k1, 2, 3, notFound),
			read(1, k1, 4, 5, unknown),
		}, porcupine.Ok},
		{"OKKeysIndependent", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			write(1, k2, 0, "x", 0, 1, ok(1, "x")),
			read(2, k2, 2, 3, ok(1, "x")),
			read(2, k1, 2, 3, ok(1, "a")),
		}, porcupine.Ok},
		{"IllegalStaleRead", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			write(0, k1, 1, "b", 2, 3, ok(2, "b")),
			read(1, k1, 4, 5, ok(1, "a")), // after v2 was acknowledged
		}, porcupine.Illegal},
		{"IllegalLostUpdate", []Op{
			// Both CAS from version 1 succeed: one update is lost.
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			write(1, k1, 1, "b", 2, 5, ok(2, "b")),
			write(2, k1, 1, "c", 3, 6, ok(2, "c")),
		}, porcupine.Illegal},
		{"IllegalReadOfValueNeverWritten", []Op{
			write(0, k1, 0, "a", 0, 1, failed),
			read(1, k1, 2, 3, ok(1, "a")),
		}, porcupine.Illegal},
		{"IllegalConflictWithWrongVersion", []Op{
			write(0, k1, 0, "a", 0, 1, ok(1, "a")),
			write(1, k1, 0, "b", 2, 3, conflict(2, "z")),
		}, porcupine.Illegal},
		{"IllegalUnknownWriteCannotExplainTwoValues", []Op{
			write(0, k1, 0, "a", 0, 1, unknown),
			read(1, k1, 2, 3, ok(1, "a")),
			read(1, k1, 4, 5, notFound), // a version never goes away
		}, porcupine.Illegal},
		{"IllegalOneKeyBadOtherGood", []Op{
			write(0, k2, 0, "x", 0, 1, ok(1, "x")),
			write(0, k1, 0, "a", 2, 3, ok(1, "a")),
			read(1, k1, 4, 5, notFound),
		}, porcupine.Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(tc.h, 10*time.Second)
			if got.Result != tc.want {
				t.Fatalf("got %s, want %s", got.Result, tc.want)
			}
		})
	}
}

func TestOperationsUnknownReturnAtEnd(t *testing.T) {
	h := []Op{
		write(0, k1, 0, "a", 5, 7, unknown),
		read(1, k1, 1, 20, ok(1, "a")),
		read(1, k1, 21, 22, unknown),
		write(2, k1, 0, "b", 3, 4, failed),
	}
	ops := Operations(h)
	if len(ops) != 2 {
		t.Fatalf("got %d operations, want 2 (failed and unknown reads dropped)", len(ops))
	}
	if ops[0].Return != 23 {
		t.Fatalf("unknown write returns at %d, want 23 (after the last recorded time)", ops[0].Return)
	}
	if ops[1].Return != 20 {
		t.Fatalf("known read returns at %d, want 20", ops[1].Return)
	}
}

func TestVisualizeIllegal(t *testing.T) {
	l := Check([]Op{
		write(0, k1, 0, "a", 0, 1, ok(1, "a")),
		read(1, k1, 2, 3, notFound),
	}, time.Second)
	if l.Result != porcupine.Illegal {
		t.Fatalf("got %s, want Illegal", l.Result)
	}
	path := filepath.Join(t.TempDir(), "lin.html")
	if err := l.Visualize(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "<html") {
		t.Fatalf("visualization is not HTML: %.200s", b)
	}
}

// TestResolve: the log settles unknown writes. A committed one is OK at
// the log's version, still returning at the end; one the log lacks is
// dropped. A history that needs the dropped write to have happened is
// then not linearizable, and the settled version is held to the model.
func TestResolve(t *testing.T) {
	log := map[string]int64{k1 + " a": 1}
	committed := func(o Op) (int64, string, bool) { v, ok := log[o.In.Key+" "+o.In.Value]; return v, o.In.Value, ok }
	h := []Op{
		write(0, k1, 0, "a", 1, 2, unknown),
		write(1, k1, 1, "b", 3, 4, unknown), // not in the log: never happened
		read(2, k1, 10, 11, ok(1, "a")),
	}
	applied, failedN := Resolve(h, committed)
	if applied != 1 || failedN != 1 || !h[0].Settled || h[0].Out != ok(1, "a") || h[1].Out.Outcome != Failed {
		t.Fatalf("applied %d failed %d, history %+v", applied, failedN, h)
	}
	if ops := Operations(h); len(ops) != 2 || ops[0].Return != 12 {
		t.Fatalf("operations %+v: want the settled write returning at the end and the failed one dropped", ops)
	}
	if r := Check(h, 10*time.Second); r.Result != porcupine.Ok {
		t.Fatalf("%v, want linearizable", r.Result)
	}
	// A read of b needs the write the log does not hold.
	h = []Op{
		write(0, k1, 0, "a", 1, 2, unknown),
		write(1, k1, 1, "b", 3, 4, unknown),
		read(2, k1, 10, 11, ok(2, "b")),
	}
	Resolve(h, committed)
	if r := Check(h, 10*time.Second); r.Result != porcupine.Illegal {
		t.Fatalf("%v, want not linearizable: b was never committed", r.Result)
	}
}
