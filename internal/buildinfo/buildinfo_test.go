package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestResolve: the linker's stamps win; without them the toolchain's
// module version (not "(devel)") and vcs.revision, marked dirty when the
// checkout had changes; what neither tells is "unknown".
func TestResolve(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101000000-abcdef123456"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abcdef123456"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name              string
		version, revision string
		bi                *debug.BuildInfo
		ok                bool
		want              contract.BuildInfo
	}{
		{"StampedWins", "v1.2.3", "0123abc", vcs, true, contract.BuildInfo{Version: "v1.2.3", Revision: "0123abc"}},
		{"UnstampedFallsBackToVCS", "", "", vcs, true, contract.BuildInfo{Version: vcs.Main.Version, Revision: "abcdef123456-dirty"}},
		{"CleanCheckoutNotDirty", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true, contract.BuildInfo{Version: "v1.0.0", Revision: "abc"}},
		{"DevelIsUnknown", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, contract.BuildInfo{Version: Unknown, Revision: Unknown}},
		{"NoBuildInfoIsUnknown", "", "", nil, false, contract.BuildInfo{Version: Unknown, Revision: Unknown}},
		{"StampedVersionOnlyKeepsVCSRevision", "v2.0.0", "", vcs, true, contract.BuildInfo{Version: "v2.0.0", Revision: "abcdef123456-dirty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.GoVersion = runtime.Version()
			if got := resolve(tc.version, tc.revision, tc.bi, tc.ok); got != tc.want {
				t.Errorf("resolve: %+v, want %+v", got, tc.want)
			}
		})
	}
}
