package contract

import "testing"

// TestRecordKey: an element change's record key is its own (the event
// key, NUL, the element), so compaction keeps every element's latest
// change; every other event keeps the KV key. EventKeyOf reads the KV key
// back from either.
func TestRecordKey(t *testing.T) {
	const k = "tenant/t/project/p/set"
	for _, tc := range []struct {
		name string
		e    Event
		want string
	}{
		{"OKPut", Event{Key: k, Kind: KindPut}, k},
		{"OKDeleteOfSet", Event{Key: k, Kind: KindDelete, Op: OpDelete}, k},
		{"OKAdd", Event{Key: k, Kind: KindPut, Op: OpSAdd, Element: &Element{Op: ElementAdd, Member: "a"}}, k + "\x00a"},
		{"OKRemoveSameAsAdd", Event{Key: k, Kind: KindPut, Op: OpSRem, Element: &Element{Op: ElementRemove, Member: "a"}}, k + "\x00a"},
		{"OKMemberAnyContent", Event{Key: k, Kind: KindPut, Op: OpSAdd, Element: &Element{Op: ElementAdd, Member: "b/c é\x01"}}, k + "\x00b/c é\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.e.RecordKey()
			if got != tc.want {
				t.Fatalf("RecordKey %q, want %q", got, tc.want)
			}
			if back := EventKeyOf([]byte(got)); back != k {
				t.Fatalf("EventKeyOf(%q) = %q, want %q", got, back, k)
			}
		})
	}
}
