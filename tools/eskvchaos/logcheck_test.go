package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

var t0 = time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)

// ev is an event of key at version with value, decided at t0+at by a
// producer at epoch (writerEpoch and the committing epoch alike).
func ev(p int32, off int64, key string, version int64, value string, at time.Duration, epoch int16) logEvent {
	before := json.RawMessage("null")
	if version > 1 {
		before = mustJSON(fmt.Sprintf("%s-v%d", key, version-1))
	}
	return logEvent{
		Partition: p, Offset: off, ProducerID: 7, ProducerEpoch: epoch, Source: "eskv-writer/w",
		Event: events.Event{Key: key, Version: version, PrevVersion: version - 1, Kind: events.KindPut,
			Before: before, After: mustJSON(value), TS: t0.Add(at), WriterEpoch: int64(epoch)},
	}
}

// chain returns n contiguous events of key on partition p, values
// "<key>-v<version>".
func chain(p int32, key string, n int, epoch int16) []logEvent {
	var out []logEvent
	for v := 1; v <= n; v++ {
		out = append(out, ev(p, int64(2*v), key, int64(v), fmt.Sprintf("%s-v%d", key, v), time.Duration(v)*time.Second, epoch))
	}
	return out
}

func TestCheckLog(t *testing.T) {
	good := append(chain(0, "a", 3, 1), chain(1, "b", 2, 1)...)
	all := func(f logFindings) int {
		return f.versionViolations() + len(f.ChainBreaks) + len(f.EpochMismatches) + len(f.EpochRegressions)
	}
	for _, tc := range []struct {
		name  string
		evs   []logEvent
		count func(logFindings) int
		want  int
	}{
		{"OK", good, all, 0},
		{"Duplicate", append(chain(0, "a", 3, 1), ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)),
			func(f logFindings) int { return len(f.Duplicates) }, 1},
		{"GapInVersions", append(chain(0, "a", 2, 1), ev(0, 9, "a", 4, "a-v4", 4*time.Second, 1)),
			func(f logFindings) int { return len(f.Gaps) }, 1},
		{"FirstVersionNotOne", []logEvent{ev(0, 0, "a", 2, "a-v2", 0, 1)},
			func(f logFindings) int { return len(f.Gaps) }, 1},
		{"BeforeIsNotThePreviousAfter", append(chain(0, "a", 2, 1), func() logEvent {
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.Event.Before = mustJSON("lost update")
			return e
		}()), func(f logFindings) int { return len(f.ChainBreaks) }, 1},
		{"WriterEpochAboveProducerEpoch", append(chain(0, "a", 2, 1), func() logEvent {
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.Event.WriterEpoch = 5
			return e
		}()), func(f logFindings) int { return len(f.EpochMismatches) }, 1},
		{"OlderOwnerCommitsAfterNewer", append(chain(0, "a", 2, 4), ev(0, 9, "a", 3, "a-v3", 4*time.Second, 3)),
			func(f logFindings) int { return len(f.EpochRegressions) }, 2}, // the writer epoch and the producer epoch go back
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := checkLog(tc.evs)
			if got := tc.count(f); got != tc.want {
				t.Fatalf("got %d, want %d: %+v", got, tc.want, f)
			}
		})
	}
}

func TestCheckLogEpochBumpedPerTransaction(t *testing.T) {
	// Transactions v2: the committing epoch grows with every commit while
	// writerEpoch stays the epoch of the fence. Not a violation.
	evs := chain(0, "a", 3, 1)
	for i := range evs {
		evs[i].ProducerEpoch = int16(1 + i)
	}
	if f := checkLog(evs); len(f.EpochMismatches)+len(f.EpochRegressions) != 0 {
		t.Fatalf("%+v", f)
	}
}

func TestLostWrites(t *testing.T) {
	evs := chain(0, "a", 3, 1)
	acks := []acked{{"a", 2, "a-v2"}, {"a", 3, "a-v3"}}
	if lost := lostWrites(acks, evs); len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	lost := lostWrites(append(acks, acked{"a", 4, "a-v4"}, acked{"a", 1, "other"}), evs)
	if len(lost) != 2 || !strings.Contains(lost[0], "not in the log") || !strings.Contains(lost[1], "the log has") {
		t.Fatalf("lost %v", lost)
	}
}

