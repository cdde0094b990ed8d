package devlaunch

import "syscall"

// sysProcAttr puts the server in its own process group when asked, and
// asks the kernel to send it SIGTERM should the caller die first.
func sysProcAttr(ownGroup, dieWithParent bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: ownGroup}
	if dieWithParent {
		a.Pdeathsig = syscall.SIGTERM
	}
	return a
}
