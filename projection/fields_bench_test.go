package projection

import "testing"

// BenchmarkValueFields: deriving the indexed fields of figure 18a's value
// (the projector does it for every value it writes) and of a value with
// nesting and escapes.
func BenchmarkValueFields(b *testing.B) {
	for name, v := range map[string]string{
		"Small":  `{"client":17,"seq":1206,"name":"peer-3","tags":["a","b"],"ok":true}`,
		"Nested": `{"a":{"b":[1,2.5,{"c":"d\u00e9"}],"e":null},"name":"caf\u00e9","n":-12.5e0,"s":"x\"y","t":true,"u":[[],{}]}`,
	} {
		b.Run(name, func(b *testing.B) {
			dst := make([]valueField, 0, 16)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := valueFields(v, dst); !ok {
					b.Fatal("not decided")
				}
			}
		})
	}
}
