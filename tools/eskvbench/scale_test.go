package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/tools/internal/cli"
)

func TestScaleSteps(t *testing.T) {
	steps := scaleSteps("r1", 1_000_000, 100)
	want := []struct {
		title      string
		projects   int
		perProject int
		keys       int
	}{
		{"10,000 keys in 1 project", 1, 10_000, 10_000},
		{"1,000,000 keys in 1 project", 1, 1_000_000, 1_000_000},
		{"10,000,000 keys over 100 projects", 100, 100_000, 10_000_000},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(steps), len(want))
	}
	for i, w := range want {
		s := steps[i]
		if s.title != w.title || len(s.projects) != w.projects || s.perProject != w.perProject || s.keys() != w.keys {
			t.Errorf("step %d: %q, %d projects of %d keys (%d); want %q, %d of %d (%d)",
				i, s.title, len(s.projects), s.perProject, s.keys(), w.title, w.projects, w.perProject, w.keys)
		}
	}
	t.Run("ProjectsDistinct", func(t *testing.T) {
		seen := map[string]bool{}
		for _, s := range steps {
			for _, p := range s.projects {
				if seen[p] || !strings.Contains(p, "r1") {
					t.Errorf("project %q repeated or without the run's name", p)
				}
				seen[p] = true
			}
		}
	})
	t.Run("KeysSortByNumber", func(t *testing.T) {
		if a, b := scaleKeyPath(9), scaleKeyPath(10); a >= b {
			t.Errorf("%q sorts after %q", a, b)
		}
	})
}

func TestRatioVerdict(t *testing.T) {
	for _, tt := range []struct {
		name      string
		base, got time.Duration
		ratio     float64
		verdict   string
	}{
		{"PassFlat", 4 * time.Millisecond, 4 * time.Millisecond, 1, verdictPass},
		{"PassAtTheLimit", 4 * time.Millisecond, 8 * time.Millisecond, 2, verdictPass},
		{"PassFaster", 4 * time.Millisecond, 2 * time.Millisecond, 0.5, verdictPass},
		{"MissOverTheLimit", 4 * time.Millisecond, 9 * time.Millisecond, 2.25, verdictMiss},
		{"SkipWithoutBase", 0, 9 * time.Millisecond, 0, verdictSkip},
		{"SkipWithoutMeasure", 4 * time.Millisecond, 0, 0, verdictSkip},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, v := ratioVerdict(tt.base, tt.got, targetScaleRatio)
			if r != tt.ratio || v != tt.verdict {
				t.Errorf("ratioVerdict(%s, %s) = %v, %s; want %v, %s", tt.base, tt.got, r, v, tt.ratio, tt.verdict)
			}
		})
	}
}

