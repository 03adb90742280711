package changelog_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/testenv"
)

// TestMaxMessageBytes: the topics' max.message.bytes as the brokers
// describe it: kv.changes' as Ensure sets it (2 MiB), kv.conflicts' the
// default, and for a topic whose configuration cannot be read (missing
// here), the broker's message.max.bytes.
func TestMaxMessageBytes(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	cl, err := b.Kafka.NewClient("test", b.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const broker = 3 << 20
	v := strconv.Itoa(broker)
	if _, err := adm.AlterBrokerConfigs(t.Context(), []kadm.AlterConfig{{Name: "message.max.bytes", Value: &v}}); err != nil {
		t.Fatal(err)
	}
	got, err := changelog.MaxMessageBytes(t.Context(), adm, b.Topics.Changes, b.Topics.Conflicts, "missing")
	if err != nil {
		t.Fatal(err)
	}
	// kfake describes a topic that does not override max.message.bytes
	// with Kafka's default, not the broker's setting it enforces: a
	// smaller limit than the real one, which only makes batches smaller.
	want := map[string]int{b.Topics.Changes: 2 << 20, b.Topics.Conflicts: changelog.DefaultMaxMessageBytes, "missing": broker}
	for topic, n := range want {
		if got[topic] != n {
			t.Errorf("%s: %d, want %d (all: %v)", topic, got[topic], n, got)
		}
	}
}
