//go:build unix

package kvcli

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts c in a process group of its own, so that signals reach
// everything CMD started.
func ownGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends s to p's process group.
func signalGroup(p *os.Process, s os.Signal) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(-p.Pid, sig)
}

// exitStatus is a finished process's status as a shell reports it:
// 128+N when signal N ended it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
