package logcheck

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var t0 = time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)

// ev is an event of key at version with value, decided at t0+at by a
// producer at epoch (writerEpoch and the committing epoch alike).
func ev(p int32, off int64, key string, version int64, value string, at time.Duration, epoch int16) Event {
	before := json.RawMessage("null")
	if version > 1 {
		before = mustJSON(fmt.Sprintf("%s-v%d", key, version-1))
	}
	return Event{
		Partition: p, Offset: off, ProducerID: 7, ProducerEpoch: epoch, Source: "eskv-writer/w",
		Event: contract.Event{Key: key, Version: version, PrevVersion: version - 1, Kind: contract.KindPut,
			Before: before, After: mustJSON(value), TS: t0.Add(at), WriterEpoch: int64(epoch)},
	}
}

// chain returns n contiguous events of key on partition p, values
// "<key>-v<version>".
func chain(p int32, key string, n int, epoch int16) []Event {
	var out []Event
	for v := 1; v <= n; v++ {
		out = append(out, ev(p, int64(2*v), key, int64(v), fmt.Sprintf("%s-v%d", key, v), time.Duration(v)*time.Second, epoch))
	}
	return out
}

func TestCheckLog(t *testing.T) {
	good := append(chain(0, "a", 3, 1), chain(1, "b", 2, 1)...)
	all := func(f Findings) int {
		return f.VersionViolations() + len(f.ChainBreaks) + len(f.EpochMismatches) + len(f.EpochRegressions)
	}
	for _, tc := range []struct {
		name  string
		evs   []Event
		count func(Findings) int
		want  int
	}{
		{"OK", good, all, 0},
		{"Duplicate", append(chain(0, "a", 3, 1), ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)),
			func(f Findings) int { return len(f.Duplicates) }, 1},
		{"GapInVersions", append(chain(0, "a", 2, 1), ev(0, 9, "a", 4, "a-v4", 4*time.Second, 1)),
			func(f Findings) int { return len(f.Gaps) }, 1},
		{"FirstVersionNotOne", []Event{ev(0, 0, "a", 2, "a-v2", 0, 1)},
			func(f Findings) int { return len(f.Gaps) }, 1},
		{"BeforeIsNotThePreviousAfter", append(chain(0, "a", 2, 1), func() Event {
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.Event.Before = mustJSON("lost update")
			return e
		}()), func(f Findings) int { return len(f.ChainBreaks) }, 1},
		{"SecondProducerInOneWriterEpoch", append(chain(0, "a", 2, 1), func() Event {
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.ProducerID = 8
			return e
		}()), func(f Findings) int { return len(f.EpochMismatches) }, 1},
		{"NewProducerIDAfterEpochExhausted", func() []Event {
			evs := chain(0, "a", 2, 1)
			evs[0].ProducerEpoch, evs[1].ProducerEpoch = math.MaxInt16-2, math.MaxInt16-1
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.ProducerID, e.ProducerEpoch = 8, 0
			return append(evs, e)
		}(), all, 0},
		{"NewProducerIDAfterEpochExhaustedOnOtherPartitions", func() []Event {
			// The producer last committed partition 0 at epoch 100, then
			// ran out of epochs committing partition 1: a chaos run of
			// 10 minutes (2026-11-29) did exactly this.
			evs := chain(0, "a", 2, 1)
			evs[0].ProducerEpoch, evs[1].ProducerEpoch = 99, 100
			b := chain(1, "b", 1, 1)
			b[0].ProducerEpoch = math.MaxInt16 - 2
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 1)
			e.ProducerID, e.ProducerEpoch = 8, 393
			return slices.Concat(evs, b, []Event{e})
		}(), all, 0},
		{"NewOwnerWithTheSameProducer", append(chain(0, "a", 2, 1), func() Event {
			e := ev(0, 9, "a", 3, "a-v3", 4*time.Second, 2)
			e.ProducerID = 8 // another writer's shared producer, at a later writerEpoch
			return e
		}(), ev(0, 11, "a", 4, "a-v4", 5*time.Second, 3)), all, 0}, // and back to the first writer's
		{"OlderOwnerCommitsAfterNewer", append(chain(0, "a", 2, 4), ev(0, 9, "a", 3, "a-v3", 4*time.Second, 3)),
			func(f Findings) int { return len(f.EpochRegressions) }, 2}, // the writer epoch and the producer epoch go back
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Check(tc.evs)
			if got := tc.count(f); got != tc.want {
				t.Fatalf("got %d, want %d: %+v", got, tc.want, f)
			}
		})
	}
}

func TestCheckLogEpochBumpedPerTransaction(t *testing.T) {
	// Transactions v2: the committing epoch grows with every commit while
	// writerEpoch stays the ownership's epoch. Not a violation.
	evs := chain(0, "a", 3, 1)
	for i := range evs {
		evs[i].ProducerEpoch = int16(1 + i)
	}
	if f := Check(evs); len(f.EpochMismatches)+len(f.EpochRegressions) != 0 {
		t.Fatalf("%+v", f)
	}
}

func TestLostWrites(t *testing.T) {
	evs := chain(0, "a", 3, 1)
	acks := []Acked{{"a", 2, mustJSON("a-v2")}, {"a", 3, mustJSON("a-v3")}}
	if lost := LostWrites(acks, evs); len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	lost := LostWrites(append(acks, Acked{"a", 4, mustJSON("a-v4")}, Acked{"a", 1, mustJSON("other")}), evs)
	if len(lost) != 2 || !strings.Contains(lost[0], "not in the log") || !strings.Contains(lost[1], "the log has") {
		t.Fatalf("lost %v", lost)
	}
}

func TestCheckZombies(t *testing.T) {
	stopped, resumed := t0.Add(10*time.Second), t0.Add(25*time.Second)
	pause := Pause{
		Writer: "w1", Proc: "writer-1", Stopped: stopped, Resumed: resumed, Complete: true,
		Before: map[int32]projection.Owner{0: {Partition: 0, ID: "w1", Epoch: 3}, 1: {Partition: 1, ID: "w2", Epoch: 3}, 2: {Partition: 2, ID: "w1", Epoch: 3}},
		After:  map[int32]projection.Owner{0: {Partition: 0, ID: "w2", Epoch: 8}, 1: {Partition: 1, ID: "w2", Epoch: 3}, 2: {Partition: 2, ID: "w1", Epoch: 3}},
	}
	if m := pause.Moved(); len(m) != 1 || m[0] != 8 {
		t.Fatalf("moved %v, want partition 0 to epoch 8", m)
	}
	legit := []Event{
		ev(0, 1, "a", 1, "x", 5*time.Second, 3),  // the old owner, before the pause
		ev(0, 3, "a", 2, "y", 20*time.Second, 8), // the new owner, during the pause
		ev(0, 5, "a", 3, "z", 26*time.Second, 9), // the writer back after re-fencing
		ev(2, 1, "b", 1, "x", 26*time.Second, 3), // a partition that did not move
	}
	z := Zombies([]Pause{pause}, legit)
	if z.Pauses != 1 || z.Moved != 1 || len(z.Events) != 0 {
		t.Fatalf("%+v", z)
	}
	zombie := append(legit, ev(0, 7, "a", 4, "zombie", 25*time.Second+time.Millisecond, 3))
	if z := Zombies([]Pause{pause}, zombie); len(z.Events) != 1 {
		t.Fatalf("zombie event not found: %+v", z)
	}
	pause.Complete = false
	if z := Zombies([]Pause{pause}, zombie); z.Skipped != 1 || len(z.Events) != 0 {
		t.Fatalf("incomplete pause: %+v", z)
	}
}
