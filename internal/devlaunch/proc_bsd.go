//go:build unix && !linux

package devlaunch

import "syscall"

// sysProcAttr puts the server in its own process group when asked. There
// is no parent-death signal outside Linux.
func sysProcAttr(ownGroup, _ bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
