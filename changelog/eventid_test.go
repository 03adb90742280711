package changelog

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/eskv/eskv/contract"
)

// eventIDReference is EventID as it was before it hashed on the stack
// (appendEventID): FuzzEventID holds the two equal.
func eventIDReference(key string, version int64) string {
	return uuid.NewSHA1(idNamespace, []byte(key+"\x00"+strconv.FormatInt(version, 10))).String()
}

func FuzzEventID(f *testing.F) {
	f.Add("tenant/acme/project/web/k", int64(7))
	f.Add(strings.Repeat("k", contract.MaxKeyLen), int64(-1))
	f.Add(strings.Repeat("k", contract.MaxKeyLen+1), int64(1<<62))
	f.Add("", int64(0))
	f.Fuzz(func(t *testing.T, key string, version int64) {
		if got, want := EventID(key, version), eventIDReference(key, version); got != want {
			t.Fatalf("EventID(%q, %d) = %s, want %s", key, version, got, want)
		}
	})
}

func BenchmarkEventID(b *testing.B) {
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EventID("tenant/acme/project/web/k", 7)
		}
	})
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			eventIDReference("tenant/acme/project/web/k", 7)
		}
	})
}
