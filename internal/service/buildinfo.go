package service

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// unknownBuild labels what a binary built without module or VCS
// information (go run, a test binary) cannot tell.
const unknownBuild = "unknown"

// buildLabels are the version, revision and Go version the binary was
// built from: the main module's version ("(devel)" for a build from a
// checkout), the VCS revision Go stamped into it (suffixed "-dirty" when
// the checkout had changes) and runtime.Version().
func buildLabels(bi *debug.BuildInfo, ok bool) prometheus.Labels {
	l := prometheus.Labels{"version": unknownBuild, "revision": unknownBuild, "goversion": runtime.Version()}
	if !ok {
		return l
	}
	if bi.Main.Version != "" {
		l["version"] = bi.Main.Version
	}
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			l["revision"] = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && l["revision"] != unknownBuild {
		l["revision"] += "-dirty"
	}
	return l
}

// buildInfo is eskv_build_info, 1 with the build's labels, so a
// dashboard tells which release each component runs and an alert can
// compare them during a rollout.
func buildInfo() prometheus.Collector {
	bi, ok := debug.ReadBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "eskv_build_info",
		Help:        "Always 1; the labels name the build: version (the module's), revision (vcs.revision) and goversion.",
		ConstLabels: buildLabels(bi, ok),
	})
	g.Set(1)
	return g
}
