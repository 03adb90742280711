package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/tools/linz"
)

func out(o linz.Outcome, version int64, value string) linz.Output {
	return linz.Output{Outcome: o, Version: version, Value: value}
}

func TestClassifyWrite(t *testing.T) {
	unavailable := func(msg string) answer {
		return answer{status: 503, sent: true, body: []byte(`{"error":{"code":"partition_unavailable","message":"` + msg + `","retryAfterSeconds":1}}`)}
	}
	for _, tc := range []struct {
		name string
		a    answer
		want linz.Output
	}{
		{"OK", answer{status: 200, sent: true, body: []byte(`{"key":"k","value":"c1-2","version":4}`)}, out(linz.OK, 4, "c1-2")},
		{"Conflict", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"expectedVersion","currentVersion":5,"currentValue":"c2-9"}}`)}, out(linz.Conflict, 5, "c2-9")},
		{"ConflictAbsent", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"expectedVersion","currentVersion":0,"currentValue":null}}`)}, out(linz.Conflict, 0, "")},
		{"RequestIDReusedIsUnknown", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"requestId","currentVersion":5}}`)}, out(linz.Unknown, 0, "")},
		{"CatchingUpIsNoEffect", unavailable("partition 3 is catching up or moving between writers; retry"), out(linz.Failed, 0, "")},
		{"NotOwnedIsNoEffect", unavailable("partition 3 is not owned by this writer; retry"), out(linz.Failed, 0, "")},
		{"QueueDrainedIsNoEffect", unavailable("partition 3 is moving between writers; retry"), out(linz.Failed, 0, "")},
		{"OverloadedIsNoEffect", unavailable("partition 3 is overloaded; retry"), out(linz.Failed, 0, "")},
		{"WithdrawnIsNoEffect", unavailable("partition 3 is not answering in time (the write was not applied); retry"), out(linz.Failed, 0, "")},
		{"LateBeforeQueuedIsNoEffect", unavailable("partition 3 is not answering in time; retry"), out(linz.Failed, 0, "")},
		{"NotForwardedTwiceIsNoEffect", unavailable("the key's partition is moving between writers; retry"), out(linz.Failed, 0, "")},
		{"CommitFailedIsUnknown", unavailable("partition 3 is unable to commit the write (its outcome is unknown: retry with the same requestId); retry"), out(linz.Unknown, 0, "")},
		{"SlowIsUnknown", unavailable("partition 3 is slow to answer (the write may still commit: retry with the same requestId); retry"), out(linz.Unknown, 0, "")},
		{"OwnerDidNotAnswerIsUnknown", unavailable("the writer owning this key did not answer; retry"), out(linz.Unknown, 0, "")},
		{"UnlistedIsUnknown", unavailable("something new"), out(linz.Unknown, 0, "")},
		{"InternalIsUnknown", answer{status: 500, sent: true, body: []byte(`{"error":{"code":"internal"}}`)}, out(linz.Unknown, 0, "")},
		{"RefusedConnectionIsNoEffect", answer{err: fmt.Errorf("dial: refused"), sent: false}, out(linz.Failed, 0, "")},
		{"TimeoutIsUnknown", answer{err: fmt.Errorf("context deadline exceeded"), sent: true}, out(linz.Unknown, 0, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := classifyWrite(tc.a, "c1-2")
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestClassifyChange: an unconditional put's or delete's 200 gives the
// version written; a delete's 404 had no effect; the rest is a CAS
// write's classification.
func TestClassifyChange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       answer
		want    linz.Outcome
		version int64
	}{
		{"PutOK", answer{status: 200, sent: true, body: []byte(`{"key":"k","value":"c1-2","version":4}`)}, linz.OK, 4},
		{"DeleteOK", answer{status: 200, sent: true, body: []byte(`{"key":"k","version":5,"deleted":true}`)}, linz.OK, 5},
		{"DeleteAbsentIsNoEffect", answer{status: 404, sent: true, body: []byte(`{"error":{"code":"not_found"}}`)}, linz.Failed, 0},
		{"UndecodableIsUnknown", answer{status: 200, sent: true, body: []byte(`{}`)}, linz.Unknown, 0},
		{"NotOwnedIsNoEffect", answer{status: 503, sent: true, body: []byte(`{"error":{"code":"partition_unavailable","message":"partition 3 is not owned by this writer; retry"}}`)}, linz.Failed, 0},
		{"TimeoutIsUnknown", answer{err: fmt.Errorf("context deadline exceeded"), sent: true}, linz.Unknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, v, _ := classifyChange(tc.a)
			if got != tc.want || v != tc.version {
				t.Fatalf("got %v v%d, want %v v%d", got, v, tc.want, tc.version)
			}
		})
	}
}

func TestStaleAnswers(t *testing.T) {
	const k = "tenant/chaos/project/p0/reg"
	r, w := linz.Input{Key: k, Kind: linz.Read}, linz.Input{Key: k, Kind: linz.Write, Value: "a"}
	h := []linz.Op{
		{Client: 0, In: w, Call: 0, Return: 10, Out: out(linz.OK, 1, "a")},
		{Client: 1, In: r, Call: 5, Return: 15, Out: out(linz.NotFound, 0, "")},                                                                               // concurrent with the write: fine
		{Client: 1, In: r, Call: 20, Return: 25, Out: out(linz.NotFound, 0, "")},                                                                              // after the ack: stale
		{Client: 2, In: linz.Input{Key: k, Kind: linz.Write, Value: "b"}, Call: 30, Return: 35, Out: out(linz.Conflict, 0, ""), Detail: "correlationId c-42"}, // stale conflict
		{Client: 1, In: r, Call: 40, Return: 45, Out: out(linz.OK, 1, "a")},
	}
	// The writer that decided the conflict logged its correlation id.
	dir := t.TempDir()
	for name, text := range map[string]string{"writer-1.log": "version conflict correlationId=c-41\n", "writer-2.log": "version conflict correlationId=c-42\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := staleAnswers(h, 12, nil, dir)
	if len(got) != 2 || !strings.HasPrefix(got[0], "read of") || !strings.HasPrefix(got[1], "cas from v0") ||
		!strings.HasSuffix(got[1], "; correlationId c-42 in writer-2.log") {
		t.Fatalf("%q", got)
	}
}

func TestRegisterKeysSpreadOverPartitions(t *testing.T) {
	keys := registerKeys(5, 12)
	seen := map[int32]bool{}
	for _, k := range keys {
		p := changelog.Partition(contract.ScopeOf(k), 12)
		if seen[p] {
			t.Fatalf("%v: two keys in partition %d", keys, p)
		}
		seen[p] = true
		if _, err := contract.ParseKey(k); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(registerKeys(20, 4)); n != 20 {
		t.Fatalf("%d keys, want 20 (more keys than partitions share them)", n)
	}
}
