package proc

import "syscall"

// sysProcAttr puts a service in its own process group (a terminal's Ctrl-C
// reaches only the harness, which stops the services in order) and kills
// it if the harness itself dies without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
