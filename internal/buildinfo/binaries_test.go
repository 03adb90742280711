package buildinfo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBinariesPrintTheirStamp builds every command of cmd/ once, stamped
// as make build and scripts/release.sh stamp them, and runs each with
// --version and -version: each prints its name and the stamped version
// and revision, exits 0 and starts nothing.
func TestBinariesPrintTheirStamp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every command")
	}
	t.Parallel()
	dir := t.TempDir()
	const stamp = "-X github.com/eskv/eskv/internal/buildinfo.version=v1.2.3 -X github.com/eskv/eskv/internal/buildinfo.revision=0123abc"
	build := exec.Command("go", "build", "-ldflags", stamp, "-o", dir+string(os.PathSeparator), "./cmd/...")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, name := range []string{"writer", "projector", "auditor", "devbroker", "kvctl", "kvstore"} {
		for _, flag := range []string{"--version", "-version"} {
			t.Run(name+flag, func(t *testing.T) {
				cmd := exec.Command(filepath.Join(dir, name), flag)
				cmd.Env = []string{"HOME=" + t.TempDir()}
				out, err := cmd.Output()
				if want := name + " v1.2.3 (revision 0123abc, " + runtime.Version() + ")"; err != nil || strings.TrimSpace(string(out)) != want {
					t.Errorf("%s %s: %v, %q; want %q", name, flag, err, out, want)
				}
			})
		}
	}
}
