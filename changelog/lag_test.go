package changelog_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// TestLagWatchUpdate: the lag of a partition is its log end offset minus
// the group's commit, minus the log start while the group committed
// nothing (a group that does not exist yet is not an error), and minus
// Stored when that is further.
func TestLagWatchUpdate(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	prod := testenv.MustProducer(t, b)
	var evs []any
	for v := int64(1); v <= 5; v++ {
		evs = append(evs, contract.Event{SchemaVersion: contract.SchemaVersion, Key: "tenant/t/project/p/k", Scope: "tenant/t/project/p",
			Version: v, PrevVersion: v - 1, Kind: contract.KindPut, Op: contract.OpSet, After: []byte(`1`), TS: time.Unix(v, 0)})
	}
	prod.Commit(t, evs...)
	ctx := context.Background()
	ends := testenv.EndOffsets(ctx, t, prod.Client, b.Topics.Changes)
	p := changelog.Partition("tenant/t/project/p", b.Topics.Partitions)
	other := 1 - p
	adm := kadm.NewClient(prod.Client)
	gauge := changelog.NewLagGauge("lag", "test")
	var stored changelog.Offsets
	w := changelog.LagWatch{Admin: adm, Group: "lag-test", Topics: []string{b.Topics.Changes}, Gauge: gauge,
		Stored: func() changelog.Offsets { return stored }}
	lag := func(part int32) float64 {
		return testutil.ToFloat64(gauge.WithLabelValues(b.Topics.Changes, strconv.Itoa(int(part))))
	}
	check := func(name string, want float64) {
		t.Helper()
		if err := w.Update(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := lag(p); got != want || lag(other) != 0 {
			t.Errorf("%s: lag %v (other partition %v), want %v (0)", name, got, lag(other), want)
		}
	}
	check("NoGroup", float64(ends[p])) // 5 records and the commit marker

	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: b.Topics.Changes, Partition: p, At: 2, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "lag-test", commit); err != nil {
		t.Fatal(err)
	}
	check("Committed", float64(ends[p]-2))

	stored = changelog.Offsets{b.Topics.Changes: {p: 4}}
	check("StoredFurther", float64(ends[p]-4))
	stored = changelog.Offsets{b.Topics.Changes: {p: 1}}
	check("StoredBehindTheCommit", float64(ends[p]-2))
	if n := testutil.CollectAndCount(gauge); n != 2 {
		t.Errorf("%d series, want one per partition", n)
	}
}
