package service

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
)

// buildLabels are eskv_build_info's labels for build b.
func buildLabels(b contract.BuildInfo) prometheus.Labels {
	return prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}
}

// buildInfo is eskv_build_info, 1 with the build's labels (package
// buildinfo: the release's stamps, else the toolchain's record), so a
// dashboard tells which release each component runs and an alert can
// compare them during a rollout.
func buildInfo(b contract.BuildInfo) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "eskv_build_info",
		Help:        "Always 1; the labels name the build: version (the release's, e.g. v1.2.3), revision (the VCS commit) and goversion.",
		ConstLabels: buildLabels(b),
	})
	g.Set(1)
	return g
}
