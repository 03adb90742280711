package localstack

import "testing"

// TestNextPprof: each process gets the next port after PprofBase's; port
// 0 stays 0 (a free port each); no base or a malformed one gives none.
func TestNextPprof(t *testing.T) {
	for _, tc := range []struct {
		base string
		want []string
	}{
		{"127.0.0.1:16060", []string{"127.0.0.1:16060", "127.0.0.1:16061", "127.0.0.1:16062"}},
		{"127.0.0.1:0", []string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}},
		{"", []string{"", "", ""}},
		{"6060", []string{"", "", ""}},
	} {
		s := &Stack{Config: Config{PprofBase: tc.base}}
		for i, want := range tc.want {
			if got := s.nextPprof(); got != want {
				t.Errorf("base %q, process %d: %q, want %q", tc.base, i, got, want)
			}
		}
	}
}
