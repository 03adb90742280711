package e2e

import (
	"os"
	"testing"

	"github.com/eskv/eskv/testenv/procs"
)

// TestMain starts building the service commands (procs.Binaries) before
// the tests run: the tests in the test's process go on meanwhile, and
// the first test that starts a process waits for the build (tens of
// seconds on a loaded machine) instead of holding one of the parallel
// tests' places while it builds them alone.
func TestMain(m *testing.M) {
	procs.Prebuild()
	os.Exit(m.Run())
}
