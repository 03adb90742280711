package changelog

import (
	"strconv"
	"testing"

	"github.com/eskv/eskv/contract"
)

// murmur2Vectors are the vectors of Kafka's UtilsTest.testMurmur2, the raw
// hash as a Java int.
var murmur2Vectors = []struct {
	in   string
	want int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
	{"", 275646681}, // the empty array
}

func TestMurmur2(t *testing.T) {
	for _, tt := range murmur2Vectors {
		name := "OK_" + tt.in
		if tt.in == "" {
			name = "OK_Empty"
		}
		t.Run(name, func(t *testing.T) {
			if got := int32(murmur2([]byte(tt.in))); got != tt.want {
				t.Errorf("murmur2(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestPartition(t *testing.T) {
	t.Run("OKKafkaVectors", func(t *testing.T) {
		// Kafka: Utils.toPositive(murmur2(key)) % numPartitions.
		for _, tt := range murmur2Vectors {
			for _, n := range []int32{1, 7, 12, 24} {
				want := (tt.want & 0x7fffffff) % n
				if got := Partition(tt.in, n); got != want {
					t.Errorf("Partition(%q, %d) = %d, want %d", tt.in, n, got, want)
				}
			}
		}
	})

	t.Run("OKInRange", func(t *testing.T) {
		for _, n := range []int32{1, 2, 3, 12, 24, 1000} {
			seen := make(map[int32]bool)
			for i := range 5000 {
				scope := "tenant/t" + strconv.Itoa(i) + "/project/p"
				p := Partition(scope, n)
				if p < 0 || p >= n {
					t.Fatalf("Partition(%q, %d) = %d, outside [0,%d)", scope, n, p, n)
				}
				seen[p] = true
			}
			// 5000 scopes reach every partition of a small topic.
			if n <= 24 && len(seen) != int(n) {
				t.Errorf("%d partitions: only %d used by 5000 scopes", n, len(seen))
			}
		}
	})

	t.Run("OKSameScopeSamePartition", func(t *testing.T) {
		keys := []string{
			"tenant/acme/project/web/a",
			"tenant/acme/project/web/flags/dark-mode",
			"tenant/acme/project/web/locks/leader",
			"tenant/acme/project/web/x/y/z/counter",
		}
		for _, n := range []int32{12, 24} {
			want := int32(-1)
			for _, s := range keys {
				k, err := contract.ParseKey(s)
				if err != nil {
					t.Fatal(err)
				}
				p := Partition(k.Scope(), n)
				if want == -1 {
					want = p
				}
				if p != want {
					t.Errorf("%d partitions: %s is in partition %d, other keys of its project in %d", n, s, p, want)
				}
			}
		}
	})
}

func BenchmarkPartition(b *testing.B) {
	for b.Loop() {
		Partition("tenant/acme/project/web", 24)
	}
}
