package projector_test

import (
	"testing"
	"time"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// TestParseRetention: ESKV_HISTORY_RETENTION's forms, and what it refuses.
func TestParseRetention(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]projection.Retention{
		"":                       {},
		"age=720h":               {MaxAge: 720 * time.Hour},
		"versions=100":           {MaxVersions: 100},
		"age=720h,versions=100":  {MaxAge: 720 * time.Hour, MaxVersions: 100},
		" versions=1 , age=90m ": {MaxAge: 90 * time.Minute, MaxVersions: 1},
	} {
		if got, err := projector.ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"age", "age=0s", "age=-1h", "age=1 day", "versions=0", "versions=-2", "versions=1.5",
		"versions=1,versions=2", "keep=3", "720h"} {
		if got, err := projector.ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %+v, want an error", in, got)
		}
	}
}