func TestCheckZombies(t *testing.T) {
	stopped, resumed := t0.Add(10*time.Second), t0.Add(25*time.Second)
	pause := writerPause{
		Writer: "w1", Proc: "writer-1", Stopped: stopped, Resumed: resumed, Complete: true,
		Before: map[int32]projection.Owner{0: {Partition: 0, ID: "w1", Epoch: 3}, 1: {Partition: 1, ID: "w2", Epoch: 3}, 2: {Partition: 2, ID: "w1", Epoch: 3}},
		After:  map[int32]projection.Owner{0: {Partition: 0, ID: "w2", Epoch: 8}, 1: {Partition: 1, ID: "w2", Epoch: 3}, 2: {Partition: 2, ID: "w1", Epoch: 3}},
	}
	if m := pause.moved(); len(m) != 1 || m[0] != 8 {
		t.Fatalf("moved %v, want partition 0 to epoch 8", m)
	}
	legit := []logEvent{
		ev(0, 1, "a", 1, "x", 5*time.Second, 3),  // the old owner, before the pause
		ev(0, 3, "a", 2, "y", 20*time.Second, 8), // the new owner, during the pause
		ev(0, 5, "a", 3, "z", 26*time.Second, 9), // the writer back after re-fencing
		ev(2, 1, "b", 1, "x", 26*time.Second, 3), // a partition that did not move
	}
	z := checkZombies([]writerPause{pause}, legit)
	if z.Pauses != 1 || z.Moved != 1 || len(z.Events) != 0 {
		t.Fatalf("%+v", z)
	}
	zombie := append(legit, ev(0, 7, "a", 4, "zombie", 25*time.Second+time.Millisecond, 3))
	if z := checkZombies([]writerPause{pause}, zombie); len(z.Events) != 1 {
		t.Fatalf("zombie event not found: %+v", z)
	}
	pause.Complete = false
	if z := checkZombies([]writerPause{pause}, zombie); z.Skipped != 1 || len(z.Events) != 0 {
		t.Fatalf("incomplete pause: %+v", z)
	}
}

func TestClassifyWrite(t *testing.T) {
	unavailable := func(msg string) answer {
		return answer{status: 503, sent: true, body: []byte(`{"error":{"code":"partition_unavailable","message":"` + msg + `","retryAfterSeconds":1}}`)}
	}
	for _, tc := range []struct {
		name string
		a    answer
		want casOutput
	}{
		{"OK", answer{status: 200, sent: true, body: []byte(`{"key":"k","value":"c1-2","version":4}`)}, ok(4, "c1-2")},
		{"Conflict", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"expectedVersion","currentVersion":5,"currentValue":"c2-9"}}`)}, conflict(5, "c2-9")},
		{"ConflictAbsent", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"expectedVersion","currentVersion":0,"currentValue":null}}`)}, conflict(0, "")},
		{"RequestIDReusedIsUnknown", answer{status: 409, sent: true, body: []byte(`{"error":{"code":"version_conflict","field":"requestId","currentVersion":5}}`)}, unknown},
		{"CatchingUpIsNoEffect", unavailable("partition 3 is catching up or moving between writers; retry"), failed},
		{"NotOwnedIsNoEffect", unavailable("partition 3 is not owned by this writer; retry"), failed},
		{"QueueDrainedIsNoEffect", unavailable("partition 3 is moving between writers; retry"), failed},
		{"OverloadedIsNoEffect", unavailable("partition 3 is overloaded; retry"), failed},
		{"NotForwardedTwiceIsNoEffect", unavailable("the key's partition is moving between writers; retry"), failed},
		{"CommitFailedIsUnknown", unavailable("partition 3 is unable to commit the write (its outcome is unknown: retry with the same requestId); retry"), unknown},
		{"SlowIsUnknown", unavailable("partition 3 is slow to answer (the write may still commit: retry with the same requestId); retry"), unknown},
		{"OwnerDidNotAnswerIsUnknown", unavailable("the writer owning this key did not answer; retry"), unknown},
		{"UnlistedIsUnknown", unavailable("something new"), unknown},
		{"InternalIsUnknown", answer{status: 500, sent: true, body: []byte(`{"error":{"code":"internal"}}`)}, unknown},
		{"RefusedConnectionIsNoEffect", answer{err: fmt.Errorf("dial: refused"), sent: false}, failed},
		{"TimeoutIsUnknown", answer{err: fmt.Errorf("context deadline exceeded"), sent: true}, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := classifyWrite(tc.a, "c1-2")
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStaleAnswers(t *testing.T) {
	h := []op{
		write(0, k1, 0, "a", 0, 10, ok(1, "a")),
		read(1, k1, 5, 15, notFound),                  // concurrent with the write: fine
		read(1, k1, 20, 25, notFound),                 // after the ack: stale
		write(2, k1, 0, "b", 30, 35, conflict(0, "")), // stale conflict
		read(1, k1, 40, 45, ok(1, "a")),
	}
	got := staleAnswers(h, 12, nil)
	if len(got) != 2 || !strings.HasPrefix(got[0], "read of") || !strings.HasPrefix(got[1], "cas from v0") {
		t.Fatalf("%q", got)
	}
}

func TestRegisterKeysSpreadOverPartitions(t *testing.T) {
	keys := registerKeys(5, 12)
	seen := map[int32]bool{}
	for _, k := range keys {
		p := events.Partition(scopeOf(k), 12)
		if seen[p] {
			t.Fatalf("%v: two keys in partition %d", keys, p)
		}
		seen[p] = true
		if _, err := events.ParseKey(k); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(registerKeys(20, 4)); n != 20 {
		t.Fatalf("%d keys, want 20 (more keys than partitions share them)", n)
	}
}
