//go:build !linux

package main

import "syscall"

// procAttr puts a service in its own process group, so a terminal's Ctrl-C
// reaches only the harness, which stops the services in order.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
