//go:build !unix

package kvcli

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup does nothing where there are no process groups.
func ownGroup(*exec.Cmd) {}

// signalGroup sends s to p; where p cannot take it, p is killed.
func signalGroup(p *os.Process, s os.Signal) {
	if s == syscall.SIGKILL || p.Signal(s) != nil {
		_ = p.Kill()
	}
}

// exitStatus is a finished process's exit code.
func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