func TestScaleRatio(t *testing.T) {
	base := result{P99: ms(10 * time.Millisecond), Ops: 10}
	t.Run("BaselineHasNoVerdict", func(t *testing.T) {
		r := scaleRatio("23a1", base, base, true)
		if r.Step != "23a1" || r.Verdict != "" || r.Target != "the baseline" {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("MissAtTwoAndAHalf", func(t *testing.T) {
		r := scaleRatio("23a2", base, result{P99: ms(25 * time.Millisecond), Ops: 10, Note: "n"}, false)
		if r.Verdict != verdictMiss || r.Target != "p99 ≤ 2× 10ms" || !strings.HasPrefix(r.Note, "2.50× the baseline's p99 (p50 ") {
			t.Errorf("got %+v", r)
		}
	})
	t.Run("SkipStaysSkip", func(t *testing.T) {
		r := scaleRatio("23a2", base, result{Verdict: verdictSkip, Note: "why"}, false)
		if r.Verdict != verdictSkip || r.Note != "why" {
			t.Errorf("got %+v", r)
		}
	})
}

func TestParseRebuild(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		out := "rebuilt kv.changes into schema eskvbench_rebuild_ab12cd: 230192 events read from 12 partitions " +
			"(log start to the last stable offsets taken at start), 230006 keys, in 38.418s\n"
		events, keys, took, err := parseRebuild(out)
		if err != nil || events != 230192 || keys != 230006 || took != 38418*time.Millisecond {
			t.Errorf("got %d, %d, %s, %v", events, keys, took, err)
		}
	})
	t.Run("ErrNoLine", func(t *testing.T) {
		if _, _, _, err := parseRebuild("rebuild: schema exists\n"); err == nil {
			t.Error("want an error")
		}
	})
	t.Run("ErrBadDuration", func(t *testing.T) {
		if _, _, _, err := parseRebuild("rebuilt t into schema s: 1 events read from 1 partitions (x), 1 keys, in 3parsecs\n"); err == nil {
			t.Error("want an error")
		}
	})
}

func TestRebuildPhases(t *testing.T) {
	log := `{"time":"2026-12-01T13:30:00Z","level":"INFO","msg":"rebuilding","service":"projector"}
not json
{"time":"2026-12-01T13:32:00Z","level":"INFO","msg":"folded","events":11028305,"took":130400000000}
{"time":"2026-12-01T13:35:00Z","level":"INFO","msg":"restored","took":191000000000,"steps":{"kv_fields_str_scoped":80000000000,"derive kv_fields":40000000000,"kv_fields_pkey":12000000000,"kv_history_pkey":40000000000}}
`
	want := "fold 2m10.4s, restore 3m11s (kv_fields_str_scoped 1m20s, derive kv_fields 40s, kv_history_pkey 40s)"
	if got := rebuildPhases(log, 3); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := rebuildPhases("rebuilt t into schema s\n", 3); got != "" {
		t.Errorf("no phases: got %q", got)
	}
}

// TestTailOf: a failed rebuild's note keeps the end of its log, where
// the error is, now that the log holds its info lines too.
func TestTailOf(t *testing.T) {
	if got := tailOf("rebuild: schema exists", 50); got != "rebuild: schema exists" {
		t.Errorf("short: %q", got)
	}
	if got := tailOf(strings.Repeat("info\n", 100)+"error: no broker", 16); got != "…error: no broker" {
		t.Errorf("long: %q", got)
	}
}

func TestParseScale(t *testing.T) {
	t.Run("RunsFigure23Alone", func(t *testing.T) {
		cli.SetEnv(t, nil)
		c, err := parse([]string{"-scale", "-scale-keys", "200000", "-scale-projects", "20"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if !c.scale || c.scaleKeys != 200_000 || c.scaleProjects != 20 || c.auditor || c.only == nil || len(c.only) != 0 || c.wants("1") {
			t.Errorf("got %+v", c)
		}
	})
	t.Run("DefaultsAreTheIssues", func(t *testing.T) {
		cli.SetEnv(t, nil)
		c, err := parse(nil, io.Discard)
		if err != nil || c.scale || c.scaleKeys != 1_000_000 || c.scaleProjects != 100 {
			t.Errorf("got %+v, %v", c, err)
		}
	})
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"ErrWithURL", []string{"-scale", "-url", "http://x", "-token", "t"}},
		{"ErrWithOnly", []string{"-scale", "-only", "8"}},
		{"ErrFewKeys", []string{"-scale", "-scale-keys", "9999"}},
		{"ErrTooManyProjects", []string{"-scale", "-scale-keys", "10000", "-scale-projects", "101"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cli.SetEnv(t, nil)
			if _, err := parse(tt.args, io.Discard); err == nil {
				t.Error("want an error")
			}
		})
	}
}

// TestDiskEnough: figure 23 at the defaults (11 million keys) needs
// about 54.5 GB where Postgres keeps its data (every key once: the
// loaded projection is emptied before the rebuild copies it), and says
// so, with the way out, before it starts rather than when the disk is
// full.
func TestDiskEnough(t *testing.T) {
	steps := scaleSteps("x", 1_000_000, 100)
	need := scaleDiskNeed(steps)
	if need != 11_010_000*scaleBytesPerKey+scaleDiskSlack {
		t.Fatalf("need %d, want every key once at %d bytes and %d besides", need, scaleBytesPerKey, scaleDiskSlack)
	}
	if err := diskEnough("/pg", need, need, steps); err != nil {
		t.Errorf("exactly enough: %v", err)
	}
	err := diskEnough("/pg", 40e9, need, steps)
	if err == nil {
		t.Fatal("40 GB free for 11 million keys: no error")
	}
	for _, want := range []string{"about 54.5 GB free", "/pg, which has 40.0 GB", "11,010,000 keys at about 4,500 bytes each, once", "and 5.0 GB besides", "Solution: a smaller scale"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in %q", want, err)
		}
	}
}

// TestProcessesKeepStoppedServices: figure 23 stops the writer and the
// projector before its rebuild (freeProjection); figure 6, read at the
// end, reports what they had used when they stopped, not "no such
// process".
func TestProcessesKeepStoppedServices(t *testing.T) {
	const gone = 1 << 30 // above pid_max: no such process
	stopped := procReport{Name: "writer", PID: gone, PeakBytes: 90 << 20, CPUSeconds: 12.5, Note: "stopped before the end"}
	s := &stack{own: true, writerPID: gone, projectorPID: gone + 1, final: map[int]procReport{gone: stopped}}
	ps := processes(s)
	if ps[0] != stopped {
		t.Errorf("writer: %+v, want its figures at the stop %+v", ps[0], stopped)
	}
	if ps[1].Name != "projector" || ps[1].Note == "" || ps[1].CPUSeconds != 0 {
		t.Errorf("projector, not stopped by the bench and gone: %+v, want the reading's error", ps[1])
	}
}

// TestPeakRatio: figure 23i compares the writer's peak memory after the
// last step with its peak after the second; figure 23 at the defaults
// took it from about 1.2 GB to 6 GB before the catch-up was bounded.
func TestPeakRatio(t *testing.T) {
	steps := scaleSteps("x", 1_000_000, 100)
	r := peakRatio(steps, []int64{50 << 20, 1254 << 20, 6009 << 20})
	if r.Verdict != verdictMiss || !strings.HasPrefix(r.Note, "4.79×: 1254.0 MiB after 1,000,000 keys in 1 project, 6009.0 MiB after 10,000,000 keys over 100 projects") {
		t.Errorf("6 GB after 1.2: %s %q (%s)", r.Verdict, r.Note, r.Target)
	}
	if r := peakRatio(steps, []int64{50 << 20, 96 << 20, 102 << 20}); r.Verdict != verdictPass {
		t.Errorf("flat: %s %q", r.Verdict, r.Note)
	}
	if r := peakRatio(steps, []int64{50 << 20}); r.Verdict != verdictSkip {
		t.Errorf("one step: %s %q", r.Verdict, r.Note)
	}
}
