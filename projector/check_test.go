package projector_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// mustAdmin returns an admin client on b, closed when the test ends.
func mustAdmin(tb testing.TB, b *testenv.Broker) *kadm.Client {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// recreateTopic deletes kv.changes and creates it again (new topic ID,
// same partition count, empty).
func recreateTopic(tb testing.TB, b *testenv.Broker) {
	tb.Helper()
	adm := mustAdmin(tb, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, b.Topics.Changes); err != nil {
		tb.Fatalf("delete topic: %v", err)
	}
	testenv.WaitForNil(tb, 10*time.Second, "kv.changes to be created again", func() error {
		return changelog.Ensure(ctx, adm, b.Topics)
	})
}

// resets returns the reset counter of reason.
func resets(tb testing.TB, reg *prometheus.Registry, reason string) float64 {
	tb.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "eskv_projector_topic_resets_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	tb.Fatalf("eskv_projector_topic_resets_total{reason=%q} not exported", reason)
	return 0
}

// wantReset checks that Run returned a reset naming each of parts, and
// that the metric counted reason.
func wantReset(tb testing.TB, r *running, err error, sentinel error, reason string, parts ...string) {
	tb.Helper()
	if !errors.Is(err, sentinel) {
		tb.Fatalf("Run returned %v, want %v", err, sentinel)
	}
	for _, s := range parts {
		if !strings.Contains(err.Error(), s) {
			tb.Errorf("error %q does not say %q", err, s)
		}
	}
	if n := resets(tb, r.reg, reason); n < 1 {
		tb.Errorf("eskv_projector_topic_resets_total{reason=%q} = %v, want >= 1", reason, n)
	}
}

// projectAndStop produces n events, lets a projector apply them and stops
// it; it returns the stored offsets.
func projectAndStop(tb testing.TB, b *testenv.Broker, s *projection.Store, prod *testenv.Producer, f *fold, n int) map[int32]int64 {
	tb.Helper()
	produce(tb, prod, f, n, 10)
	r := start(tb, b, s, projector.Config{})
	testenv.WaitProjected(tb, runTimeout, s, b.Topics.Changes, prod.Committed(tb))
	if err := r.Stop(tb); err != nil {
		tb.Fatalf("projector: %v", err)
	}
	offs, err := s.Offsets(context.Background(), b.Topics.Changes)
	if err != nil {
		tb.Fatal(err)
	}
	return offs
}

func TestStoredOffsetPastEndStops(t *testing.T) {
	t.Parallel()
	b, _, s, prod := mustSetup(t, 1)
	const k = "tenant/t/project/p/k"
	prod.Commit(t, newEvent(k, 1, contract.KindPut, `1`))
	// As if the topic had been truncated: Postgres is far ahead of the log.
	if err := s.Apply(context.Background(), b.Topics.Changes, []projection.Applied{{Partition: 0, Offset: 999, Event: newEvent(k, 7, contract.KindPut, `7`)}}); err != nil {
		t.Fatal(err)
	}
	r := start(t, b, s, projector.Config{})
	wantReset(t, r, r.Wait(t, runTimeout), changelog.ErrTopicReset, "offset_after_end",
		"partition 0: stored offset 1000 is past the log end 2")
	if st, err := s.State(context.Background(), k); err != nil || st.Version != 7 {
		t.Errorf("state %+v, %v; the projection was changed", st, err)
	}
}

func TestTopicRecreatedStops(t *testing.T) {
	t.Parallel()
	b, _, s, prod := mustSetup(t, 2)
	f := newFold(4, 4, 5)
	stored := projectAndStop(t, b, s, prod, f, 40)

	// The topic is recreated and filled past the stored offsets: the
	// offsets alone look fine, the topic ID does not.
	recreateTopic(t, b)
	prod2 := testenv.MustProducer(t, b)
	produce(t, prod2, newFold(5, 4, 5), 200, 10)
	for p, o := range prod2.Committed(t) {
		if o <= stored[p] {
			t.Fatalf("partition %d of the new topic ends at %d, not past the stored %d: the test proves nothing", p, o, stored[p])
		}
	}
	before, err := s.Offsets(context.Background(), b.Topics.Changes)
	if err != nil {
		t.Fatal(err)
	}

	r := start(t, b, s, projector.Config{})
	wantReset(t, r, r.Wait(t, runTimeout), changelog.ErrTopicReset, "topic_recreated", "the topic was recreated: its ID is")
	after, err := s.Offsets(context.Background(), b.Topics.Changes)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("stored offsets moved from %v to %v: the new topic was applied", before, after)
	}
}

