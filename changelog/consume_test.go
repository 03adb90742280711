package changelog_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// storingSink stores the next offset of every record it is given and
// checks that each commit carries only offsets it stored.
type storingSink struct {
	t      *testing.T
	topic  string
	mu     sync.Mutex
	stored map[int32]int64
}

func (s *storingSink) Assigned(context.Context, map[string][]int32) (map[string]map[int32]kgo.Offset, error) {
	return nil, nil
}

func (s *storingSink) Write(_ context.Context, recs []*kgo.Record) (changelog.Offsets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[int32]int64{}
	for _, r := range recs {
		next[r.Partition] = r.Offset + 1
		s.stored[r.Partition] = r.Offset + 1
	}
	return changelog.Offsets{s.topic: next}, nil
}

func (s *storingSink) Committed(offsets changelog.Offsets, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.t.Errorf("commit %v: %v", offsets, err)
	}
	for p, off := range offsets[s.topic] {
		if off > s.stored[p] {
			s.t.Errorf("partition %d committed at %d, stored only up to %d", p, off, s.stored[p])
		}
	}
}

func (s *storingSink) Revoked(map[string][]int32) {}

// storedOffsets returns a copy of what the sink stored.
func (s *storingSink) storedOffsets() map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.stored)
}

// TestIdleConsumerCommits: a consumer with a CommitInterval that stays
// idle after a batch commits that batch's offsets to the group anyway (in
// about one interval; before, they stayed pending until the next batch,
// and the group showed lag for ever), and only offsets its sink stored;
// a later burst after the idle commit is committed the same way.
func TestIdleConsumerCommits(t *testing.T) {
	const interval = 300 * time.Millisecond
	b := testenv.MustBroker(t, 2)
	prod := testenv.MustProducer(t, b)
	sink := &storingSink{t: t, topic: b.Topics.Changes, stored: map[int32]int64{}}
	c, err := changelog.NewConsumer(changelog.ConsumerConfig{Brokers: b.Addrs, Topics: []string{b.Topics.Changes},
		Group: "idle-commit", MaxBatch: 100, CommitInterval: interval}, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	testenv.RunUntilCleanup(t, "consumer", c.Run)
	adm := kadm.NewClient(prod.Client)
	for round := range 2 {
		var evs []any
		for v := int64(1); v <= 5; v++ {
			scope := fmt.Sprintf("tenant/t/project/p%d", v)
			evs = append(evs, contract.Event{SchemaVersion: contract.SchemaVersion, Key: scope + "/k", Scope: scope,
				Version: int64(round)*5 + v, PrevVersion: int64(round)*5 + v - 1, Kind: contract.KindPut, Op: contract.OpSet,
				After: []byte(`1`), TS: time.Unix(v, 0)})
		}
		prod.Commit(t, evs...)
		want := prod.Committed(t)
		testenv.WaitFor(t, 10*time.Second, "the sink stores every record", func() bool {
			return maps.Equal(sink.storedOffsets(), want)
		})
		stored := time.Now()
		testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("round %d: the idle group commits %v", round, want), func() bool {
			return maps.Equal(groupOffsets(t, adm, "idle-commit", b.Topics.Changes), want)
		})
		t.Logf("round %d: committed %v %v after the sink stored it (interval %v)", round, want, time.Since(stored).Round(time.Millisecond), interval)
	}
}

// groupOffsets returns the offsets group committed for topic.
func groupOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err != nil {
			t.Fatalf("offset of %s/%d: %v", topic, p, o.Err)
		}
		out[p] = o.At
	}
	return out
}

// timedSink records when each Write began and how many records it held.
type timedSink struct {
	storingSink
	writes chan timedWrite
}

type timedWrite struct {
	at   time.Time
	recs int
}

func (s *timedSink) Write(ctx context.Context, recs []*kgo.Record) (changelog.Offsets, error) {
	s.writes <- timedWrite{at: time.Now(), recs: len(recs)}
	return s.storingSink.Write(ctx, recs)
}

// TestConsumerPace: after a busy batch (PaceFrom records or more) the
// next one gathers until Pace after it began, so transactions committed
// meanwhile come in one batch, no earlier; after a batch that was not a
// busy one, the next is written as soon as it arrives.
func TestConsumerPace(t *testing.T) {
	const pace = time.Second
	b := testenv.MustBroker(t, 1)
	prod := testenv.MustProducer(t, b)
	sink := &timedSink{storingSink: storingSink{t: t, topic: b.Topics.Changes, stored: map[int32]int64{}},
		writes: make(chan timedWrite, 16)}
	c, err := changelog.NewConsumer(changelog.ConsumerConfig{Brokers: b.Addrs, Topics: []string{b.Topics.Changes},
		Group: "pace", MaxBatch: 100, Pace: pace, PaceFrom: 8}, sink)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	testenv.RunUntilCleanup(t, "consumer", c.Run)
	version := int64(0)
	commit := func(n int) { // one transaction of n events: n records and a marker
		evs := make([]any, n)
		for i := range evs {
			version++
			evs[i] = contract.Event{SchemaVersion: contract.SchemaVersion, Key: "tenant/t/project/p/k", Scope: "tenant/t/project/p",
				Version: version, PrevVersion: version - 1, Kind: contract.KindPut, Op: contract.OpSet, After: []byte(`1`), TS: time.Unix(version, 0)}
		}
		prod.Commit(t, evs...)
	}
	next := func(what string) timedWrite {
		t.Helper()
		select {
		case w := <-sink.writes:
			return w
		case <-time.After(10 * time.Second):
			t.Fatalf("no write of %s", what)
			return timedWrite{}
		}
	}

	commit(9)
	busy := next("the busy batch")
	if busy.recs != 10 {
		t.Fatalf("the busy batch held %d records, want 10", busy.recs)
	}
	for range 3 {
		commit(1)
	}
	paced := next("the paced batch")
	if gap := paced.at.Sub(busy.at); gap < pace || paced.recs != 6 {
		t.Errorf("after a busy batch, the next began %v later with %d records; want ≥ %v with the 3 transactions (6 records)", gap, paced.recs, pace)
	}
	commit(1)
	quiet := next("the batch after a quiet one")
	if gap := quiet.at.Sub(paced.at); gap >= pace || quiet.recs != 2 {
		t.Errorf("after a batch of 6 records, the next began %v later with %d records; want at once (< %v) with 2", gap, quiet.recs, pace)
	}
}
