package service

import (
	"runtime"
	"runtime/debug"
	"testing"
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

// TestBuildLabels: the revision comes from vcs.revision, marked dirty
// when the checkout had changes; what the build does not tell is
// "unknown".
func TestBuildLabels(t *testing.T) {
	for _, tc := range []struct {
		name              string
		bi                *debug.BuildInfo
		ok                bool
		version, revision string
	}{
		{"OKNoBuildInfo", nil, false, "unknown", "unknown"},
		{"OKNoVCS", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "(devel)", "unknown"},
		{"OKRevision", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}}, true, "v1.2.3", "abc123"},
		{"OKDirty", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "abc123"}}}, true, "(devel)", "abc123-dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := buildLabels(tc.bi, tc.ok)
			if l["version"] != tc.version || l["revision"] != tc.revision || l["goversion"] != runtime.Version() {
				t.Errorf("labels %v, want version %s revision %s", l, tc.version, tc.revision)
			}
		})
	}
}