func TestRecordsDeletedStops(t *testing.T) {
	t.Parallel()
	b, _, s, prod := mustSetup(t, 1)
	f := newFold(6, 2, 5)
	stored := projectAndStop(t, b, s, prod, f, 20)

	// More events, then every record of the partition is deleted: the
	// projection never saw the new ones.
	produce(t, prod, f, 20, 10)
	end := prod.Committed(t)[0]
	ctx := context.Background()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: b.Topics.Changes, Partition: 0, At: end})
	if _, err := mustAdmin(t, b).DeleteRecords(ctx, offs); err != nil {
		t.Fatalf("delete records: %v", err)
	}

	r := start(t, b, s, projector.Config{})
	wantReset(t, r, r.Wait(t, runTimeout), changelog.ErrTopicReset, "offset_before_start",
		"partition 0: stored offset "+strconv.FormatInt(stored[0], 10)+" is before the log start "+strconv.FormatInt(end, 10))
}

// TestTopicChangedWhileRunningStops: the periodic check stops a running
// projector when partitions are added to the topic or it is recreated.
func TestTopicChangedWhileRunningStops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		seed   uint64
		change func(testing.TB, *testenv.Broker)
		check  func(*testing.T, *running, error)
	}{
		{"PartitionsAdded", 7, func(tb testing.TB, b *testenv.Broker) {
			if _, err := mustAdmin(tb, b).CreatePartitions(context.Background(), 1, b.Topics.Changes); err != nil {
				tb.Fatal(err)
			}
		}, func(t *testing.T, r *running, err error) {
			wantReset(t, r, err, changelog.ErrPartitionCount, "partition_count", "the topic has 3 partitions, configured 2")
		}},
		{"TopicRecreated", 8, recreateTopic, func(t *testing.T, r *running, err error) {
			if !errors.Is(err, changelog.ErrTopicReset) {
				t.Fatalf("Run returned %v, want %v", err, changelog.ErrTopicReset)
			}
			// Which check sees it first depends on timing: the topic gone,
			// its new ID, or a fetch out of range.
			var n float64
			for _, reason := range []string{"topic_missing", "topic_recreated", "offset_out_of_range", "offset_after_end"} {
				n += resets(t, r.reg, reason)
			}
			if n < 1 {
				t.Errorf("no reset counted")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, s, prod := mustSetup(t, 2)
			produce(t, prod, newFold(tc.seed, 2, 2), 10, 5)
			r := start(t, b, s, projector.Config{CheckInterval: 50 * time.Millisecond})
			testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))

			tc.change(t, b)
			tc.check(t, r, r.Wait(t, runTimeout))
		})
	}
}

// TestResetFoundOnAssignment deletes records between the projector's
// start check and its first assignment (the group's offset fetch is held
// meanwhile): the assignment's check stops it.
func TestResetFoundOnAssignment(t *testing.T) {
	t.Parallel()
	b, _, s, prod := mustSetup(t, 1)
	f := newFold(9, 2, 5)
	projectAndStop(t, b, s, prod, f, 20)
	produce(t, prod, f, 20, 10)
	end := prod.Committed(t)[0]

	held := make(chan struct{})
	release := make(chan struct{})
	var once atomic.Bool
	b.Cluster.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		if once.CompareAndSwap(false, true) {
			close(held)
			b.Cluster.SleepControl(func() { <-release })
		}
		b.Cluster.DropControl()
		return nil, nil, false
	})

	r := start(t, b, s, projector.Config{CheckInterval: time.Hour})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the projector did not fetch group offsets within 30s")
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: b.Topics.Changes, Partition: 0, At: end})
	if _, err := mustAdmin(t, b).DeleteRecords(context.Background(), offs); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	close(release)
	wantReset(t, r, r.Wait(t, runTimeout), changelog.ErrTopicReset, "offset_before_start", "is before the log start "+strconv.FormatInt(end, 10))
}

func TestTopicRecordedAtFirstStart(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, 2)
	r := start(t, b, s, projector.Config{})
	produce(t, prod, newFold(10, 1, 1), 1, 1)
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	if err := r.Stop(t); err != nil {
		t.Fatal(err)
	}
	var id string
	var n int32
	if err := pg.Pool.QueryRow(context.Background(), `SELECT topic_id, partitions FROM projector_topic WHERE topic = $1`, b.Topics.Changes).Scan(&id, &n); err != nil {
		t.Fatalf("projector_topic: %v", err)
	}
	details, err := mustAdmin(t, b).ListTopics(context.Background(), b.Topics.Changes)
	if err != nil {
		t.Fatal(err)
	}
	if want := details[b.Topics.Changes].ID.String(); id != want || n != 2 {
		t.Errorf("projector_topic = (%s, %d), want (%s, 2)", id, n, want)
	}
}
