package codec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
)

// benchValues are values of about 64 KiB, the default limit, in the
// shapes that cost the most per byte (many small members, deep nesting,
// one long string), and a small one, as most writes have.
func benchValues() map[string]json.RawMessage {
	var wide strings.Builder
	wide.WriteString("{")
	for i := 0; wide.Len() < 60<<10; i++ {
		fmt.Fprintf(&wide, `"member-%d":{"id":%d,"name":"n%d","tags":["a","b"],"ok":true},`, i, i, i)
	}
	wide.WriteString(`"end":null}`)
	var deep strings.Builder
	for deep.Len() < 30<<10 {
		deep.WriteString(`{"a":1,"b":[`)
	}
	n := strings.Count(deep.String(), "{")
	deep.WriteString("null")
	for range n {
		deep.WriteString("]}")
	}
	return map[string]json.RawMessage{
		"Wide":   json.RawMessage(wide.String()),
		"Deep":   json.RawMessage(deep.String()),
		"String": json.RawMessage(`{"s":"` + strings.Repeat("x", 60<<10) + `"}`),
		// Small is the value of figure 18a's writes, the common case.
		"Small": json.RawMessage(`{"client":17,"seq":1206,"name":"peer-3","tags":["a","b"],"ok":true}`),
	}
}

// BenchmarkCompactValue: the cost of checking and compacting a value of
// about 64 KiB on the write path.
func BenchmarkCompactValue(b *testing.B) {
	for name, v := range benchValues() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CompactValue(v, contract.DefaultMaxValueBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
