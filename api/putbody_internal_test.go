package api

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// putBodies are PUT bodies codec.DecodePutBody decodes itself (fast) or leaves
// to the strict decode; FuzzDecodePutBody starts from them.
var putBodies = []struct {
	body string
	fast bool
}{
	{`{"value":{"n":1,"s":"x"},"expectedVersion":7}`, true},
	{` { "value" : [1, -2.5e3, "a\"b\u00e9\\", true, false, null, {}, []] , "expectedVersion" : 0 } ` + "\n", true},
	{`{"value":null}`, true},
	{`{"value":"é 日本"}`, true},
	{`{}`, true},
	{`{"value":1,"expectedVersion":null,"ttlSeconds":60,"keepTtl":false,"requestId":"r-1","specRef":"spec/x"}`, true},
	{`{"value":1,"expectedVersion":-0,"ttlSeconds":null,"keepTtl":true,"requestId":null,"specRef":null}`, true},
	{`{"value":1,"expectedVersion":9223372036854775807}`, true},
	{`{"value":1,"semantics":{"purpose":"config","producer":"p","consumerHints":["a","b"],"ttlSeconds":5}}`, true},
	{`{"value":1,"semantics":{"consumerHints":[],"ttlSeconds":null}}`, true},
	{`{"value":1,"semantics":{"consumerHints":null}}`, true},
	{`{"value":1,"semantics":null}`, true},
	{`{"value":1,"semantics":{}}`, true},
	{`{"value":{"a":1,"a":2}}`, true}, // CompactValue's to refuse
	{`{"value":"\ud800"}`, true},      // likewise
	{"{\"value\":\"\xff\"}", true},    // likewise
	{`{"value":1,"expectedVersion":9223372036854775808}`, false},
	{`{"value":1,"expectedVersion":1.5}`, false},
	{`{"value":1,"expectedVersion":1e3}`, false},
	{`{"value":1,"expectedVersion":"1"}`, false},
	{`{"value":1,"expectedVersion":01}`, false},
	{`{"value":1,"value":2}`, false},
	{`{"VALUE":1}`, false},
	{`{"value":1,"extra":2}`, false},
	{`{"value":1,"semantics":{"purpose":"a","purpose":"b"}}`, false},
	{`{"value":1,"semantics":{"Purpose":"a"}}`, false},
	{`{"value":1,"semantics":{"consumerHints":[null]}}`, false},
	{`{"value":1,"semantics":[]}`, false},
	{`{"value":1,"requestId":"a\u0062"}`, false},
	{`{"va\u006cue":1}`, false},
	{`{"value":1}{"value":2}`, false},
	{`{"value":1}}`, false},
	{`{"value":1} x`, false},
	{`{"value":1,}`, false},
	{`{"value":[1,]}`, false},
	{`{"value":tru}`, false},
	{`{"value":"a` + "\n" + `"}`, false},
	{`{"value":-}`, false},
	{`{"value":1.}`, false},
	{`{"value":1e}`, false},
	{`{"value":"\x"}`, false},
	{`{"value":"\u12g4"}`, false},
	{`{"value":1,"keepTtl":1}`, false},
	{`{"value":1,"keepTtl":"true"}`, false},
	{`[]`, false},
	{`null`, false},
	{``, false},
	{`{"value":` + strings.Repeat("[", codec.MaxScanDepth+1) + strings.Repeat("]", codec.MaxScanDepth+1) + `}`, false},
	{`{"value":` + strings.Repeat("[", codec.MaxScanDepth) + strings.Repeat("]", codec.MaxScanDepth) + `}`, true},
	{`{"value":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, false},
}

// comparePutDecoders checks that codec.DecodePutBody decodes body exactly as
// the strict decode does whenever it decodes it, and reports whether it
// did.
func comparePutDecoders(t *testing.T, body []byte) bool {
	t.Helper()
	var strict contract.PutBody
	serr := decodeStrict(body, &strict)
	var fast contract.PutBody
	if !codec.DecodePutBody(body, &fast) {
		if !reflect.DeepEqual(fast, contract.PutBody{}) {
			t.Fatalf("%q: codec.DecodePutBody gave up but changed its target: %+v", body, fast)
		}
		return false
	}
	if serr != nil {
		t.Fatalf("%q: codec.DecodePutBody decoded %+v; the strict decode refuses it: %v", body, fast, serr)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q: codec.DecodePutBody decoded\n%#v\nthe strict decode\n%#v", body, fast, strict)
	}
	if !reflect.DeepEqual(fast.Semantics, strict.Semantics) {
		t.Fatalf("%q: semantics %#v, strict %#v", body, fast.Semantics, strict.Semantics)
	}
	return true
}

func TestDecodePutBody(t *testing.T) {
	for _, tc := range putBodies {
		name := tc.body
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			if got := comparePutDecoders(t, []byte(tc.body)); got != tc.fast {
				t.Errorf("decoded by codec.DecodePutBody: %v, want %v", got, tc.fast)
			}
		})
	}
}

// FuzzDecodePutBody: whatever the body, codec.DecodePutBody either leaves it
// to the strict decode or decodes it as the strict decode does, which
// then accepts it; so decodeBody's errors are the strict decode's.
func FuzzDecodePutBody(f *testing.F) {
	for _, tc := range putBodies {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		comparePutDecoders(t, body)
	})
}
