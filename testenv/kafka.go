package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Broker is an in-process Kafka-protocol broker with the eskv topics.
type Broker struct {
	Cluster *kfake.Cluster
	Addrs   []string
	Topics  changelog.Topics
	// Kafka is how the test's clients reach it: zero (plaintext) but
	// on a SecureBroker.
	Kafka kafkaconf.Conn
}

// MustBroker starts a single-node kfake cluster on a random port, creates
// kv.changes (compacted) and kv.conflicts with the given partition count,
// and stops it when the test ends.
func MustBroker(tb testing.TB, partitions int32) *Broker {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		tb.Fatalf("start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	b := &Broker{
		Cluster: c,
		Addrs:   c.ListenAddrs(),
		Topics: changelog.Topics{
			Changes:    changelog.DefaultChangesTopic,
			Conflicts:  changelog.DefaultConflictsTopic,
			Partitions: partitions,
		},
	}
	cl, err := b.Kafka.NewClient("testenv", b.Addrs)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := changelog.Ensure(ctx, kadm.NewClient(cl), b.Topics); err != nil {
		tb.Fatalf("create topics: %v", err)
	}
	return b
}

// Pause makes the broker stop answering, as a SIGSTOPped one does: every
// request it receives waits (kfake's control sleeps it, and the requests
// behind it on its connection) until the returned function is called,
// which the test's end also does.
func (b *Broker) Pause(tb testing.TB) (resume func()) {
	held := make(chan struct{})
	var once sync.Once
	resume = func() { once.Do(func() { close(held) }) }
	tb.Cleanup(resume)
	c := b.Cluster
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		select {
		case <-held:
			c.DropControl()
		default:
			c.SleepControl(func() { <-held })
		}
		return nil, nil, false
	})
	return resume
}

// EndOffsets returns the last stable offset of each partition of topic.
func EndOffsets(ctx context.Context, tb testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	tb.Helper()
	return listOffsets(ctx, tb, topic, kadm.NewClient(cl).ListCommittedOffsets)
}

// StartOffsets returns the log start offset of each partition of topic
// (past 0 once kfake compacted the partition's head).
func StartOffsets(ctx context.Context, tb testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	tb.Helper()
	return listOffsets(ctx, tb, topic, kadm.NewClient(cl).ListStartOffsets)
}

func listOffsets(ctx context.Context, tb testing.TB, topic string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) map[int32]int64 {
	tb.Helper()
	lo, err := list(ctx, topic)
	if err != nil {
		tb.Fatalf("list offsets: %v", err)
	}
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			tb.Fatalf("list offsets %s/%d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}
