package service

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestBuildInfo: every registry from NewRegistry exports eskv_build_info
// = 1 labelled with the build's version, revision and Go version.
func TestBuildInfo(t *testing.T) {
	families, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, f := range families {
		if f.GetName() != "eskv_build_info" {
			continue
		}
		found = true
		m := f.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("eskv_build_info: %v, want one series at 1", m)
		}
		labels := map[string]string{}
		for _, l := range m[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["goversion"] != runtime.Version() || labels["version"] == "" || labels["revision"] == "" || len(labels) != 3 {
			t.Errorf("labels %v", labels)
		}
	}
	if !found {
		t.Fatal("no eskv_build_info")
	}
}

// TestBuildLabels: the metric's labels are the build's fields, named as
// Prometheus spells them.
func TestBuildLabels(t *testing.T) {
	l := buildLabels(contract.BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.8"})
	if l["version"] != "v1.2.3" || l["revision"] != "abc123" || l["goversion"] != "go1.26.8" || len(l) != 3 {
		t.Errorf("labels %v", l)
	}
}

// TestVersioned: --version and -version alone print the build and run
// nothing; any other arguments (a flag named otherwise, --version among
// others) reach the command.
func TestVersioned(t *testing.T) {
	b := contract.BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.8"}
	for _, tc := range []struct {
		name    string
		args    []string
		printed bool
	}{
		{"DoubleDashPrints", []string{"--version"}, true},
		{"SingleDashPrints", []string{"-version"}, true},
		{"OtherArgumentsRun", []string{"-h"}, false},
		{"VersionAmongOthersRuns", []string{"serve", "--version"}, false},
		{"NoArgumentsRun", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran bool
			run := func(context.Context, []string, io.Writer, io.Writer) error { ran = true; return nil }
			var out bytes.Buffer
			if err := Versioned("writer", b, run)(t.Context(), tc.args, &out, io.Discard); err != nil {
				t.Fatal(err)
			}
			const want = "writer v1.2.3 (revision abc123, go1.26.8)\n"
			if ran == tc.printed || (out.String() == want) != tc.printed {
				t.Errorf("ran %v, printed %q", ran, out.String())
			}
		})
	}
}
