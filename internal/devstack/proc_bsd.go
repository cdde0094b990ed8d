//go:build unix && !linux

package devstack

import "syscall"

// sysProcAttr puts the dev server in its own process group, so that the
// terminal's Ctrl-C reaches only the stack, which stops the server last,
// after the worker.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
