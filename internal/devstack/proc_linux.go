package devstack

import "syscall"

// sysProcAttr puts the dev server in its own process group, so that the
// terminal's Ctrl-C reaches only the stack, which stops the server last,
// after the worker; and asks the kernel to stop it should the stack itself
// die without stopping it, so that no orphaned server keeps the ports.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
