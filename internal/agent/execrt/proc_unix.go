//go:build unix

package execrt

import (
	"fmt"
	"os"
	"syscall"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// sysProcAttr puts the process in a process group of its own, so that a
// stop signals everything it started, and (on Linux) has the kernel kill it
// if the agent dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	parentDeathSignal(a)
	return a
}

// signalGroup signals the process group led by pid. A group that is gone
// is not an error: that is what stopping wants.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		_ = syscall.Kill(-pid, sig)
	}
}

func exitReason(ps *os.ProcessState) string {
	if ps == nil {
		return "exit status unknown"
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}
