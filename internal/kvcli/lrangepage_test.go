package kvcli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/testenv/stack"
)

// TestLRangeHintContinuesAfterThePage: when the server's byte budget
// cuts an lrange, kvctl prints the values it got and names on stderr the
// START right after them, and asking from there prints the rest.
func TestLRangeHintContinuesAfterThePage(t *testing.T) {
	t.Parallel()
	url := stack.MustRun(t, stack.API(api.Config{MaxListBytes: 256 << 10})).URL
	k := &kvctlBin{path: mustBuild(t), env: map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}, dir: t.TempDir()}
	list := scope + "big-log"
	const n = 10
	big := strings.Repeat("v", 60<<10)
	for i := range n {
		if r := k.run(t, "", nil, "rpush", list, fmt.Sprintf("%02d%s", i, big)); r.code != 0 {
			t.Fatalf("rpush: %d %s", r.code, r.stderr)
		}
	}
	got, start := 0, 0
	for pages := 1; ; pages++ {
		r := k.run(t, "", nil, "lrange", list, fmt.Sprint(start), "-1", "--format", "value")
		if r.code != 0 {
			t.Fatalf("lrange: %d %s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		for i, l := range lines {
			if want := fmt.Sprintf("%02d%s", got+i, big); l != want {
				t.Fatalf("page %d line %d: %.10s…, want %.10s…", pages, i, l, want)
			}
		}
		got += len(lines)
		t.Logf("lrange from %d: %d values; stderr %q", start, len(lines), r.stderr)
		if r.stderr == "" {
			if got != n || pages < 2 {
				t.Fatalf("%d values in %d pages, want %d in 2 or more", got, pages, n)
			}
			return
		}
		start = got
		if want := fmt.Sprintf("ask for the rest from START %d\n", start); !strings.HasSuffix(r.stderr, want) {
			t.Fatalf("stderr %q, want it to end with %q", r.stderr, want)
		}
	}
}
