// Package buildinfo tells which build a binary is: the release version
// and VCS revision the release build stamps into it with the linker
// (make build, scripts/release.sh:
//
//	-ldflags "-X github.com/eskv/eskv/internal/buildinfo.version=v1.2.3 -X github.com/eskv/eskv/internal/buildinfo.revision=<commit>"
//
// ), else what the Go toolchain recorded (go build, go install
// module@version), and the Go version it was built with.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/eskv/eskv/contract"
)

// The linker's -X sets only package-level strings: these two are the
// stamps, read once by Get and never written by the program.
var (
	version  string
	revision string
)

// Unknown is what a build that recorded nothing (go run with
// -buildvcs=false, a test binary) reports for version or revision.
const Unknown = "unknown"

// Get returns the running binary's build.
func Get() contract.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	return resolve(version, revision, bi, ok)
}

// resolve is the build from the linker's stamps, falling back to the
// toolchain's record: the main module's version unless it is "(devel)"
// (a build from a checkout without a tag go build recognises), and
// vcs.revision, suffixed -dirty when vcs.modified says the checkout had
// changes.
func resolve(version, revision string, bi *debug.BuildInfo, ok bool) contract.BuildInfo {
	b := contract.BuildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if ok && b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.Version = bi.Main.Version
	}
	if ok && b.Revision == "" {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" && dirty {
			rev += "-dirty"
		}
		b.Revision = rev
	}
	if b.Version == "" {
		b.Version = Unknown
	}
	if b.Revision == "" {
		b.Revision = Unknown
	}
	return b
}

// Line is the one line a binary's --version prints: its name, version,
// revision and Go version.
func Line(name string, b contract.BuildInfo) string {
	return fmt.Sprintf("%s %s (revision %s, %s)", name, b.Version, b.Revision, b.GoVersion)
}
