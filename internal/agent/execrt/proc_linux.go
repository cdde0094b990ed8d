package execrt

import "syscall"

// parentDeathSignal has the kernel SIGKILL the process if the agent dies
// (is killed) without stopping it, so that a restarted agent does not find
// its port taken by an orphan of the last one. The kernel ties the signal to
// the thread that forked, and Go only ends a thread when a goroutine locked
// to it exits, which the agent does not do, so here it is as good as tied to
// the process. Grandchildren are not covered.
func parentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
