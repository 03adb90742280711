//go:build !linux

package proc

import "syscall"

// sysProcAttr puts a service in its own process group, so a terminal's
// Ctrl-C reaches only the harness, which stops the services in order.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
