package changelog_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
)

// TestPartitionAgreesWithFranzGo: any Kafka client keying records by scope
// picks the partition Partition picks; franz-go's default key
// partitioner is Kafka's.
func TestPartitionAgreesWithFranzGo(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("kv.changes")
	for i := range 1000 {
		scope := "tenant/t" + strconv.Itoa(i) + "/project/p" + strconv.Itoa(i%17)
		for _, n := range []int32{1, 12, 24, 100} {
			want := p.Partition(&kgo.Record{Key: []byte(scope)}, int(n))
			if got := changelog.Partition(scope, n); int(got) != want {
				t.Fatalf("Partition(%q, %d) = %d, franz-go says %d", scope, n, got, want)
			}
		}
	}
}
