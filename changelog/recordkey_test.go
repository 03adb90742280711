package changelog

import (
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestRecordKey: an element change's record key is its own (the event
// key, NUL, the element), so compaction keeps every element's latest
// change; every other event keeps the KV key. EventKeyOf reads the KV key
// back from either.
func TestRecordKey(t *testing.T) {
	const k = "tenant/t/project/p/set"
	for _, tc := range []struct {
		name string
		e    contract.Event
		want string
	}{
		{"OKPut", contract.Event{Key: k, Kind: contract.KindPut}, k},
		{"OKDeleteOfSet", contract.Event{Key: k, Kind: contract.KindDelete, Op: contract.OpDelete}, k},
		{"OKAdd", contract.Event{Key: k, Kind: contract.KindPut, Op: contract.OpSAdd, Element: &contract.Element{Op: contract.ElementAdd, Member: "a"}}, k + "\x00a"},
		{"OKRemoveSameAsAdd", contract.Event{Key: k, Kind: contract.KindPut, Op: contract.OpSRem, Element: &contract.Element{Op: contract.ElementRemove, Member: "a"}}, k + "\x00a"},
		{"OKMemberAnyContent", contract.Event{Key: k, Kind: contract.KindPut, Op: contract.OpSAdd, Element: &contract.Element{Op: contract.ElementAdd, Member: "b/c é\x01"}}, k + "\x00b/c é\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordKey(&tc.e)
			if got != tc.want {
				t.Fatalf("RecordKey %q, want %q", got, tc.want)
			}
			if back := EventKeyOf([]byte(got)); back != k {
				t.Fatalf("EventKeyOf(%q) = %q, want %q", got, back, k)
			}
		})
	}
}
